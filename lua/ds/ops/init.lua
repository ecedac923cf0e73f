-- ops/init.lua: loads every op family and generates the Tensor methods, ds.* functions,
-- in-place variants and operators from the op table.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")

require("ds.ops.elementwise")
require("ds.ops.elementwise_compose")
require("ds.ops.creation")
require("ds.ops.movement")
require("ds.ops.blas")
require("ds.ops.reduce")
require("ds.ops.index")
require("ds.ops.indexing")
require("ds.ops.nn")
require("ds.ops.attention")
require("ds.ops.segment_attention")
require("ds.ops.random")
require("ds.ops.optim")
require("ds.ops.fused")
require("ds.ops.sorting")
require("ds.ops.shaping")
require("ds.ops.linalg")
require("ds.ops.statistics")
require("ds.ops.index_compose")
require("ds.ops.linalg_compose")
require("ds.ops.linalg_solve")
require("ds.ops.arrange")
require("ds.ops.division")
require("ds.ops.stacking")
require("ds.ops.counting")
require("ds.ops.products")
require("ds.ops.linalg_triangular")
require("ds.ops.collective")
require("ds.ops.sampling")
require("ds.ops.index_copy")
require("ds.ops.quantized")

local F = C.functions

-- every elementwise op: ds.<name>(...), x:<name>(...), and x:<name>_(...) in place
local in_place = {}
for _, def in ipairs(D.list) do
  if def.elementwise and not F[def.name] then
    local f = C.api(def)
    C.export(def.name, f)
  end
  if def.elementwise and def.name ~= "astype" and def.name ~= "contiguous" then
    local argnames, nin = def.args or {}, def.ninputs
    in_place[def.name .. "_"] = function(x, ...)
      local inputs = { x }
      for i = 2, nin do inputs[i] = (select(i - 1, ...)) end
      return D.call(def, inputs, C.collect_attrs(def, argnames, nin, ...), x)
    end
  end
end
Tensor._define("ds.ops", in_place)

-- the eager shortcuts of dispatch.lua (same kernel, no attrs/promotion/autograd work when none is needed), each
-- replacing the method of the same name
local fast = {}
for _, name in ipairs { "add", "sub", "mul", "div" } do
  local def = D.by_name[name]
  F[name] = D.fast_binary(def, F[name]); fast[name] = F[name]
  fast[name .. "_"] = D.fast_binary(def, in_place[name .. "_"], true)
end
F.matmul = D.fast_matmul(D.by_name.matmul, F.matmul); fast.matmul = F.matmul
F.mm = F.matmul; fast.mm = F.matmul
for _, def in ipairs(D.list) do
  if def.kind == "unary" and def.elementwise and #def.attrs == 0 and def.name ~= "contiguous" then
    F[def.name] = D.fast_unary(def, F[def.name]); fast[def.name] = F[def.name]
  end
end
Tensor._define("ds.ops", fast, true)

-- Lua's __eq/__lt must give booleans: tensors compare by identity; use x:eq(y), x:lt(y). (Abstract tensors, while
-- tracing, have their own < and <=, tensor.lua's, pointing at ds.cond.)
local function compare(what, method)
  return function() errors.raise(string.format("%s: use x:%s(y), which gives a bool tensor", what, method)) end
end

-- torch.equal: same shape and every element equal (NaN is unequal to itself, like PyTorch)
F.equal = function(a, b)
  if not (C.is_tensor(a) and C.is_tensor(b)) then errors.raise("equal: both arguments must be tensors") end
  if not S.equal(a._shape, b._shape) then return false end
  return a:eq(b):all():item()
end

-- x:type() -> PyTorch's name ("torch.FloatTensor"); x:type(name) converts to a PyTorch name or a ds dtype
local torch_type = { f32 = "torch.FloatTensor", f64 = "torch.DoubleTensor", i64 = "torch.LongTensor",
                     i32 = "torch.IntTensor", u8 = "torch.ByteTensor", bool = "torch.BoolTensor",
                     bf16 = "torch.BFloat16Tensor", f16 = "torch.HalfTensor", i8 = "torch.CharTensor" }
local dtype_of_type = {}
for dt, name in pairs(torch_type) do dtype_of_type[name] = dt; dtype_of_type[dt] = dt end

Tensor._define("ds.ops", {
  __add = F.add,
  __sub = F.sub,
  __mul = F.mul,
  __div = F.div,
  __pow = F.pow,
  __unm = function(x) return F.neg(x) end,
  __mod = function(a, b) return F.remainder(a, b) end, -- Lua's % floors, as Python's and remainder
  __concat = function() errors.raise("..: tensors cannot be concatenated as strings; use ds.cat") end,
  __lt = compare("tensor < tensor", "lt"),
  __le = compare("tensor <= tensor", "le"),

  fill_ = function(x, v)
    if C.is_tensor(v) then v = v:item() end
    if type(v) == "boolean" then v = v and 1 or 0 end
    return D.call(D.by_name.full, {}, { shape = x._shape, value = v, dtype = x.dtype }, x)
  end,
  zero_ = function(x) return x:fill_(0) end,
  copy_ = function(x, src)
    if not C.is_tensor(src) then return x:fill_(src) end
    if src.dtype ~= x.dtype then src = src:astype(x.dtype) end
    local s = S.broadcast(x._shape, src._shape, "copy_")
    if not S.equal(s, x._shape) then
      errors.raise(string.format("copy_: source shape %s does not broadcast to %s", S.str(src._shape),
        S.str(x._shape)))
    end
    return D.call(D.by_name.contiguous, { src:expand(x._shape) }, nil, x)
  end,
  equal = F.equal,

  float = function(x) return x:astype("f32") end,
  double = function(x) return x:astype("f64") end,
  long = function(x) return x:astype("i64") end,
  int = function(x) return x:astype("i32") end,
  bool = function(x) return x:astype("bool") end,
  bfloat16 = function(x) return x:astype("bf16") end,
  half = function(x) return x:astype("f16") end,
  char = function(x) return x:astype("i8") end,
  to = function(x, dt) return x:astype(dt) end,
  type = function(x, name)
    if name == nil then return torch_type[x.dtype] end
    local dt = dtype_of_type[name]
    if not dt then
      errors.raise("type: unknown type '" .. tostring(name) .. "' (torch.FloatTensor, ... or a ds dtype)")
    end
    return x:astype(dt)
  end,
})

return F
