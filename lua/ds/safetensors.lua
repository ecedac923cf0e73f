-- safetensors.lua: the safetensors layout, written and read in one place (ds.save_state/load_state,
-- ds.save, ds.load). Layout: u64 little-endian header length N, N bytes of JSON
--   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
-- (offsets relative to the byte buffer after the header), then the raw little-endian bytes.
local ffi = require("ffi")
local cjson = require("cjson.safe")
local dsffi = require("ds.ffi")
local dtype = require("ds.dtype")
local Tensor = require("ds.tensor")

local C = dsffi.C
local M = {}

assert(ffi.abi("le"), "safetensors: ds assumes a little-endian machine")

-- ds dtype -> safetensors dtype (BF16 and F16 are the IEEE/bfloat16 bits, little-endian, as torch writes them)
M.TO = { f32 = "F32", f64 = "F64", i64 = "I64", i32 = "I32", u8 = "U8", bool = "BOOL", bf16 = "BF16", f16 = "F16",
         i8 = "I8" }
M.FROM = {}
for k, v in pairs(M.TO) do M.FROM[v] = k end
local READS = {} -- "F32, F64, ..." in ds's dtype order, for the error naming what ds reads
for _, dt in ipairs(dtype.names) do READS[#READS + 1] = M.TO[dt] end
READS = table.concat(READS, ", ")

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local function u64le(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(b)
end

-- The file as chunks for files.write_*: the header (written by hand so empty shapes stay arrays and
-- integers exact; padded so the data starts 8-byte aligned), then each tensor's bytes (name order).
-- named: name -> contiguous tensor (the caller checked them); metadata: string -> string, or nil.
function M.chunks(named, metadata, fail)
  local parts, chunks, offset = {}, {}, 0
  if metadata then
    local m = {}
    for _, k in ipairs(sorted_keys(metadata)) do
      local v = metadata[k]
      if type(k) ~= "string" or type(v) ~= "string" then
        fail("metadata keys and values must be strings (key " .. tostring(k) .. ")")
      end
      m[#m + 1] = cjson.encode(k) .. ":" .. cjson.encode(v)
    end
    parts[#parts + 1] = '"__metadata__":{' .. table.concat(m, ",") .. "}"
  end
  for _, name in ipairs(sorted_keys(named)) do
    local t = named[name]
    local dims = {}
    for d, n in ipairs(t._shape) do dims[d] = string.format("%d", n) end
    local nbytes = t:numel() * t:element_size()
    parts[#parts + 1] = string.format('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}',
      cjson.encode(name), M.TO[t.dtype], table.concat(dims, ","), offset, offset + nbytes)
    chunks[#chunks + 1] = { t:data_ptr(), nbytes, t }
    offset = offset + nbytes
  end
  local json = "{" .. table.concat(parts, ",") .. "}"
  json = json .. string.rep(" ", (8 - #json % 8) % 8)
  table.insert(chunks, 1, u64le(#json) .. json)
  return chunks
end

local function is_count(v) return type(v) == "number" and v >= 0 and v == math.floor(v) and v < 2 ^ 53 end

-- one header entry -> { dtype, shape, offset (absolute in the file), nbytes }
local function check_entry(name, e, data_start, data_len, fail)
  local where = "tensor '" .. name .. "'"
  if type(e) ~= "table" then fail(where .. ": entry is not a JSON object") end
  local st = e.dtype
  if type(st) ~= "string" then fail(where .. ": missing dtype") end
  local dt = M.FROM[st]
  if not dt then fail(string.format("%s: unknown dtype '%s' (ds reads %s)", where, st, READS)) end
  local shape = e.shape
  if type(shape) ~= "table" then fail(where .. ": missing shape") end
  for k in pairs(shape) do
    if type(k) ~= "number" or k < 1 or k > #shape or k ~= math.floor(k) then
      fail(where .. ": shape is not a JSON array")
    end
  end
  if #shape > 8 then fail(string.format("%s: %d dims (ds tensors have at most 8)", where, #shape)) end
  -- numel, and the product of the nonzero dims (every stride of the tensor divides it): both must stay exact
  local numel, span = 1, dtype.size[dt]
  for i = 1, #shape do
    if not is_count(shape[i]) then fail(string.format("%s: shape entry %d is not a non-negative integer", where, i)) end
    numel = numel * shape[i]
    if shape[i] > 0 then span = span * shape[i] end
    if span >= 2 ^ 53 then fail(string.format("%s: shape [%s] is too large", where, table.concat(shape, ","))) end
  end
  local off = e.data_offsets
  if type(off) ~= "table" or #off ~= 2 or not is_count(off[1]) or not is_count(off[2]) then
    fail(where .. ": data_offsets must be [begin, end] with non-negative integers")
  end
  local b, en = off[1], off[2]
  if en < b then fail(string.format("%s: data_offsets [%d, %d] end before they begin", where, b, en)) end
  if en > data_len then
    fail(string.format("%s: data_offsets [%d, %d] out of range: the data buffer has %d bytes (file truncated?)",
      where, b, en, data_len))
  end
  if numel * dtype.size[dt] ~= en - b then
    fail(string.format("%s: shape [%s] of %s needs %d bytes but data_offsets [%d, %d] hold %d", where,
      table.concat(shape, ","), st, numel * dtype.size[dt], b, en, en - b))
  end
  local s = {}
  for i = 1, #shape do s[i] = shape[i] end
  return { name = name, dtype = dt, shape = s, offset = data_start + b, nbytes = en - b }
end

-- The one reader: bytes (a pointer to size bytes of a whole file) -> entries (name -> { dtype, shape,
-- offset, nbytes }, offset absolute in the file), metadata (string -> string). Checks the header length,
-- the JSON, every entry (dtype, shape, offsets inside the data and matching the shape) and that no two
-- tensors share bytes; fail(msg) raises. Allocates no tensor.
function M.parse(bytes, size, fail)
  if size < 8 then fail(string.format("truncated: %d bytes, not even the 8-byte header length", size)) end
  local n = 0
  for i = 7, 0, -1 do n = n * 256 + bytes[i] end
  if n > size - 8 then
    fail(string.format("header length %d goes beyond the end of the file (%d bytes): " ..
      "truncated or not a safetensors file", n, size))
  end
  local json, jerr = cjson.decode(ffi.string(bytes + 8, n))
  if json == nil then fail("header is not valid JSON (" .. tostring(jerr) .. ")") end
  if type(json) ~= "table" or (next(json) ~= nil and json[1] ~= nil) then fail("header is not a JSON object") end
  local entries, metadata, list = {}, {}, {}
  for name, e in pairs(json) do
    if name == "__metadata__" then
      if type(e) ~= "table" then fail("__metadata__ is not a JSON object") end
      for k, v in pairs(e) do
        if type(v) ~= "string" then fail("__metadata__ value of '" .. tostring(k) .. "' is not a string") end
        metadata[k] = v
      end
    else
      if type(name) ~= "string" then fail("header is not a JSON object") end
      local entry = check_entry(name, e, 8 + n, size - 8 - n, fail)
      entries[name] = entry
      list[#list + 1] = entry
    end
  end
  table.sort(list, function(a, b) return a.offset < b.offset or (a.offset == b.offset and a.nbytes < b.nbytes) end)
  for i = 2, #list do
    local p, q = list[i - 1], list[i]
    if q.offset < p.offset + p.nbytes then
      fail(string.format("tensors '%s' [%d, %d] and '%s' [%d, %d] overlap", p.name, p.offset - 8 - n,
        p.offset + p.nbytes - 8 - n, q.name, q.offset - 8 - n, q.offset + q.nbytes - 8 - n))
    end
  end
  return entries, metadata
end

-- The tensor of an entry of the file at bytes. owner given: a view of the bytes when they are aligned for
-- the dtype (owner is kept alive with the tensor), else a copy; owner nil: always a copy.
function M.tensor(entry, bytes, owner, fail)
  local dt, ptr = entry.dtype, bytes + entry.offset
  if owner and entry.nbytes > 0 and tonumber(ffi.cast("uintptr_t", ptr)) % dtype.size[dt] == 0 then
    local shape = ffi.new("int64_t[8]", entry.shape)
    local c = dsffi.check(C.ds_tensor_wrap(ptr, entry.nbytes, dtype.code[dt], #entry.shape, shape),
      function(msg) fail("tensor '" .. entry.name .. "': " .. msg) end)
    local t = Tensor._wrap(c, entry.shape, dt)
    rawset(t, "_file_bytes", owner)
    return t
  end
  local t = Tensor._empty(dt, entry.shape, "load")
  if entry.nbytes > 0 then ffi.copy(t:data_ptr(), ptr, entry.nbytes) end
  return t
end

return M
