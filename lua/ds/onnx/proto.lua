-- onnx/proto.lua: ONNX protobuf messages <-> plain Lua tables, through protobuf-c's reflection (descriptors of
-- the C generated from Debian's onnx.proto, built by the Makefile into libds_onnx.so).
--[[ A message is a Lua table keyed by the proto field names of onnx.proto: scalars are Lua numbers (int64 too:
  exact up to 2^53), booleans for bool, strings for string and bytes, tables for messages, Lua lists for
  repeated fields (an empty one reads as a shared empty list: a table's metatable per message type supplies it,
  so an empty message costs one small table). Absent optional fields are nil. encode(type, tbl) builds the C
  message in FFI memory that this module keeps alive until protobuf_c_message_pack has run; decode(type, bytes)
  measures the wire format first (src/onnx/onnx_depth.c: nesting, repeated counts, nodes, dims, elements and
  the memory of the decoded forms, refused past M.LIMITS before anything is allocated), unpacks with protobuf-c
  (which validates the wire format), then copies the tree into Lua. ]]
local ffi = require("ffi")
local dsffi = require("ds.ffi")

ffi.cdef [[
typedef struct { const char *name; uint32_t id; int label; int type; unsigned quantifier_offset; unsigned offset;
  const void *descriptor; const void *default_value; uint32_t flags; unsigned reserved_flags; void *r2; void *r3;
} ds_pbc_field;
typedef struct { uint32_t magic; const char *name; const char *short_name; const char *c_name;
  const char *package_name; size_t sizeof_message; unsigned n_fields; const ds_pbc_field *fields;
  const unsigned *fields_sorted_by_name; unsigned n_field_ranges; const void *field_ranges;
  void (*message_init)(void *); void *r1; void *r2; void *r3;
} ds_pbc_message_desc;
typedef struct { size_t len; uint8_t *data; } ds_pbc_binary;
size_t protobuf_c_message_get_packed_size(const void *message);
size_t protobuf_c_message_pack(const void *message, uint8_t *out);
void *protobuf_c_message_unpack(const ds_pbc_message_desc *descriptor, void *allocator, size_t len,
  const uint8_t *data);
void protobuf_c_message_free_unpacked(void *message, void *allocator);
typedef struct { int64_t nodes, max_repeated, max_dims; double max_elements, memory; } ds_onnx_stats;
int ds_onnx_scan(const ds_pbc_message_desc *desc, const uint8_t *data, size_t len, int limit, ds_onnx_stats *st);
]]

