-- dtype.lua: dtype names, C codes, sizes, and the promotion rules for mixed operands.
local dsffi = require("ds.ffi")
local M = {}

-- names, codes and sizes come from libds (src/ds.h's ds_dtype, ds_dtype_name, ds_dtype_size): declared once
M.names, M.code, M.size = {}, {}, {}
for c = 0, dsffi.C.DS_NDTYPES - 1 do
  local name = dsffi.ffi.string(dsffi.C.ds_dtype_name(c))
  M.names[c + 1], M.code[name], M.size[name] = name, c, tonumber(dsffi.C.ds_dtype_size(c))
end
-- bf16 and f16 are stored as their bits (uint16_t); their math runs in f32 and rounds back (docs/DTYPES.md)
M.ctype = { f32 = "float", f64 = "double", i64 = "int64_t", i32 = "int32_t", u8 = "uint8_t", bool = "uint8_t",
            bf16 = "uint16_t", f16 = "uint16_t", i8 = "int8_t" }
M.is_float = { f32 = true, f64 = true, bf16 = true, f16 = true }
M.is_int = { i64 = true, i32 = true, u8 = true, i8 = true }
-- the storage-only dtypes: ops without a kernel for them compute in this dtype and cast back (dispatch.lua)
M.compute = { bf16 = "f32", f16 = "f32", i8 = "i32" }
-- aliases users of PyTorch/NumPy type
M.alias = { float = "f32", float32 = "f32", double = "f64", float64 = "f64", long = "i64", int64 = "i64",
            int = "i32", int32 = "i32", uint8 = "u8", byte = "u8", boolean = "bool",
            bfloat16 = "bf16", half = "f16", float16 = "f16", int8 = "i8", char = "i8" }
for _, name in ipairs(M.names) do
  assert(M.ctype[name], "dtype.lua: no ctype for libds dtype " .. name)
end
-- a set of dtype codes as libds gives it (bit 1 << code per dtype; ds_ew_dtypes) -> the set of their names
function M.from_bits(bits)
  local s = {}
  for c = 0, #M.names - 1 do
    if bit.band(bits, bit.lshift(1, c)) ~= 0 then s[M.names[c + 1]] = true end
  end
  return s
end

-- Promotion (PyTorch's, restricted to our dtypes): bool < u8, i8 < i32 < i64 < bf16, f16 < f32 < f64;
-- u8 with i8 gives i32 (PyTorch: int16, which ds lacks), bf16 with f16 gives f32 (as PyTorch).
-- A Lua number is a "weak" scalar: it never widens a tensor's dtype within its category
-- (int tensor + 2 stays int, f32 tensor + 2.5 stays f32), but a fractional number
-- turns an integer or bool tensor into f32.
-- How ops use it (tests/elementwise_spec.lua checks every pair against torch.result_type):
--   * two tensors: the higher rank wins (u8 + i32 -> i32, i64 + f32 -> f32, f32 + f64 -> f64).
--   * a 0-d tensor is weaker than a tensor with dims: it widens the result only from a higher
--     category (bool < integer < float): f32 (3,) + f64 0-d is f32, i32 (3,) + f64 0-d is f64
--     (ops/common.lua, result_dtype).
--   * arithmetic on bool tensors computes in i64 (PyTorch keeps bool + bool as bool).
--   * float math (exp, log, sin, sigmoid, gelu, ..., and `/`) turns integer and bool inputs
--     into f32; floor_divide is for i64/i32 only.
--   * comparisons promote both sides to the common dtype, then give bool; logical_and/or/xor/not
--     cast their inputs to bool (nonzero is true).
--   * where(c, a, b): c becomes bool, a and b promote together; clamp on an integer tensor
--     with a fractional bound gives f32; cat promotes across all its inputs.
--   * index tensors (gather, index_select, embedding ids, one_hot labels) are i64; other
--     integer dtypes are widened, floats and bools refused.
--   * float -> integer casts truncate toward zero and saturate at the target's range, NaN
--     gives 0 (C leaves these undefined); integer -> integer casts wrap, like PyTorch.
local rank = { bool = 0, u8 = 1, i8 = 1, i32 = 2, i64 = 3, bf16 = 4, f16 = 4, f32 = 5, f64 = 6 }
M.rank = rank
local tie = { u8 = "i32", i8 = "i32", bf16 = "f32", f16 = "f32" } -- two dtypes of one rank

function M.normalize(d)
  if d == nil then return nil end
  local n = M.alias[d] or d
  if not M.code[n] then return nil end
  return n
end

function M.promote(a, b)
  if a == b then return a end
  if rank[a] == rank[b] then return tie[a] end
  return rank[a] > rank[b] and a or b
end

-- dtype of a Lua number combined with a tensor dtype
function M.with_scalar(dt, v)
  if type(v) == "boolean" then return dt end
  if M.is_float[dt] then return dt end
  if v ~= math.floor(v) or v ~= v or v == math.huge or v == -math.huge then return "f32" end
  if dt == "bool" then return "i64" end
  return dt
end

return M
