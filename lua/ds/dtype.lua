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

-- dtype a lone Lua value gets (ds.tensor(3) is f32 like torch.tensor(3.)); booleans are bool
function M.of_value(v)
  if type(v) == "boolean" then return "bool" end
  return "f32"
end

return M