local function load_lib()
  local dir = dsffi.libpath:match("^(.*)/[^/]*$") or "."
  local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
  local tried = {}
  for _, path in ipairs({ os.getenv("DS_ONNX_LIB") or false, dir .. "/libds_onnx.so", here ..
    "/../../../build/libds_onnx.so" }) do
    if path then
      local ok, lib = pcall(ffi.load, path)
      if ok then return lib end
      tried[#tried + 1] = path
    end
  end
  error("ds.onnx: cannot load libds_onnx.so (tried " .. table.concat(tried, ", ") .. "); run `make onnx`", 0)
end

-- libds_onnx.so is loaded on first use, so `require "ds"` works where it was not built (`make onnx`)
local loaded
local function lib()
  loaded = loaded or load_lib()
  return loaded
end
local M = {}

-- protobuf-c's labels and types (protobuf-c.h)
local REQUIRED, OPTIONAL, REPEATED, NONE = 0, 1, 2, 3
local T = { INT32 = 0, SINT32 = 1, SFIXED32 = 2, INT64 = 3, SINT64 = 4, SFIXED64 = 5, UINT32 = 6, FIXED32 = 7,
  UINT64 = 8, FIXED64 = 9, FLOAT = 10, DOUBLE = 11, BOOL = 12, ENUM = 13, STRING = 14, BYTES = 15, MESSAGE = 16 }
local FLAG_ONEOF = 4
-- the C type of a scalar field's storage
local CTYPE = { [T.INT32] = "int32_t", [T.SINT32] = "int32_t", [T.SFIXED32] = "int32_t", [T.INT64] = "int64_t",
  [T.SINT64] = "int64_t", [T.SFIXED64] = "int64_t", [T.UINT32] = "uint32_t", [T.FIXED32] = "uint32_t",
  [T.UINT64] = "uint64_t", [T.FIXED64] = "uint64_t", [T.FLOAT] = "float", [T.DOUBLE] = "double",
  [T.BOOL] = "int", [T.ENUM] = "int", [T.STRING] = "char *", [T.BYTES] = "ds_pbc_binary", [T.MESSAGE] = "void *" }
local PTR = {}
for t, ct in pairs(CTYPE) do PTR[t] = ffi.typeof(ct .. " *") end

-- descriptors by message name ("ModelProto" -> onnx__model_proto__descriptor), their fields by name
local descs = {}
local function snake(name) return (name:gsub("(%l)(%u)", "%1_%2"):gsub("(%u)(%u%l)", "%1_%2"):lower()) end
function M.descriptor(name)
  local d = descs[name]
  if d then return d end
  local sym = "onnx__" .. snake(name) .. "__descriptor"
  local l = lib()
  local ok, arr = pcall(function()
    ffi.cdef("extern const ds_pbc_message_desc " .. sym .. "[1];")
    return l[sym]
  end)
  if not ok then error("ds.onnx: no protobuf message " .. name, 2) end
  d = ffi.cast("const ds_pbc_message_desc *", arr)
  descs[name] = d
  return d
end

local function fields_of(desc)
  local list = {}
  for i = 0, desc.n_fields - 1 do
    local f = desc.fields[i]
    list[#list + 1] = { name = ffi.string(f.name), label = f.label, type = f.type, q = f.quantifier_offset,
      off = f.offset, desc = f.descriptor, oneof = bit.band(f.flags, FLAG_ONEOF) ~= 0, id = f.id }
  end
  return list
end
local field_cache = {}
local function fields(desc)
  local key = tostring(ffi.cast("uintptr_t", desc))
  local fl = field_cache[key]
  if not fl then fl = fields_of(desc); field_cache[key] = fl end
  return fl
end

-- ---- encode ----
local function scalar_store(t, v, keep)
  if t == T.STRING then
    local s = ffi.new("char[?]", #v + 1, v); keep[#keep + 1] = s; return s
  elseif t == T.BYTES then
    local b = ffi.new("uint8_t[?]", #v); ffi.copy(b, v, #v); keep[#keep + 1] = b
    return ffi.new("ds_pbc_binary", #v, b)
  elseif t == T.BOOL then return v and 1 or 0
  end
  return v
end

local build
local function field_value(f, v, keep, path)
  if f.type == T.MESSAGE then
    return build(ffi.cast("const ds_pbc_message_desc *", f.desc), v, keep, path .. "." .. f.name)
  end
  return scalar_store(f.type, v, keep)
end

build = function(desc, tbl, keep, path)
  if type(tbl) ~= "table" then error("ds.onnx: " .. path .. " must be a table", 0) end
  local mem = ffi.new("uint8_t[?]", desc.sizeof_message)
  keep[#keep + 1] = mem
  desc.message_init(mem)
  local known = {}
  for _, f in ipairs(fields(desc)) do
    known[f.name] = true
    local v = tbl[f.name]
    if v ~= nil then
      if f.label == REPEATED then
        local n = #v
        if n > 0 then
          local ct = f.type == T.MESSAGE and "void *" or CTYPE[f.type]
          local arr = ffi.new(ct .. "[?]", n)
          keep[#keep + 1] = arr
          for i = 1, n do arr[i - 1] = field_value(f, v[i], keep, path) end
          ffi.cast("size_t *", mem + f.q)[0] = n
          ffi.cast("void **", mem + f.off)[0] = arr
        end
      else
        local ptr = ffi.cast(PTR[f.type], mem + f.off)
        ptr[0] = field_value(f, v, keep, path)
        if f.oneof then ffi.cast("uint32_t *", mem + f.q)[0] = f.id
        elseif f.label == OPTIONAL and f.type ~= T.STRING and f.type ~= T.MESSAGE then
          ffi.cast("int *", mem + f.q)[0] = 1
        end
      end
    end
  end
  for k in pairs(tbl) do
    if not known[k] then error("ds.onnx: " .. path .. " has no field " .. tostring(k), 0) end
  end
  return mem
end

-- bytes of message `name` (e.g. "ModelProto") holding the Lua table tbl
function M.encode(name, tbl)
  local keep = {}
  local msg = build(M.descriptor(name), tbl, keep, name)
  local n = lib().protobuf_c_message_get_packed_size(msg)
  local out = ffi.new("uint8_t[?]", n)
  local wrote = lib().protobuf_c_message_pack(msg, out)
  assert(wrote == n, "protobuf-c packed a different size than it measured")
  return ffi.string(out, n)
end

-- ---- decode ----
-- a float or double field that holds a NaN reads as the one NaN: LuaJIT takes a NaN with payload bits for
-- another type (nil, a userdata), so a file's NaN would turn into a missing value
local function is_nan_bits(t, ptr)
  if t == T.FLOAT then
    local u = ffi.cast("uint32_t *", ptr)[0]
    return bit.band(u, 0x7f800000) == 0x7f800000 and bit.band(u, 0x7fffff) ~= 0
  end
  local w = ffi.cast("uint32_t *", ptr)   -- little-endian: w[1] holds the sign, exponent and high mantissa
  return bit.band(w[1], 0x7ff00000) == 0x7ff00000 and (bit.band(w[1], 0xfffff) ~= 0 or w[0] ~= 0)
end

local function scalar_load(t, ptr)
  if t == T.STRING then return ptr[0] ~= nil and ffi.string(ptr[0]) or nil
  elseif t == T.BYTES then return ffi.string(ptr[0].data, ptr[0].len)
  elseif t == T.BOOL then return ptr[0] ~= 0
  elseif (t == T.FLOAT or t == T.DOUBLE) and is_nan_bits(t, ptr) then return 0 / 0
  end
  return tonumber(ptr[0])
end

-- the metatable of the Lua tables of messages of desc: their empty repeated fields read as EMPTY
local EMPTY = setmetatable({}, { __newindex = function() error("ds.onnx: a decoded empty list is read-only", 2) end })
local defaults = {}
local function defaults_of(desc)
  local key = tostring(ffi.cast("uintptr_t", desc))
  local mt = defaults[key]
  if not mt then
    local d = {}
    for _, f in ipairs(fields(desc)) do if f.label == REPEATED then d[f.name] = EMPTY end end
    mt = { __index = d }
    defaults[key] = mt
  end
  return mt
end

local read
local function load_value(f, ptr)
  if f.type == T.MESSAGE then
    local p = ffi.cast("void **", ptr)[0]
    return p ~= nil and read(ffi.cast("const ds_pbc_message_desc *", f.desc), ffi.cast("uint8_t *", p)) or nil
  end
  return scalar_load(f.type, ptr)
end

-- int64 values past 2^53 of the fields that hold a tensor's data stay exact: int64_t cdata (a Lua number would
-- round them); every other integer field (dims, attributes) reads as a Lua number, which range checks refuse
local EXACT = { int64_data = true, uint64_data = true }
local function load_exact(f, ptr)
  local v = ptr[0]
  if v >= 2 ^ 53 or v <= -2 ^ 53 then return f.type == T.UINT64 and ffi.new("uint64_t", v) or ffi.new("int64_t", v) end
  return tonumber(v)
end

read = function(desc, mem)
  local out = setmetatable({}, defaults_of(desc))
  for _, f in ipairs(fields(desc)) do
    if f.label == REPEATED then
      local n = tonumber(ffi.cast("size_t *", mem + f.q)[0])
      if n > 0 then
        local arr = ffi.cast("uint8_t **", mem + f.off)[0]
        local list = {}
        local stride = f.type == T.MESSAGE and ffi.sizeof("void *") or ffi.sizeof(CTYPE[f.type])
        local load = EXACT[f.name] and load_exact or load_value
        for i = 0, n - 1 do list[i + 1] = load(f, ffi.cast(PTR[f.type], arr + i * stride)) end
        out[f.name] = list
      end
    else
      local present = true
      if f.oneof then present = ffi.cast("uint32_t *", mem + f.q)[0] == f.id
      elseif f.label == OPTIONAL and f.type ~= T.STRING and f.type ~= T.MESSAGE then
        present = ffi.cast("int *", mem + f.q)[0] ~= 0
      end
      if present then out[f.name] = load_value(f, ffi.cast(PTR[f.type], mem + f.off)) end
    end
  end
  return out
end

-- what a file may hold, checked on its wire format before it is decoded
M.LIMITS = {
  depth = 64,          -- nesting of messages (graphs inside attributes inside graphs ...)
  nodes = 2 ^ 18,      -- NodeProtos, subgraphs' included
  repeated = 2 ^ 27,   -- values of one repeated field of one message (float_data of a 512 MB initializer)
  dims = 64,           -- dims of one tensor or tensor type (ds computes with at most 8)
  elements = 2 ^ 31,   -- elements of one tensor
  -- the decoded forms' bytes and per_node for each node's traced form: at most factor * file size + slack
  memory = { factor = 32, slack = 2 ^ 26, per_node = 2048 },
}

local function check_stats(st, n, what)
  local L = M.LIMITS
  local function over(msg, ...) error(string.format("ds.onnx.load: %s: " .. msg, what, ...), 0) end
  if st.nodes > L.nodes then over("it has %d nodes; ds.onnx.load reads at most %d (proto.LIMITS.nodes)", tonumber(st.nodes), L.nodes) end
  if st.max_repeated > L.repeated then
    over("a repeated field holds %d values; ds.onnx.load reads at most %d (proto.LIMITS.repeated)", tonumber(st.max_repeated), L.repeated)
  end
  if st.max_dims > L.dims then over("a tensor has %d dims; ds.onnx.load reads at most %d (proto.LIMITS.dims)", tonumber(st.max_dims), L.dims) end
  if st.max_elements > L.elements then
    over("a tensor has %.17g elements; ds.onnx.load reads at most %d (proto.LIMITS.elements)", st.max_elements, L.elements)
  end
  local budget, need = L.memory.factor * n + L.memory.slack, st.memory + tonumber(st.nodes) * L.memory.per_node
  if need > budget then
    over("reading it would take about %d MB for a file of %d bytes; ds.onnx.load allows %d MB (proto.LIMITS.memory)",
      math.ceil(need / 2 ^ 20), n, math.floor(budget / 2 ^ 20))
  end
end

-- the Lua table of message `name` in bytes; what = the file name for errors
function M.decode(name, bytes, what)
  local st = ffi.new("ds_onnx_stats")
  local rc = lib().ds_onnx_scan(M.descriptor(name), bytes, #bytes, M.LIMITS.depth, st)
  if rc < 0 then
    error(string.format("ds.onnx.load: %s is not a valid protobuf (%s)", what,
      rc == -2 and "messages nested deeper than " .. M.LIMITS.depth or "malformed wire format"), 0)
  end
  check_stats(st, #bytes, what)
  local msg = lib().protobuf_c_message_unpack(M.descriptor(name), nil, #bytes, bytes)
  if msg == nil then
    error("ds.onnx.load: " .. what .. " is not a valid ONNX " .. name .. " (protobuf-c could not unpack it)", 0)
  end
  local ok, res = pcall(read, M.descriptor(name), ffi.cast("uint8_t *", msg))
  lib().protobuf_c_message_free_unpacked(msg, nil)
  if not ok then error(res, 0) end
  return res
end

return M
