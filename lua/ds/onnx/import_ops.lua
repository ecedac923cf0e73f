-- onnx/import_ops.lua: one handler per ONNX op that ds.onnx.load reads: its attributes (with ONNX's defaults)
-- and how it runs on ds values (ds ops on tensors; Lua arithmetic on consts, which folds shape computations).
--[[ OPS[op_type] = {attrs = {name = default | REQUIRED}, run = function(ins, at, node, opset) -> outputs}.
  ins are values (ds tensors or consts, import_values.lua; nil for an omitted optional input); at the
  attributes by name, defaults filled in. An attribute not listed is refused before the graph is traced
  (check_attrs), a listed attribute with a value ds does not implement is refused by its handler.
  ONNX axes are 0-based (negative from the end); ds dims are 1-based (negative from the end): dim(a). ]]
local F = require("ds.ops")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")

local M = {}
local OPS = {}
M.OPS = OPS
local REQUIRED = {}
local T, is_const = V.tensor, V.is_const

local function dim(a) return a >= 0 and a + 1 or a end
local function rank(v) return #V.shape(v) end
local function axis0(a, r) return a < 0 and a + r or a end
local function refuse(msg) error(msg, 0) end
local function all_const(ins)
  for _, v in pairs(ins) do if not (is_const(v) and v.data) then return false end end
  return true
end

-- ---- attribute values ----
local ATTR_VALUE = { [1] = "f", [2] = "i", [3] = "s", [4] = "t", [5] = "g", [6] = "floats", [7] = "ints",
  [8] = "strings" }
local function attr_value(a)
  local field = ATTR_VALUE[a.type or 0]
  if not field then refuse("attribute " .. tostring(a.name) .. " has a type ds does not read") end
  local v = a[field]
  if v == nil and (field == "floats" or field == "ints" or field == "strings") then v = {} end
  return v
end

function M.check_attrs(node, where, path)
  local h = OPS[node.op_type]
  for _, a in ipairs(node.attribute or {}) do
    if h.attrs[a.name] == nil then
      error(string.format("ds.onnx.load: %s: %s: attribute %s is not supported by ds.onnx.load", path, where,
        tostring(a.name)), 0)
    end
    if a.ref_attr_name then
      error(string.format("ds.onnx.load: %s: %s: attribute references are not supported", path, where), 0)
    end
    if not ATTR_VALUE[a.type or 0] then
      error(string.format("ds.onnx.load: %s: %s: attribute %s has an unknown type", path, where, tostring(a.name)), 0)
    end
  end
end

function M.run(node, ins, opset)
  local h = OPS[node.op_type]
  local at = {}
  for _, a in ipairs(node.attribute or {}) do at[a.name] = attr_value(a) end
  for k, d in pairs(h.attrs) do
    if at[k] == nil then
      if d == REQUIRED then refuse("attribute " .. k .. " is required") end
      if d ~= false then at[k] = d end
    end
  end
  local outs = { h.run(ins, at, node, opset) }
  return outs
end

local function def(names, attrs, run)
  if type(names) == "string" then names = { names } end
  for _, n in ipairs(names) do OPS[n] = { attrs = attrs, run = run } end
end

-- ---- consts: folding on Lua data ----
local function broadcast2(a, b, f, dt)
  local da, db = a.data, b.data
  local n = math.max(#da, #db)
  if #da ~= #db and #da ~= 1 and #db ~= 1 then return nil end
  local shape = #da >= #db and a.shape or b.shape
  if #a.shape ~= #b.shape and #da == #db then shape = #a.shape >= #b.shape and a.shape or b.shape end
  local out = {}
  for i = 1, n do out[i] = f(da[#da == 1 and 1 or i], db[#db == 1 and 1 or i]) end
  return V.const(dt or a.dtype, shape, out)
end

local function int_div(x, y)
  if type(x) == "number" and type(y) == "number" then
    local q = x / y
    return q >= 0 and math.floor(q) or math.ceil(q) -- ONNX integer Div truncates
  end
  return sym.div(x, y, "Div")
end
local FOLD = {
  Add = sym.add, Sub = sym.sub, Mul = sym.mul,
  Equal = function(x, y) return x == y and 1 or 0 end,
}

-- ---- elementwise ----
local BINARY = { Add = F.add, Sub = F.sub, Mul = F.mul, Div = F.div, Pow = F.pow }
for op, f in pairs(BINARY) do
  def(op, {}, function(ins)
    local a, b = ins[1], ins[2]
    if all_const(ins) and (FOLD[op] or (op == "Div" and not dtype.is_float[a.dtype])) then
      local r = broadcast2(a, b, FOLD[op] or int_div)
      if r then return r end
    end
    if op == "Div" and not dtype.is_float[V.dtype(a)] then
      refuse("integer Div of tensors (ONNX truncates, ds's div gives floats) is not supported")
    end
    return f(T(a), T(b))
  end)
end
local COMPARE = { Equal = F.eq, Less = F.lt, Greater = F.gt, LessOrEqual = F.le, GreaterOrEqual = F.ge }
for op, f in pairs(COMPARE) do
  def(op, {}, function(ins)
    if op == "Equal" and all_const(ins) then
      local r = broadcast2(ins[1], ins[2], FOLD.Equal, "bool")
      if r then return r end
    end
    return f(T(ins[1]), T(ins[2]))
  end)
end
def("And", {}, function(ins) return F.logical_and(T(ins[1]), T(ins[2])) end)
def("Or", {}, function(ins) return F.logical_or(T(ins[1]), T(ins[2])) end)
def("Not", {}, function(ins) return F.logical_not(T(ins[1])) end)
local UNARY = { Relu = F.relu, Tanh = F.tanh, Sigmoid = F.sigmoid, Erf = F.erf, Exp = F.exp, Log = F.log,
  Sqrt = F.sqrt, Neg = F.neg, Abs = F.abs, Sin = F.sin, Cos = F.cos }
for op, f in pairs(UNARY) do def(op, {}, function(ins) return f(T(ins[1])) end) end
def("Reciprocal", {}, function(ins) return 1 / T(ins[1]) end)
def({ "Identity", "Dropout" }, { seed = false, ratio = false, training_mode = false }, function(ins, at, node)
  if node.op_type == "Dropout" then
    if ins[3] ~= nil and (not is_const(ins[3]) or V.data(ins[3])[1] ~= 0) then
      refuse("Dropout in training mode is not supported (inference only)")
    end
    if (node.output[2] or "") ~= "" then refuse("Dropout: the mask output is not supported") end
  end
  return ins[1]
end)
def("Where", {}, function(ins) return F.where(T(ins[1]), T(ins[2]), T(ins[3])) end)
def("Cast", { to = REQUIRED, saturate = false }, function(ins, at)
  local dt = types.DS[at.to] or refuse("Cast to " .. (types.NAME[at.to] or tostring(at.to)) .. " is not supported")
  local x = ins[1]
  if is_const(x) and x.data then
    local out = {}
    for i, v in ipairs(x.data) do
      if type(v) ~= "number" then out[i] = v
      elseif dt == "bool" then out[i] = v ~= 0 and 1 or 0
      elseif not dtype.is_float[dt] then out[i] = v >= 0 and math.floor(v) or math.ceil(v)
      else out[i] = v end
    end
    return V.const(dt, x.shape, out)
  end
  return T(x):astype(dt)
end)
def("Softmax", { axis = -1 }, function(ins, at) return F.softmax(T(ins[1]), dim(at.axis)) end)
def("LogSoftmax", { axis = -1 }, function(ins, at) return F.log_softmax(T(ins[1]), dim(at.axis)) end)

-- ---- matmul, nn ----
def("MatMul", {}, function(ins) return F.matmul(T(ins[1]), T(ins[2])) end)
def("Gemm", { alpha = 1.0, beta = 1.0, transA = 0, transB = 0 }, function(ins, at)
  local a, b = T(ins[1]), T(ins[2])
  if at.transA ~= 0 then a = a:t() end
  if at.transB ~= 0 then b = b:t() end
  local y = F.matmul(a, b)
  if at.alpha ~= 1 then y = y * at.alpha end
  if ins[3] then
    local c = T(ins[3])
    y = y + (at.beta ~= 1 and c * at.beta or c)
  end
  return y
end)

-- symmetric 2-D pads [top, left, bottom, right] -> {top, left}
local function pads2(p, op)
  p = p or { 0, 0, 0, 0 }
  if #p ~= 4 or p[1] ~= p[3] or p[2] ~= p[4] then
    refuse(op .. ": pads " .. table.concat(p, ",") .. " are not symmetric 2-D pads (ds pads both sides alike)")
  end
  return { p[1], p[2] }
end
local function auto_pad_notset(at, op)
  if at.auto_pad and at.auto_pad ~= "NOTSET" then refuse(op .. ": auto_pad " .. at.auto_pad .. " is not supported") end
end
local function ones2(v) return v and #v > 0 and v or { 1, 1 } end

def("Conv", { auto_pad = "NOTSET", dilations = false, group = 1, kernel_shape = false, pads = false, strides = false },
  function(ins, at)
    auto_pad_notset(at, "Conv")
    local x, w = T(ins[1]), T(ins[2])
    if rank(w) ~= 4 then refuse("Conv: only 2-D convolutions (weight of rank 4) are supported") end
    return F.conv2d(x, w, ins[3] and T(ins[3]) or nil, { stride = ones2(at.strides), padding = pads2(at.pads, "Conv"),
      dilation = ones2(at.dilations), groups = at.group })
  end)
local function pool_check(at, op)
  auto_pad_notset(at, op)
  if at.ceil_mode ~= 0 then refuse(op .. ": ceil_mode 1 is not supported") end
  if at.dilations and #at.dilations > 0 and (at.dilations[1] ~= 1 or at.dilations[2] ~= 1) then
    refuse(op .. ": dilations are not supported")
  end
  if #at.kernel_shape ~= 2 then refuse(op .. ": only 2-D pooling is supported") end
end
def("MaxPool", { auto_pad = "NOTSET", ceil_mode = 0, dilations = false, kernel_shape = REQUIRED, pads = false,
  storage_order = 0, strides = false }, function(ins, at, node)
  pool_check(at, "MaxPool")
  if node.output and node.output[2] and node.output[2] ~= "" then
    refuse("MaxPool: the Indices output is not supported")
  end
  return F.max_pool2d(T(ins[1]), at.kernel_shape, { stride = ones2(at.strides), padding = pads2(at.pads, "MaxPool") })
end)
def("AveragePool", { auto_pad = "NOTSET", ceil_mode = 0, count_include_pad = 0, dilations = false,
  kernel_shape = REQUIRED, pads = false, strides = false }, function(ins, at)
  pool_check(at, "AveragePool")
  return F.avg_pool2d(T(ins[1]), at.kernel_shape, { stride = ones2(at.strides), padding = pads2(at.pads, "AveragePool"),
    count_include_pad = at.count_include_pad ~= 0 })
end)
def("GlobalAveragePool", {}, function(ins)
  local x = T(ins[1])
  local dims = {}
  for d = 3, rank(x) do dims[#dims + 1] = d end
  return x:mean(dims, true)
end)
-- Pad (constant mode, zeros) on the two spatial dims of an NCHW tensor, folded into a pooling or conv by
-- padding with ds ops: cat of zero blocks
def("Pad", { mode = "constant" }, function(ins, at)
  if at.mode ~= "constant" then refuse("Pad: mode " .. tostring(at.mode) .. " is not supported") end
  local x = T(ins[1])
  local p = V.ints(ins[2], "Pad's pads")
  local value = ins[3] and V.data(ins[3], "Pad's constant_value")[1] or 0
  if ins[4] then refuse("Pad: the axes input is not supported") end
  local r = rank(x)
  for d = 1, r do
    local before, after = p[d], p[d + r]
    if before < 0 or after < 0 then refuse("Pad: negative pads are not supported") end
    local parts = {}
    local shape = x.shape
    if before > 0 then shape[d] = before; parts[#parts + 1] = F.full(shape, value, { dtype = x.dtype }) end
    parts[#parts + 1] = x
    if after > 0 then
      shape = x.shape; shape[d] = after; parts[#parts + 1] = F.full(shape, value, { dtype = x.dtype })
    end
    if #parts > 1 then x = F.cat(parts, d) end
  end
  return x
end)
def("BatchNormalization", { epsilon = 1e-5, momentum = 0.9, training_mode = 0, spatial = 1 }, function(ins, at)
  if at.training_mode ~= 0 then refuse("BatchNormalization in training mode is not supported (inference only)") end
  local x = T(ins[1])
  local scale, bias, mean, var = T(ins[2]), T(ins[3]), T(ins[4]), T(ins[5])
  local view = { 1, -1 }
  for _ = 3, rank(x) do view[#view + 1] = 1 end
  local inv = scale / (var + at.epsilon):sqrt()
  return (x - mean:reshape(view)) * inv:reshape(view) + bias:reshape(view)
end)
def("LayerNormalization", { axis = -1, epsilon = 1e-5, stash_type = 1 }, function(ins, at, node)
  local x = T(ins[1])
  local r = rank(x)
  local a = axis0(at.axis, r)
  local ns = {}
  for d = a + 1, r do ns[#ns + 1] = x.shape[d] end
  if node.output and ((node.output[2] or "") ~= "" or (node.output[3] or "") ~= "") then
    refuse("LayerNormalization: the Mean and InvStdDev outputs are not supported")
  end
  return F.layer_norm(x, ns, T(ins[2]), ins[3] and T(ins[3]) or nil, at.epsilon)
end)

-- ---- reductions ----
local function reduce_axes(ins, at, opset, op, r)
  local axes = at.axes
  if ins[2] ~= nil then axes = V.ints(ins[2], op .. "'s axes") end
  if axes == nil or #axes == 0 then
    if at.noop_with_empty_axes == 1 then return nil, true end
    axes = {}
    for i = 0, r - 1 do axes[#axes + 1] = i end
  end
  local dims = {}
  for i, a in ipairs(axes) do dims[i] = axis0(a, r) + 1 end
  return dims
end
for op, method in pairs({ ReduceMean = "mean", ReduceSum = "sum", ReduceMax = "amax", ReduceMin = "amin",
  ReduceProd = "prod" }) do
  def(op, { axes = false, keepdims = 1, noop_with_empty_axes = 0 }, function(ins, at, _, opset)
    local x = T(ins[1])
    local dims, noop = reduce_axes(ins, at, opset, op, rank(x))
    if noop then return x end
    return x[method](x, dims, at.keepdims ~= 0)
  end)
end

-- ---- shapes ----
def("Shape", { start = 0, ["end"] = false }, function(ins, at)
  local s = V.shape(ins[1])
  local r = #s
  local from = axis0(at.start, r)
  local to = at["end"] and axis0(at["end"], r) or r
  local out = {}
  for i = math.max(from, 0) + 1, math.min(to, r) do out[#out + 1] = s[i] end
  return V.const("i64", { #out }, out)
end)
def("Size", {}, function(ins)
  local n = 1
  for _, d in ipairs(V.shape(ins[1])) do n = sym.mul(n, d) end
  return V.const("i64", {}, { n })
end)
def("Constant", { value = false, value_float = false, value_floats = false, value_int = false, value_ints = false,
  sparse_value = false, value_string = false, value_strings = false }, function(_, at)
  if at.value then return V.tensor_of(at.value, "Constant's value") end
  if at.value_float then return V.const("f32", {}, { at.value_float }) end
  if at.value_int then return V.const("i64", {}, { at.value_int }) end
  if at.value_floats then return V.const("f32", { #at.value_floats }, at.value_floats) end
  if at.value_ints then return V.const("i64", { #at.value_ints }, at.value_ints) end
  refuse("Constant: only tensor, float(s) and int(s) values are supported")
end)
def("ConstantOfShape", { value = false }, function(ins, at)
  local shape = V.data(ins[1], "ConstantOfShape's shape")
  local c = at.value and V.tensor_of(at.value, "ConstantOfShape's value")
    or V.const("f32", { 1 }, { 0 })
  local v = V.data(c)[1]
  local n, static = 1, true
  for _, d in ipairs(shape) do if type(d) == "number" then n = n * d else static = false end end
  if static and n <= V.FOLD_LIMIT then
    local data = {}
    for i = 1, n do data[i] = v end
    return V.const(c.dtype, shape, data)
  end
  return F.full(shape, v, { dtype = c.dtype })
end)
def("Reshape", { allowzero = 0 }, function(ins, at)
  local x = ins[1]
  local target = V.data(ins[2], "Reshape's shape")
  local s = V.shape(x)
  local shape = {}
  for i, d in ipairs(target) do
    if d == 0 and at.allowzero == 0 then shape[i] = s[i] else shape[i] = d end
  end
  if is_const(x) and x.data then
    local n, known = 1, {}
    for i, d in ipairs(shape) do if d ~= -1 then n = sym.mul(n, d) end; known[i] = d end
    for i, d in ipairs(known) do if d == -1 then known[i] = #x.data / n end end
    return V.const(x.dtype, known, x.data)
  end
  return T(x):reshape(shape)
end)
def("Flatten", { axis = 1 }, function(ins, at)
  local x = T(ins[1])
  local r = rank(x)
  local a = axis0(at.axis, r)
  if a == 0 then return x:reshape(1, -1) end
  if a == r then return x:reshape(-1, 1) end
  local lead = 1
  for d = 1, a do lead = sym.mul(lead, x.shape[d]) end
  return x:reshape(lead, -1)
end)
def("Transpose", { perm = false }, function(ins, at)
  local x = T(ins[1])
  local perm = {}
  local r = rank(x)
  if at.perm and #at.perm > 0 then for i, p in ipairs(at.perm) do perm[i] = p + 1 end
  else for i = 1, r do perm[i] = r - i + 1 end end
  return x:permute(unpack(perm))
end)
local function axes_input(ins, at, op)
  if ins[2] ~= nil then return V.ints(ins[2], op .. "'s axes") end
  return at.axes
end
def("Unsqueeze", { axes = false }, function(ins, at)
  local x = ins[1]
  local axes = axes_input(ins, at, "Unsqueeze") or refuse("Unsqueeze needs axes")
  local r = #V.shape(x) + #axes
  local sorted = {}
  for i, a in ipairs(axes) do sorted[i] = axis0(a, r) end
  table.sort(sorted)
  if is_const(x) and x.data then
    local s = {}
    for i, d in ipairs(x.shape) do s[i] = d end
    for _, a in ipairs(sorted) do table.insert(s, a + 1, 1) end
    return V.const(x.dtype, s, x.data)
  end
  local t = T(x)
  for _, a in ipairs(sorted) do t = t:unsqueeze(a + 1) end
  return t
end)
def("Squeeze", { axes = false }, function(ins, at)
  local x = ins[1]
  local s = V.shape(x)
  local axes = axes_input(ins, at, "Squeeze")
  local drop = {}
  if axes then for _, a in ipairs(axes) do drop[axis0(a, #s) + 1] = true end
  else for i, d in ipairs(s) do if d == 1 then drop[i] = true end end end
  local shape = {}
  for i, d in ipairs(s) do
    if drop[i] then if d ~= 1 then refuse("Squeeze: dim " .. i .. " has size " .. tostring(d) .. ", not 1") end
    else shape[#shape + 1] = d end
  end
  if is_const(x) and x.data then return V.const(x.dtype, shape, x.data) end
  return T(x):reshape(shape)
end)
def("Concat", { axis = REQUIRED }, function(ins, at)
  local list = {}
  for k = 1, table.maxn(ins) do if ins[k] ~= nil then list[#list + 1] = ins[k] end end
  if all_const(list) and #V.shape(list[1]) == 1 then
    local out = {}
    for _, c in ipairs(list) do for _, v in ipairs(c.data) do out[#out + 1] = v end end
    return V.const(list[1].dtype, { #out }, out)
  end
  local ts = {}
  for i, v in ipairs(list) do ts[i] = T(v) end
  return F.cat(ts, dim(at.axis))
end)
def("Expand", {}, function(ins)
  local x = T(ins[1])
  local target = V.data(ins[2], "Expand's shape")
  local s = x.shape
  local r = math.max(#s, #target)
  local out = {}
  for i = 1, r do
    local a = s[i - (r - #s)] or 1
    local b = target[i - (r - #target)] or 1
    out[i] = b == 1 and a or b
  end
  if #s < r then
    local view = {}
    for i = 1, r - #s do view[i] = 1 end
    for i = 1, #s do view[#view + 1] = s[i] end
    x = x:reshape(view)
  end
  return x:expand(out)
end)
def("Range", {}, function(ins)
  local start, limit, delta = V.data(ins[1], "Range's start")[1], V.data(ins[2], "Range's limit")[1],
    V.data(ins[3], "Range's delta")[1]
  local dt = ins[1].dtype
  if not sym.is(limit) then return F.arange(start, limit, delta, { dtype = dt }) end
  -- a dynamic length: start + i * delta as a running sum of delta (exact for integers)
  if dtype.is_float[dt] or type(start) ~= "number" or type(delta) ~= "number" then
    refuse("Range: a dynamic limit is supported for integer ranges only")
  end
  local count = sym.div(sym.sub(limit, start), delta, "Range")
  return F.full({ count }, delta, { dtype = dt }):cumsum(1) + (start - delta)
end)

-- Slice: consts fold; tensors narrow each axis (steps of 1)
local BIG = 2 ^ 62
local function clamp_index(i, n)
  if type(i) ~= "number" then return i end
  if i < 0 then i = type(n) == "number" and math.max(i + n, 0) or sym.add(n, i) end
  if type(n) == "number" and type(i) == "number" and i > n then i = n end
  return i
end
def("Slice", { starts = false, ends = false, axes = false }, function(ins, at)
  local x = ins[1]
  local starts = ins[2] and V.data(ins[2], "Slice's starts") or at.starts
  local ends = ins[3] and V.data(ins[3], "Slice's ends") or at.ends
  local axes = ins[4] and V.ints(ins[4], "Slice's axes") or at.axes
  local steps = ins[5] and V.ints(ins[5], "Slice's steps")
  local s = V.shape(x)
  if not axes or #axes == 0 then axes = {}; for i = 1, #starts do axes[i] = i - 1 end end
  for i, st in ipairs(steps or {}) do if st ~= 1 then refuse("Slice: step " .. st .. " on axis " .. axes[i] ..
    " is not supported") end end
  local t = (is_const(x) and x.data and #s == 1) and x or T(x)
  for i, a in ipairs(axes) do
    local d = axis0(a, #s) + 1
    local n = s[d]
    local b = clamp_index(starts[i], n)
    local e = ends[i]
    if type(e) == "number" and e >= BIG then e = n else e = clamp_index(e, n) end
    if is_const(t) then
      local out = {}
      for k = b + 1, e do out[#out + 1] = t.data[k] end
      t = V.const(t.dtype, { #out }, out)
    else
      t = t:narrow(d, sym.add(b, 1), sym.sub(e, b))
    end
  end
  return t
end)
def("Split", { axis = 0, split = false, num_outputs = false }, function(ins, at, node)
  local x = T(ins[1])
  local d = axis0(at.axis, rank(x)) + 1
  local sizes = ins[2] and V.ints(ins[2], "Split's split") or (at.split and #at.split > 0 and at.split)
  local nout = #node.output
  if not sizes then
    local n = x.shape[d]
    if type(n) ~= "number" or n % nout ~= 0 then
      refuse("Split: dim " .. tostring(n) .. " does not split evenly in " .. nout)
    end
    sizes = {}
    for i = 1, nout do sizes[i] = n / nout end
  end
  local outs, at_ = {}, 1
  for i, n in ipairs(sizes) do outs[i] = x:narrow(d, at_, n); at_ = at_ + n end
  return unpack(outs)
end)

-- Gather with ONNX's 0-based (negative from the end) indices
def("Gather", { axis = 0 }, function(ins, at)
  local x, ix = ins[1], ins[2]
  local s = V.shape(x)
  local a = axis0(at.axis, #s) + 1
  if is_const(x) and x.data and #s == 1 and is_const(ix) and ix.data then
    local out = {}
    for i, k in ipairs(ix.data) do
      if type(k) ~= "number" then refuse("Gather: a dynamic index") end
      local j = k < 0 and k + #x.data or k
      if j < 0 or j >= #x.data then refuse("Gather: index " .. k .. " out of range for " .. #x.data .. " values") end
      out[i] = x.data[j + 1]
    end
    return V.const(x.dtype, ix.shape, out)
  end
  local t = T(x)
  if is_const(ix) and ix.data and #ix.shape == 0 then
    local k = ix.data[1]
    return t:select(a, k < 0 and k or k + 1)
  end
  local it = T(ix)
  local flat = it:reshape(-1) + 1
  local g = F.index_select(t, a, flat)
  local shape = {}
  for i = 1, a - 1 do shape[#shape + 1] = s[i] end
  for _, d in ipairs(it.shape) do shape[#shape + 1] = d end
  for i = a + 1, #s do shape[#shape + 1] = s[i] end
  return g:reshape(shape)
end)

return M
