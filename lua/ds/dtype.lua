-- dtype.lua: dtype names, C codes, sizes, and the promotion rules for mixed operands.
local M = {}

M.names = { "f32", "f64", "i64", "i32", "u8", "bool" }
M.code = { f32 = 0, f64 = 1, i64 = 2, i32 = 3, u8 = 4, bool = 5 }
M.size = { f32 = 4, f64 = 8, i64 = 8, i32 = 4, u8 = 1, bool = 1 }
M.ctype = { f32 = "float", f64 = "double", i64 = "int64_t", i32 = "int32_t", u8 = "uint8_t", bool = "uint8_t" }
M.is_float = { f32 = true, f64 = true }
M.is_int = { i64 = true, i32 = true, u8 = true }
-- aliases users of PyTorch/NumPy type
M.alias = { float = "f32", float32 = "f32", double = "f64", float64 = "f64", long = "i64", int64 = "i64",
            int = "i32", int32 = "i32", uint8 = "u8", byte = "u8", boolean = "bool" }

-- Promotion (PyTorch's, restricted to our dtypes): bool < u8 < i32 < i64 < f32 < f64.
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
local rank = { bool = 0, u8 = 1, i32 = 2, i64 = 3, f32 = 4, f64 = 5 }
M.rank = rank

function M.normalize(d)
  if d == nil then return nil end
  local n = M.alias[d] or d
  if not M.code[n] then return nil end
  return n
end

function M.promote(a, b)
  if a == b then return a end
  return rank[a] >= rank[b] and a or b
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
