-- serve/tensor.lua: the generic JSON contract of ds.serve, the default input adapter: any saved model by its input
-- specs. Request {"inputs": {name: value}, "encoding": "json"|"base64"}, a value nested arrays (the input's shape,
-- batch dim included) or {"dtype", "shape", "base64"} (little-endian bytes); reply {"outputs": {name: value}} the
-- same way. Requests batch when every input's first dim is the same symbolic dim ("batch") and no other dim is
-- symbolic: their rows are stacked (rows up to a power of two repeat the first) and each gets its own rows back.
--
-- An input adapter (this one, serve/image.lua, serve/text.lua, or any module named by a model's "adapter" setting)
-- is a table: row(req, model, settings) -> row | nil, error (row.n: rows it adds, default 1; row.key: rows of
-- different keys never share a call; row.tokens: its share of max_tokens); batch(rows, settings) -> the model's
-- inputs {{dtype, shape, bytes}}; reply(outputs, req, model, settings) -> the JSON reply, outputs being this
-- request's rows of each model output {{dtype, shape, bytes}}; optional shapes(settings, specs) -> batches to
-- compile at start ("warm"; specs: the graph file's inputs). model: {version, info = {inputs = specs}, vocab}.
local ffi = require("ffi")
local dtype = require("ds.dtype")
local util = require("ds.serve.util")

local M = {}

-- a flat list of the leaves of nested arrays v of rank `rank` -> leaves, shape; or nil, error
local function flatten(v, rank, what)
  local shape, level = {}, v
  for d = 1, rank do
    if type(level) ~= "table" then return nil, string.format("%s must be nested arrays of rank %d", what, rank) end
    shape[d] = #level
    if #level == 0 then return nil, string.format("%s has an empty dim %d", what, d) end
    level = level[1]
  end
  local out = {}
  local function walk(x, d)
    if d > rank then
      out[#out + 1] = x
      return true
    end
    if type(x) ~= "table" or #x ~= shape[d] then
      return nil, string.format("%s is ragged: dim %d should have %d entries everywhere", what, d, shape[d])
    end
    for i = 1, #x do
      local ok, err = walk(x[i], d + 1)
      if not ok then return nil, err end
    end
    return true
  end
  local ok, err = walk(v, 1)
  if not ok then return nil, err end
  return out, shape
end

-- a leaf as dtype dt, or nil and why not
local function leaf(x, dt, what, i)
  if dt == "bool" then
    if x == true or x == 1 then return 1 elseif x == false or x == 0 then return 0 end
  elseif type(x) == "number" then
    if dtype.is_float[dt] then return x end
    local lo, hi = -2 ^ 53, 2 ^ 53
    if dt == "u8" then lo, hi = 0, 255 elseif dt == "i32" then lo, hi = -2 ^ 31, 2 ^ 31 - 1 end
    if x == math.floor(x) and x >= lo and x <= hi then return x end
  end
  return nil, string.format("%s: entry %d (%s) is not a %s value", what, i, tostring(x), dt)
end

-- value (nested arrays or {dtype, shape, base64}) for the input `spec` -> {dtype, shape, bytes}, or nil, error.
-- dims: symbolic dim name -> size, shared by a request's inputs (the same name must have the same size).
function M.decode(value, spec, dims)
  local what = "input '" .. spec.name .. "'"
  local rank, dt = #spec.shape, spec.dtype
  local shape, bytes
  if type(value) == "table" and value.base64 ~= nil then
    for k in pairs(value) do
      if k ~= "dtype" and k ~= "shape" and k ~= "base64" then
        return nil, string.format("%s: unknown field '%s' (dtype, shape, base64)", what, tostring(k))
      end
    end
    if value.dtype ~= dt then
      return nil, string.format("%s: dtype must be \"%s\", got %s", what, dt, tostring(value.dtype))
    end
    if type(value.shape) ~= "table" or #value.shape ~= rank then
      return nil, string.format("%s: shape must be a list of %d sizes", what, rank)
    end
    shape = {}
    for d = 1, rank do
      local n = value.shape[d]
      if type(n) ~= "number" or n < 1 or n ~= math.floor(n) then return nil, what .. ": shape has a bad size" end
      shape[d] = n
    end
    bytes = type(value.base64) == "string" and ngx.decode_base64(value.base64)
    if not bytes then return nil, what .. ": base64 is not valid base64" end
    local want = dtype.size[dt]
    for d = 1, rank do want = want * shape[d] end
    if #bytes ~= want then
      return nil, string.format("%s: %d bytes of base64 data, shape and dtype need %d", what, #bytes, want)
    end
  else
    local leaves, err
    if rank == 0 then leaves, shape = { value }, {} else leaves, shape = flatten(value, rank, what) end
    if not leaves then return nil, err or shape end
    local buf = ffi.new(dtype.ctype[dt] .. "[?]", #leaves)
    for i, x in ipairs(leaves) do
      local v, lerr = leaf(x, dt, what, i)
      if not v then return nil, lerr end
      buf[i - 1] = v
    end
    bytes = ffi.string(buf, #leaves * dtype.size[dt])
  end
  for d = 1, rank do
    local want = spec.shape[d]
    if type(want) == "number" then
      if shape[d] ~= want then return nil, string.format("%s: dim %d must be %d, got %d", what, d, want, shape[d]) end
    elseif dims[want] and dims[want] ~= shape[d] then
      return nil, string.format("%s: dim %d is '%s' = %d in another input, got %d", what, d, want, dims[want], shape[d])
    else
      dims[want] = shape[d]
    end
  end
  return { dtype = dt, shape = shape, bytes = bytes }
end

-- {dtype, shape, bytes} -> nested arrays of numbers (bool as true/false), or {dtype, shape, base64}
function M.encode(t, encoding)
  if encoding == "base64" then return { dtype = t.dtype, shape = t.shape, base64 = ngx.encode_base64(t.bytes) } end
  local p = ffi.cast(dtype.ctype[t.dtype] .. " *", t.bytes)
  local at = 0
  local function build(d)
    if d > #t.shape then
      local v = p[at]; at = at + 1
      if t.dtype == "bool" then return v ~= 0 end
      return tonumber(v)
    end
    local out = {}
    for i = 1, t.shape[d] do out[i] = build(d + 1) end
    return out
  end
  return build(1)
end

-- rows first .. first + n - 1 (1-based, along dim 1) of {dtype, shape, bytes}
function M.rows(t, first, n)
  local per = #t.bytes / t.shape[1]
  local shape = { n }
  for d = 2, #t.shape do shape[d] = t.shape[d] end
  return { dtype = t.dtype, shape = shape, bytes = t.bytes:sub((first - 1) * per + 1, (first - 1 + n) * per) }
end

-- the batch dim of specs: the name of the symbolic first dim all inputs share (no other dim symbolic), or nil
local function batch_dim(specs)
  local name
  for _, s in ipairs(specs) do
    local first = s.shape[1]
    if type(first) ~= "string" or (name and first ~= name) then return nil end
    name = first
    for d = 2, #s.shape do if type(s.shape[d]) ~= "number" then return nil end end
  end
  return name
end

local ENCODINGS = { json = true, base64 = true }
local FIELDS = { inputs = true, encoding = true, timeout_ms = true }

function M.row(req, model)
  for k in pairs(req) do
    if not FIELDS[k] then
      return nil, string.format("unknown field '%s' (inputs, encoding, timeout_ms)", tostring(k))
    end
  end
  if req.encoding ~= nil and not ENCODINGS[req.encoding] then
    return nil, "'encoding' must be \"json\" or \"base64\""
  end
  local specs, given = model.info.inputs, req.inputs
  local names = {}
  for i, s in ipairs(specs) do names[i] = s.name end
  if type(given) ~= "table" then
    return nil, "missing field 'inputs' (an object with the inputs " .. table.concat(names, ", ") .. ")"
  end
  local known = {}
  for _, s in ipairs(specs) do known[s.name] = true end
  for k in pairs(given) do
    if not known[k] then
      return nil, string.format("no input named '%s' (the model's inputs: %s)", tostring(k), table.concat(names, ", "))
    end
  end
  local dims, inputs = {}, {}
  for i, s in ipairs(specs) do
    if given[s.name] == nil then return nil, string.format("missing input '%s'", s.name) end
    local t, err = M.decode(given[s.name], s, dims)
    if not t then return nil, err end
    inputs[i] = t
  end
  local bd = batch_dim(specs)
  -- rows of a model without a batch dim run alone: a key of their own
  return { inputs = inputs, n = bd and dims[bd] or 1, key = not bd and {} or nil, batched = bd ~= nil, whole = not bd }
end

function M.batch(rows)
  if not rows[1].batched then return rows[1].inputs end
  local total = 0
  for _, r in ipairs(rows) do total = total + r.n end
  local B = util.pow2(total)
  local out = {}
  for i, first in ipairs(rows[1].inputs) do
    local parts = {}
    for _, r in ipairs(rows) do parts[#parts + 1] = r.inputs[i].bytes end
    -- rows past the real ones repeat the first row (every row is computed on its own: DESIGN.md)
    local row1 = M.rows(first, 1, 1).bytes
    for _ = total + 1, B do parts[#parts + 1] = row1 end
    local shape = { B }
    for d = 2, #first.shape do shape[d] = first.shape[d] end
    out[i] = { dtype = first.dtype, shape = shape, bytes = table.concat(parts) }
  end
  return out
end

-- the batches warm compiles at start for a model that batches: one per power of two up to max_batch, every value
-- 1 (a valid 1-based id too)
function M.shapes(settings, specs)
  if not batch_dim(specs) then return {} end
  local out, n = {}, 1
  while true do
    local inputs = {}
    for i, s in ipairs(specs) do
      local shape, count = { n }, n
      for d = 2, #s.shape do shape[d] = s.shape[d]; count = count * s.shape[d] end
      local buf = ffi.new(dtype.ctype[s.dtype] .. "[?]", count)
      for k = 0, count - 1 do buf[k] = 1 end
      inputs[i] = { dtype = s.dtype, shape = shape, bytes = ffi.string(buf, count * dtype.size[s.dtype]) }
    end
    out[#out + 1] = inputs
    if n >= settings.max_batch then return out end
    n = n * 2
  end
end

function M.reply(outputs, req, _, settings)
  local out = {}
  for i, t in ipairs(outputs) do
    out[settings.outputs and settings.outputs[i] or ("output" .. i)] = M.encode(t, req.encoding)
  end
  return { outputs = out }
end

return M
