-- state_file.lua: named tensors to and from files in the safetensors layout (ds.save_state / ds.load_state).
-- Layout: u64 little-endian header length N, N bytes of JSON
--   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
-- (offsets relative to the byte buffer after the header), then the raw little-endian bytes.
-- M.write(path, tensors, metadata) / M.read(path) -> tensors, metadata are reused by ds.save for graphs.
local ffi = require("ffi")
local cjson = require("cjson.safe")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")

local M = {}

assert(ffi.abi("le"), "state_file: ds assumes a little-endian machine")

local to_st = { f32 = "F32", f64 = "F64", i64 = "I64", i32 = "I32", u8 = "U8", bool = "BOOL" }
local from_st = {}
for k, v in pairs(to_st) do from_st[v] = k end
local elsize = { F32 = 4, F64 = 8, I64 = 8, I32 = 4, U8 = 1, BOOL = 1 }
M.dtype_to_safetensors, M.dtype_from_safetensors = to_st, from_st

local function fail(path, msg) errors.raise(string.format("state file %s: %s", path, msg)) end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- the bytes of n as a u64 little-endian string
local function u64le(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(b)
end

local function u64le_decode(s)
  local n = 0
  for i = 8, 1, -1 do n = n * 256 + s:byte(i) end
  return n
end

-- JSON header; written by hand so empty shapes stay arrays ([]) and integers stay exact
local function header_json(path, names, tensors, metadata)
  local parts, offset = {}, 0
  if metadata then
    local m = {}
    for _, k in ipairs(sorted_keys(metadata)) do
      local v = metadata[k]
      if type(k) ~= "string" or type(v) ~= "string" then
        fail(path, "metadata keys and values must be strings (key " .. tostring(k) .. ")")
      end
      m[#m + 1] = cjson.encode(k) .. ":" .. cjson.encode(v)
    end
    parts[#parts + 1] = '"__metadata__":{' .. table.concat(m, ",") .. "}"
  end
  for i, name in ipairs(names) do
    local t = tensors[i]
    local dims = {}
    for d, n in ipairs(t._shape) do dims[d] = string.format("%d", n) end
    local nbytes = t:numel() * t:element_size()
    parts[#parts + 1] = string.format('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}',
      cjson.encode(name), to_st[t.dtype], table.concat(dims, ","), offset, offset + nbytes)
    offset = offset + nbytes
  end
  local json = "{" .. table.concat(parts, ",") .. "}"
  -- pad with spaces so the data starts 8-byte aligned (as the reference writer does)
  return json .. string.rep(" ", (8 - #json % 8) % 8)
end

local tmp_count = 0

-- Write named tensors (a table name -> tensor) and optional string metadata to path, atomically.
function M.write(path, named, metadata)
  if type(path) ~= "string" then errors.raise("save_state: path must be a string, got " .. type(path)) end
  if type(named) ~= "table" or Tensor.is_tensor(named) then
    errors.raise("save_state: expected a table of name -> tensor, got " .. (Tensor.is_tensor(named) and "a tensor" or type(named)))
  end
  local names, tensors = {}, {}
  for _, name in ipairs(sorted_keys(named)) do
    local t = named[name]
    if type(name) ~= "string" then fail(path, "tensor names must be strings, got " .. type(name) .. " " .. tostring(name)) end
    if name == "__metadata__" then fail(path, "'__metadata__' is reserved and cannot name a tensor") end
    if not Tensor.is_tensor(t) then fail(path, string.format("'%s' is a %s, not a tensor", name, type(t))) end
    if not t._c then fail(path, string.format("'%s' is an abstract tensor (tracing); it has no values to save", name)) end
    names[#names + 1] = name
    tensors[#tensors + 1] = t:is_contiguous() and t or t:contiguous()
  end
  local header = header_json(path, names, tensors, metadata)
  local dir = path:match("^(.*)/[^/]*$") or "."
  tmp_count = tmp_count + 1
  local unique = string.format("%d-%s-%d", os.time(), tostring({}):match("0x(%x+)") or "", tmp_count)
  local tmp = string.format("%s/.%s.%s.tmp", dir, path:match("([^/]*)$"), unique)
  local f, err = io.open(tmp, "wb")
  if not f then fail(path, "cannot write: " .. tostring(err)) end
  local ok, werr = f:write(u64le(#header), header)
  for _, t in ipairs(tensors) do
    if not ok then break end
    local n = t:numel() * t:element_size()
    if n > 0 then ok, werr = f:write(ffi.string(t:data_ptr(), n)) end
  end
  local closed, cerr = f:close()
  if not ok or not closed then
    os.remove(tmp)
    fail(path, "write failed: " .. tostring(werr or cerr))
  end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then os.remove(tmp); fail(path, "cannot rename the temporary file into place: " .. tostring(rerr)) end
end

local function is_count(v) return type(v) == "number" and v >= 0 and v == math.floor(v) and v < 2 ^ 53 end

-- check one header entry; returns dtype, shape, begin, end (offsets relative to the data buffer)
local function check_entry(path, name, e, buffer_len)
  local where = "tensor '" .. name .. "'"
  if type(e) ~= "table" then fail(path, where .. ": entry is not a JSON object") end
  local st = e.dtype
  if type(st) ~= "string" then fail(path, where .. ": missing dtype") end
  if not from_st[st] then
    fail(path, string.format("%s: unknown dtype '%s' (ds reads F32, F64, I64, I32, U8, BOOL)", where, st))
  end
  local shape = e.shape
  if type(shape) ~= "table" then fail(path, where .. ": missing shape") end
  if #shape > 8 then fail(path, string.format("%s: %d dims (ds tensors have at most 8)", where, #shape)) end
  local numel = 1
  for i = 1, #shape do
    if not is_count(shape[i]) then fail(path, string.format("%s: shape entry %d is not a non-negative integer", where, i)) end
    numel = numel * shape[i]
  end
  for k in pairs(shape) do
    if type(k) ~= "number" or k > #shape then fail(path, where .. ": shape is not a JSON array") end
  end
  local off = e.data_offsets
  if type(off) ~= "table" or #off ~= 2 or not is_count(off[1]) or not is_count(off[2]) then
    fail(path, where .. ": data_offsets must be [begin, end] with non-negative integers")
  end
  local b, en = off[1], off[2]
  if en < b then fail(path, string.format("%s: data_offsets [%d, %d] end before they begin", where, b, en)) end
  if en > buffer_len then
    fail(path, string.format("%s: data_offsets [%d, %d] out of range: the data buffer has %d bytes (file truncated?)",
      where, b, en, buffer_len))
  end
  if numel * elsize[st] ~= en - b then
    fail(path, string.format("%s: shape [%s] of %s needs %d bytes but data_offsets [%d, %d] hold %d", where,
      table.concat(shape, ","), st, numel * elsize[st], b, en, en - b))
  end
  local s = {}
  for i = 1, #shape do s[i] = shape[i] end
  return from_st[st], s, b, en
end

-- Read a state file: returns tensors (name -> tensor), metadata (name -> string, or an empty table).
function M.read(path)
  if type(path) ~= "string" then errors.raise("load_state: path must be a string, got " .. type(path)) end
  local f, err = io.open(path, "rb")
  if not f then fail(path, "cannot open: " .. tostring(err)) end
  local size = f:seek("end")
  f:seek("set", 0)
  local close_fail = function(msg) f:close(); fail(path, msg) end
  if size < 8 then close_fail(string.format("truncated: %d bytes, not even the 8-byte header length", size)) end
  local n = u64le_decode(f:read(8))
  if n > size - 8 then
    close_fail(string.format("header length %d goes beyond the end of the file (%d bytes): truncated or not a safetensors file", n, size))
  end
  local header = f:read(n) or ""
  local json, jerr = cjson.decode(header)
  if json == nil then close_fail("header is not valid JSON (" .. tostring(jerr) .. ")") end
  if type(json) ~= "table" or (next(json) ~= nil and json[1] ~= nil) then close_fail("header is not a JSON object") end
  local buffer_len = size - 8 - n
  local metadata = {}
  local entries = {}
  for name, e in pairs(json) do
    if name == "__metadata__" then
      if type(e) ~= "table" then close_fail("__metadata__ is not a JSON object") end
      for k, v in pairs(e) do
        if type(v) ~= "string" then close_fail("__metadata__ value of '" .. tostring(k) .. "' is not a string") end
        metadata[k] = v
      end
    else
      local ok, dt, shape, b, en = pcall(check_entry, path, name, e, buffer_len)
      if not ok then f:close(); error(dt, 0) end
      entries[#entries + 1] = { name = name, dtype = dt, shape = shape, b = b, e = en }
    end
  end
  -- no two tensors may share bytes
  table.sort(entries, function(a, b) return a.b < b.b or (a.b == b.b and a.e < b.e) end)
  for i = 2, #entries do
    local p, q = entries[i - 1], entries[i]
    if q.b < p.e then
      close_fail(string.format("tensors '%s' [%d, %d] and '%s' [%d, %d] overlap", p.name, p.b, p.e, q.name, q.b, q.e))
    end
  end
  local tensors = {}
  for _, e in ipairs(entries) do
    local t = Tensor._empty(e.dtype, e.shape, "load_state")
    local nbytes = e.e - e.b
    if nbytes > 0 then
      f:seek("set", 8 + n + e.b)
      local bytes = f:read(nbytes)
      if not bytes or #bytes ~= nbytes then close_fail("short read of tensor '" .. e.name .. "'") end
      ffi.copy(t:data_ptr(), bytes, nbytes)
    end
    tensors[e.name] = t
  end
  f:close()
  return tensors, metadata
end

function M.install(ds)
  ds.state_file = M
  -- ds.save_state(tbl, path [, metadata]) / ds.load_state(path) -> tensors, metadata
  function ds.save_state(tbl, path, metadata) return M.write(path, tbl, metadata) end
  function ds.load_state(path) return M.read(path) end
end

return M
