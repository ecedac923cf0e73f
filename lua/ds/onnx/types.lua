-- onnx/types.lua: ds dtypes <-> ONNX TensorProto.DataType, how each element type is stored in a TensorProto,
-- and tensor bytes for initializers.
--[[ FLOAT16, BFLOAT16 and INT8 are ds's f16, bf16 and i8 (initializers, graph inputs, Constant values, Cast
  targets and exports alike). ONNX element types ds has no dtype for are read into a wider ds dtype that holds
  every value exactly:  INT16, UINT16 -> i32     UINT32, UINT64 -> i64
  (a UINT64 value of 2^63 or more reads as the negative i64 of the same bits). A Cast to an integer type gives
  ONNX's value: integers wrap modulo 2^bits as C's conversions do (a float is truncated toward zero first), also
  for INT8; a Cast to FLOAT16 or BFLOAT16 rounds to nearest, ties to even, beyond the range to +-inf, NaN stays
  NaN. STRING and the 8-bit float and complex types are not read. ]]
local ffi = require("ffi")
local dsffi = require("ds.ffi")
local dtype = require("ds.dtype")
local Tensor = require("ds.tensor")

local M = {}

-- ds dtype -> ONNX elem_type (onnx.proto TensorProto.DataType)
M.ONNX = { f32 = 1, u8 = 2, i8 = 3, i32 = 6, i64 = 7, bool = 9, f16 = 10, f64 = 11, bf16 = 16 }
-- ONNX elem_type -> the ds dtype it is read as
M.DS = { [4] = "i32", [5] = "i32", [12] = "i64", [13] = "i64" }
for ds_t, onnx_t in pairs(M.ONNX) do M.DS[onnx_t] = ds_t end
M.NAME = { [1] = "FLOAT", [2] = "UINT8", [3] = "INT8", [4] = "UINT16", [5] = "INT16", [6] = "INT32", [7] = "INT64",
  [8] = "STRING", [9] = "BOOL", [10] = "FLOAT16", [11] = "DOUBLE", [12] = "UINT32", [13] = "UINT64", [14] = "COMPLEX64",
  [15] = "COMPLEX128", [16] = "BFLOAT16" }
-- ONNX integer types a Cast wraps to (bits and signedness): INT8 and those narrower than the ds dtype they are
-- read as (ds's own i8 cast saturates a float)
M.NARROW_INT = { [3] = { bits = 8, signed = true }, [4] = { bits = 16 }, [5] = { bits = 16, signed = true },
  [12] = { bits = 32 } }
-- ONNX float types narrower than f32: the ds op that rounds an f32/f64 value to their precision
M.NARROW_FLOAT = { [10] = "round_f16", [16] = "round_bf16" }

-- the C element type of a ds dtype (for raw_data)
M.CTYPE = dtype.ctype

-- ONNX elem_type -> how a TensorProto stores it: the C type of a raw_data element and the repeated field that
-- holds the elements otherwise (FLOAT16/BFLOAT16: their bits, in int32_data)
M.STORAGE = {
  [1] = { ctype = "float", field = "float_data" }, [11] = { ctype = "double", field = "double_data" },
  [2] = { ctype = "uint8_t", field = "int32_data" }, [3] = { ctype = "int8_t", field = "int32_data" },
  [4] = { ctype = "uint16_t", field = "int32_data" }, [5] = { ctype = "int16_t", field = "int32_data" },
  [6] = { ctype = "int32_t", field = "int32_data" }, [7] = { ctype = "int64_t", field = "int64_data" },
  [9] = { ctype = "uint8_t", field = "int32_data" }, [12] = { ctype = "uint32_t", field = "uint64_data" },
  [13] = { ctype = "uint64_t", field = "uint64_data" },
  [10] = { ctype = "uint16_t", field = "int32_data" }, [16] = { ctype = "uint16_t", field = "int32_data" },
}

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
  if dt == "bf16" or dt == "f16" then -- rounded to the format by the cast kernel
    local t = Tensor._empty(dt, { n }, "onnx")
    dsffi.check(dsffi.C.ds_write_flat(t._c, ffi.new("double[?]", n, list)), "onnx")
    return M.tensor_bytes(t)
  end
  local buf = ffi.new(M.CTYPE[dt] .. "[?]", n)
  for i = 1, n do
    local v = list[i]
    if dt == "bool" then v = (v == true or (type(v) == "number" and v ~= 0)) and 1 or 0 end
    buf[i - 1] = v
  end
  return ffi.string(buf, n * ffi.sizeof(M.CTYPE[dt]))
end

return M
