-- onnx/handlers/common.lua: what every family of ONNX import handlers shares: the handler definer, attribute
-- defaults, axis conversion and the folding of consts (small tensors known at import time as Lua data).
--[[ A family module builds its table with `local OPS, def = common.family()` and returns OPS;
  def(names, attrs, run) adds OPS[name] = {attrs = {name = default | REQUIRED | false}, run = run} where
  run(ins, at, node, opset, ctx) -> outputs (ctx.run_graph(subgraph, inputs) -> output values runs a subgraph
  attribute, e.g. If's branches, seeing the values visible at the node). ins are values (ds tensors or consts, import_values.lua; nil for an
  omitted optional input); at the attributes by name with defaults filled in (false: no default, absent).
  ONNX axes are 0-based (negative from the end); ds dims are 1-based (negative from the end): dim(a). ]]
local ffi = require("ffi")
local V = require("ds.onnx.import_values")

local M = {}
M.REQUIRED = {}

-- a new family: its handler table and the function that fills it
function M.family()
  local OPS = {}
  local function def(names, attrs, run)
    if type(names) == "string" then names = { names } end
    for _, n in ipairs(names) do OPS[n] = { attrs = attrs, run = run } end
  end
  return OPS, def
end

-- ONNX axis a (0-based, negative from the end) -> ds dim (1-based, negative from the end)
function M.dim(a) return a >= 0 and a + 1 or a end
-- the rank of a value
function M.rank(v) return #V.shape(v) end
-- ONNX axis a of a rank-r value -> 0-based non-negative axis; refuses one outside [-r, r-1]
function M.axis0(a, r, what)
  if type(a) ~= "number" or a ~= math.floor(a) or a < -r or a >= math.max(r, 1) then
    error(string.format("%saxis %s is out of range for rank %d", what and (what .. ": ") or "", tostring(a), r), 0)
  end
  return a < 0 and a + r or a
end
function M.refuse(msg) error(msg, 0) end
-- true when every given input is a const with its data known exactly (folds compute on the data)
function M.all_const(ins)
  for _, v in pairs(ins) do if not (V.is_const(v) and v.data and not v.inexact) then return false end end
  return true
end

-- f applied elementwise to consts a and b with NumPy broadcasting of a scalar/equal-size pair; nil otherwise
function M.broadcast2(a, b, f, dt)
  local da, db = a.data, b.data
  local n = math.max(#da, #db)
  if #da ~= #db and #da ~= 1 and #db ~= 1 then return nil end
  local shape = #da >= #db and a.shape or b.shape
  if #a.shape ~= #b.shape and #da == #db then shape = #a.shape >= #b.shape and a.shape or b.shape end
  local out = {}
  for i = 1, n do out[i] = f(da[#da == 1 and 1 or i], db[#db == 1 and 1 or i]) end
  return M.rounded(V.const(dt or a.dtype, shape, out))
end

-- f applied to each entry of const a (same shape), with dtype dt (a's by default)
function M.map(a, f, dt)
  local out = {}
  for i, x in ipairs(a.data) do out[i] = f(x) end
  return M.rounded(V.const(dt or a.dtype, a.shape, out))
end

-- const c with its numbers rounded to f32 when it is f32 (Lua computes in f64; ONNX's f32 ops round each step)
local f32_box = ffi.new("float[1]")
function M.rounded(c)
  if c.dtype == "f32" then
    for i, x in ipairs(c.data) do
      if type(x) == "number" then f32_box[0] = x; c.data[i] = tonumber(f32_box[0]) end
    end
  end
  return c
end

return M
