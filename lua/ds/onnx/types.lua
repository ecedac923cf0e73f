-- onnx/types.lua: ds dtypes <-> ONNX TensorProto.DataType, and tensor bytes for initializers.
local ffi = require("ffi")
local dtype = require("ds.dtype")

local M = {}

-- ds dtype -> ONNX elem_type (onnx.proto TensorProto.DataType)
M.ONNX = { f32 = 1, u8 = 2, i32 = 6, i64 = 7, bool = 9, f64 = 11 }
M.DS = {}
for ds_t, onnx_t in pairs(M.ONNX) do M.DS[onnx_t] = ds_t end
M.NAME = { [1] = "FLOAT", [2] = "UINT8", [3] = "INT8", [4] = "UINT16", [5] = "INT16", [6] = "INT32", [7] = "INT64",
  [8] = "STRING", [9] = "BOOL", [10] = "FLOAT16", [11] = "DOUBLE", [12] = "UINT32", [13] = "UINT64", [16] = "BFLOAT16" }

-- the C element type of a ds dtype (for raw_data)
M.CTYPE = { f32 = "float", f64 = "double", i64 = "int64_t", i32 = "int32_t", u8 = "uint8_t", bool = "uint8_t" }

function M.onnx_type(dt, what)
  local t = M.ONNX[dt]
  if not t then
    error(string.format("ds.onnx.export: %s has dtype %s, which ONNX export does not map", what, tostring(dt)), 0)
  end
  return t
end

-- raw little-endian bytes of a concrete tensor (x86-64 is little-endian, as ONNX's raw_data)
function M.tensor_bytes(t)
  local c = t:contiguous()
  return ffi.string(c:data_ptr(), c:numel() * dtype.size[c.dtype])
end

-- the bytes of a Lua list of numbers in dtype dt
function M.list_bytes(list, dt)
  local n = #list
  if n == 0 then return "" end
  local buf = ffi.new(M.CTYPE[dt] .. "[?]", n)
  for i = 1, n do
    local v = list[i]
    if dt == "bool" then v = (v == true or (type(v) == "number" and v ~= 0)) and 1 or 0 end
    buf[i - 1] = v
  end
  return ffi.string(buf, n * ffi.sizeof(M.CTYPE[dt]))
end

return M
