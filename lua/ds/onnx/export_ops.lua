-- onnx/export_ops.lua: the ONNX form of every ds op (opset 17), or the reason it has none.
--[[ FORMS[op](w, n): n.node is the ds node, n.ins the ONNX names of its inputs, n.outs the names its outputs
  must get, n.inm / n.outm the metas ({shape, dtype}) of inputs and outputs, n.used[k] whether output k is
  read. w is the Writer (export.lua): w:node, w:one, w:const, w:scalar, w:i64s, w:shape, w:dim, w:cast.
  NO_FORM[op] = reason: exporting a graph holding the op is an error naming it, the reason and its Lua line.
  Every op of the table is in one of the two (tests/onnx_spec.lua fails naming an op that is in neither).
  ds indices are 1-based: Gather/ArgMax/OneHot... get index - 1, and indices they return get + 1. ]]
local types = require("ds.onnx.types")
local A = require("ds.onnx.attr")
local dtype = require("ds.dtype")
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs, each with its ONNX form

local M = {}
local FORMS, NO_FORM = {}, {}
M.FORMS, M.NO_FORM = FORMS, NO_FORM


local function last(w, n, op_type, ins, attrs) w:node(op_type, ins, attrs, { n.outs[1] }) end
local function axis0(d) return d - 1 end -- ds dims are 1-based and normalized (positive) in the graph

-- ---- elementwise: each op's entry declares its form (ops/elementwise.lua): an ONNX op's name, a function, or
-- no_onnx = the reason it has none ----
local KIT = { last = last, A = A, onnx_type = types.onnx_type } -- what an entry's form function gets as X
local function common(n) return dtype.promote(n.inm[1].dtype, n.inm[2].dtype) end
local function one_node(onnx, kind) -- the inputs cast as ds computes them (compare: the common dtype)
  if kind == "unary" or kind == "cast" then
    return function(w, n) last(w, n, onnx, { w:cast(n.ins[1], n.inm[1].dtype, n.outm[1].dtype) }) end
  end
  return function(w, n)
    local dt = kind == "compare" and common(n) or n.outm[1].dtype
    last(w, n, onnx, { w:cast(n.ins[1], n.inm[1].dtype, dt), w:cast(n.ins[2], n.inm[2].dtype, dt) })
  end
end
for name, def in pairs(EW) do
  if type(def.onnx) == "string" then FORMS[name] = one_node(def.onnx, def.ew_kind)
  elseif def.onnx then
    local form = def.onnx
    FORMS[name] = function(w, n) return form(w, n, KIT) end
  else NO_FORM[name] = def.no_onnx end
end

-- ---- reductions ----
-- the 0-based axes a reduction's dims attr names (nil: all dims)
local function axes_of(n)
  local dims, nd = n.node.attrs.dims, #n.inm[1].shape
  local out = {}
  if dims == nil then for i = 1, nd do out[i] = i - 1 end
  else for i, d in ipairs(dims) do out[i] = axis0(d) end end
  return out
end

-- reshape name x to the ds meta shape of output k (when ONNX keeps dims ds drops, or the reverse)
local function to_shape(w, x, shape) return w:one("Reshape", { x, w:shape(shape) }) end
local function finish_reshape(w, n, x, k)
  w:node("Reshape", { x, w:shape(n.outm[k or 1].shape) }, nil, { n.outs[k or 1] })
end

local function reduce_attr(onnx)
  return function(w, n)
    if #n.inm[1].shape == 0 then return last(w, n, "Identity", { n.ins[1] }) end
    last(w, n, onnx, { n.ins[1] }, { axes = A.ints(axes_of(n)), keepdims = A.int(n.node.attrs.keepdim and 1 or 0) })
  end
end
FORMS.mean = reduce_attr("ReduceMean")
FORMS.amax = reduce_attr("ReduceMax")
FORMS.amin = reduce_attr("ReduceMin")
FORMS.prod = reduce_attr("ReduceProd")
FORMS.logsumexp = reduce_attr("ReduceLogSumExp")
FORMS.sum = function(w, n)
  if #n.inm[1].shape == 0 then return last(w, n, "Identity", { n.ins[1] }) end
  local x = w:cast(n.ins[1], n.inm[1].dtype, n.outm[1].dtype)
  last(w, n, "ReduceSum", { x, w:i64s(axes_of(n)) }, { keepdims = A.int(n.node.attrs.keepdim and 1 or 0) })
end

-- all / any: min / max over the values as i32 (ONNX reduces no bools)
local function reduce_bool(onnx)
  return function(w, n)
    local x = w:cast(w:cast(n.ins[1], n.inm[1].dtype, "bool"), "bool", "i32")
    if #n.inm[1].shape == 0 then return last(w, n, "Cast", { x }, { to = A.int(types.ONNX.bool) }) end
    local r = w:one(onnx, { x }, { axes = A.ints(axes_of(n)), keepdims = A.int(n.node.attrs.keepdim and 1 or 0) })
    last(w, n, "Cast", { r }, { to = A.int(types.ONNX.bool) })
  end
end
FORMS.all = reduce_bool("ReduceMin")
FORMS.any = reduce_bool("ReduceMax")

-- argmax / argmin over one dim (or the flattened tensor), + 1 (ds indices are 1-based); the first of equal values
local function arg_reduce(onnx)
  return function(w, n, k)
    local dims, x = n.node.attrs.dims, n.ins[1]
    local axis
    if dims == nil then
      x, axis = to_shape(w, x, { -1 }), 0
    else
      if #dims ~= 1 then error("ds.onnx.export: " .. n.node.op .. " over " .. #dims .. " dims has no ONNX form (" ..
        (n.node.line or "?") .. ")", 0) end
      axis = axis0(dims[1])
    end
    local i = w:one(onnx, { x }, { axis = A.int(axis), keepdims = A.int(1), select_last_index = A.int(0) })
    i = w:one("Add", { i, w:scalar(1, "i64") })
    finish_reshape(w, n, i, k)
  end
end
FORMS.argmax = arg_reduce("ArgMax")
FORMS.argmin = arg_reduce("ArgMin")

-- max / min with dims: values and 1-based indices
local function value_and_index(value_op, arg_op)
  local arg = arg_reduce(arg_op)
  return function(w, n)
    local dims = n.node.attrs.dims
    local x = n.ins[1]
    if dims == nil then x = to_shape(w, x, { -1 }) end
    local axes = dims == nil and { 0 } or axes_of(n)
    finish_reshape(w, n, w:one(value_op, { x }, { axes = A.ints(axes), keepdims = A.int(1) }), 1)
    if n.used[2] then arg(w, n, 2) end
  end
end
FORMS.max = value_and_index("ReduceMax", "ArgMax")
FORMS.min = value_and_index("ReduceMin", "ArgMin")

FORMS.softmax = function(w, n) last(w, n, "Softmax", { n.ins[1] }, { axis = A.int(axis0(n.node.attrs.dim)) }) end
FORMS.log_softmax = function(w, n) last(w, n, "LogSoftmax", { n.ins[1] }, { axis = A.int(axis0(n.node.attrs.dim)) }) end
FORMS.cumsum = function(w, n)
  local a = n.node.attrs
  last(w, n, "CumSum", { w:cast(n.ins[1], n.inm[1].dtype, n.outm[1].dtype), w:scalar(axis0(a.dim), "i64") },
    { reverse = A.int(a.reverse and 1 or 0) })
end

-- var / std: sum((x - mean)^2) / (count - correction)
local function variance(w, n)
  local a, x, dt = n.node.attrs, n.ins[1], n.outm[1].dtype
  local axes = axes_of(n)
  local mean = w:one("ReduceMean", { x }, { axes = A.ints(axes), keepdims = A.int(1) })
  local d = w:one("Sub", { x, mean })
  local ss = w:one("ReduceSum", { w:one("Mul", { d, d }), w:i64s(axes) }, { keepdims = A.int(a.keepdim and 1 or 0) })
  local count = 1
  for _, ax in ipairs(axes) do count = count * n.inm[1].shape[ax + 1] end
  local denom
  if type(count) == "number" then denom = w:scalar(count - a.correction, dt)
  else denom = w:one("Sub", { w:cast(w:dim_scalar(count), "i64", dt), w:scalar(a.correction, dt) }) end
  return w:one("Div", { ss, denom })
end
FORMS.var = function(w, n) last(w, n, "Identity", { variance(w, n) }) end
FORMS.std = function(w, n) last(w, n, "Sqrt", { variance(w, n) }) end

-- ---- shapes and views ----
FORMS.reshape = function(w, n) finish_reshape(w, n, n.ins[1]) end
FORMS.expand = function(w, n) last(w, n, "Expand", { n.ins[1], w:shape(n.outm[1].shape) }) end
FORMS.permute = function(w, n)
  local perm = {}
  for i, d in ipairs(n.node.attrs.dims) do perm[i] = axis0(d) end
  last(w, n, "Transpose", { n.ins[1] }, { perm = A.ints(perm) })
end
FORMS.transpose = function(w, n)
  local perm, a = {}, n.node.attrs
  for i = 1, #n.inm[1].shape do perm[i] = i - 1 end
  perm[a.dim0], perm[a.dim1] = a.dim1 - 1, a.dim0 - 1
  last(w, n, "Transpose", { n.ins[1] }, { perm = A.ints(perm) })
end
FORMS.narrow = function(w, n)
  local a = n.node.attrs
  local start = w:dim(a.start - 1)
  local stop = w:dim(a.start - 1 + a.length)
  last(w, n, "Slice", { n.ins[1], start, stop, w:i64s({ axis0(a.dim) }) })
end
FORMS.select = function(w, n)
  local a = n.node.attrs
  last(w, n, "Gather", { n.ins[1], w:dim_scalar(a.index - 1) }, { axis = A.int(axis0(a.dim)) })
end
-- unfold: Gather of the windows' positions (windows * size, 0-based) along the dim, split into (windows, size),
-- size moved last
FORMS.unfold = function(w, n)
  local a, shape = n.node.attrs, n.inm[1].shape
  local out = n.outm[1].shape
  local windows, idx = out[a.dim], {}
  for i = 0, windows - 1 do for j = 0, a.size - 1 do idx[#idx + 1] = i * a.step + j end end
  local picked = w:one("Gather", { n.ins[1], w:i64s(idx) }, { axis = A.int(axis0(a.dim)) })
  local split, perm = {}, {}
  for i = 1, #shape do
    if i == a.dim then split[#split + 1] = windows; split[#split + 1] = a.size else split[#split + 1] = shape[i] end
  end
  for i = 0, #shape do if i ~= a.dim then perm[#perm + 1] = i end end
  perm[#perm + 1] = a.dim
  local r = w:one("Reshape", { picked, w:shape(split) })
  last(w, n, "Transpose", { r }, { perm = A.ints(perm) })
end
FORMS.cat = function(w, n)
  local dt, ins = n.outm[1].dtype, {}
  for i, x in ipairs(n.ins) do ins[i] = w:cast(x, n.inm[i].dtype, dt) end
  last(w, n, "Concat", ins, { axis = A.int(axis0(n.node.attrs.dim)) })
end

-- ---- creation ----
FORMS.full = function(w, n)
  local a, dt = n.node.attrs, n.outm[1].dtype
  local value = { data_type = types.onnx_type(dt, "full"), dims = { 1 }, raw_data = types.list_bytes({ a.value }, dt) }
  last(w, n, "ConstantOfShape", { w:shape(n.outm[1].shape) }, { value = A.tensor(value) })
end
-- arange: start + i * step for i < length (Range's count is ceil((limit - start) / step): a limit half a step
-- short of start + length * step gives exactly length values)
FORMS.arange = function(w, n)
  local a, dt = n.node.attrs, n.outm[1].dtype
  if type(a.length) ~= "number" then
    error("ds.onnx.export: arange with the dynamic length " .. tostring(a.length) .. " has no ONNX form here (" ..
      (n.node.line or "?") .. ")", 0)
  end
  local limit = a.start + a.step * (a.length - 0.5)
  if not dtype.is_float[dt] then limit = a.start + a.step * a.length end
  last(w, n, "Range", { w:scalar(a.start, dt), w:scalar(limit, dt), w:scalar(a.step, dt) })
end

-- ---- indexing (ds indices are 1-based) ----
local function minus_one(w, ix) return w:one("Sub", { ix, w:scalar(1, "i64") }) end
FORMS.index_select = function(w, n)
  last(w, n, "Gather", { n.ins[1], minus_one(w, n.ins[2]) }, { axis = A.int(axis0(n.node.attrs.dim)) })
end
FORMS.embedding = function(w, n) last(w, n, "Gather", { n.ins[2], minus_one(w, n.ins[1]) }, { axis = A.int(0) }) end
FORMS.gather = function(w, n)
  last(w, n, "GatherElements", { n.ins[1], minus_one(w, n.ins[2]) }, { axis = A.int(axis0(n.node.attrs.dim)) })
end
FORMS.scatter_add = function(w, n)
  last(w, n, "ScatterElements", { n.ins[1], minus_one(w, n.ins[2]), n.ins[3] },
    { axis = A.int(axis0(n.node.attrs.dim)), reduction = A.string("add") })
end
-- index_add(x, index (n), src): ScatterElements with the index broadcast along dim to src's shape
FORMS.index_add = function(w, n)
  local d, src_shape = n.node.attrs.dim, n.inm[3].shape
  local view = {}
  for i = 1, #src_shape do view[i] = i == d and -1 or 1 end
  local ix = w:one("Expand", { to_shape(w, minus_one(w, n.ins[2]), view), w:shape(src_shape) })
  last(w, n, "ScatterElements", { n.ins[1], ix, n.ins[3] }, { axis = A.int(axis0(d)), reduction = A.string("add") })
end
FORMS.one_hot = function(w, n)
  local dt, depth = n.outm[1].dtype, n.outm[1].shape[#n.outm[1].shape]
  last(w, n, "OneHot", { minus_one(w, n.ins[1]), w:dim(depth), w:const({ 0, 1 }, dt) }, { axis = A.int(-1) })
end

-- ---- matmul, nn ----
FORMS.matmul = function(w, n) last(w, n, "MatMul", { n.ins[1], n.ins[2] }) end

--[[ linear_int8(x (..., K), w (N, K) i8, wscale (N), bias (N)): ds's computation written out (docs/QUANTIZATION.md)
  so ONNX Runtime gives the same bits. x as (M, K); per row lo = min(0, min x), hi = max(0, max x), s = (hi - lo)
  / 255, zp = Round(Clip(-lo / s, 0, 255)) (s taken as 1 for a row whose s is 0: it holds only zeros, or values
  that quantize to 0); QuantizeLinear per row (axis 0); MatMulInteger(q, w^T) minus zp * (w's row sums), exact
  in int32 (ORT's MatMulInteger takes one a_zero_point per tensor only); then Cast(.) * (s * wscale) + bias. ]]
FORMS.linear_int8 = function(w, n)
  local K = n.inm[2].shape[2]
  local x = to_shape(w, n.ins[1], { -1, K })
  local zero = w:scalar(0, "f32")
  local keep = { axes = A.ints({ 1 }), keepdims = A.int(1) }
  local lo = w:one("Min", { w:one("ReduceMin", { x }, keep), zero })                   -- (M, 1)
  local hi = w:one("Max", { w:one("ReduceMax", { x }, keep), zero })
  local s = w:one("Div", { w:one("Sub", { hi, lo }), w:scalar(255, "f32") })
  local s1 = w:one("Where", { w:one("Equal", { s, zero }), w:scalar(1, "f32"), s })
  local zp = w:one("Round", { w:one("Clip", { w:one("Div", { w:one("Neg", { lo }), s1 }), zero,
    w:scalar(255, "f32") }) })
  local zp8 = w:cast(to_shape(w, zp, { -1 }), "f32", "u8")                              -- (M)
  local q = w:one("QuantizeLinear", { x, to_shape(w, s1, { -1 }), zp8 }, { axis = A.int(0) })
  local acc = w:one("MatMulInteger", { q, w:one("Transpose", { n.ins[2] }, { perm = A.ints({ 1, 0 }) }) })
  local sums = w:one("ReduceSum", { w:cast(n.ins[2], "i8", "i32"), w:i64s({ 1 }) }, { keepdims = A.int(0) })
  local v = w:one("Sub", { acc, w:one("Mul", { w:cast(zp, "f32", "i32"), sums }) })
  local y = w:one("Add", { w:one("Mul", { w:cast(v, "i32", "f32"), w:one("Mul", { s, n.ins[3] }) }), n.ins[4] })
  finish_reshape(w, n, y)
end
--[[ conv2d_int8[_static](x (B, C, H, W), w (O, C, kh, kw) i8, wscale, bias[, x_scale, x_zero_point]): each image
  quantized (QuantizeLinear per image, axis 0, its own range as linear_int8's rows, or the fixed one), then
  ConvInteger(q, w) - zp * ConvInteger(ones, w): the exact sum of (q - zp) * w over the window's in-image taps,
  which is ds's (it pads with the zero point; ORT's ConvInteger takes one x_zero_point per tensor), then
  Cast(.) * (scale * wscale) + bias per channel. ]]
local function conv_int8(w, n, static)
  local a, xs, ws = n.node.attrs, n.inm[1].shape, n.inm[2].shape
  local x, s, s1, zp
  if static then
    s = to_shape(w, n.ins[5], { 1, 1, 1, 1 })
    s1, zp = s, w:cast(to_shape(w, n.ins[6], { 1, 1, 1, 1 }), "u8", "f32")
  else
    local zero = w:scalar(0, "f32")
    local keep = { axes = A.ints({ 1, 2, 3 }), keepdims = A.int(1) }
    local lo = w:one("Min", { w:one("ReduceMin", { n.ins[1] }, keep), zero })                   -- (B, 1, 1, 1)
    local hi = w:one("Max", { w:one("ReduceMax", { n.ins[1] }, keep), zero })
    s = w:one("Div", { w:one("Sub", { hi, lo }), w:scalar(255, "f32") })
    s1 = w:one("Where", { w:one("Equal", { s, zero }), w:scalar(1, "f32"), s })
    zp = w:one("Round", { w:one("Clip", { w:one("Div", { w:one("Neg", { lo }), s1 }), zero,
      w:scalar(255, "f32") }) })
  end
  local B = xs[1]
  local zp8 = w:cast(w:one("Expand", { to_shape(w, zp, { -1 }), w:shape({ B }) }), "f32", "u8")   -- (B)
  local sB = w:one("Expand", { to_shape(w, s1, { -1 }), w:shape({ B }) })
  local q = w:one("QuantizeLinear", { n.ins[1], sB, zp8 }, { axis = A.int(0) })
  local p = a.padding
  local attrs = { strides = A.ints(a.stride), pads = A.ints({ p[1], p[2], p[1], p[2] }), dilations = A.ints(a.dilation),
    kernel_shape = A.ints({ ws[3], ws[4] }) }
  x = w:one("ConvInteger", { q, n.ins[2] }, attrs)
  local ones = w:one("ConstantOfShape", { w:shape({ 1, xs[2], xs[3], xs[4] }) }, { value = A.tensor({
    data_type = types.ONNX.u8, dims = { 1 }, raw_data = types.list_bytes({ 1 }, "u8") }) })
  local taps = w:one("ConvInteger", { ones, n.ins[2] }, attrs)                                   -- (1, O, OH, OW)
  local v = w:one("Sub", { x, w:one("Mul", { w:cast(zp, "f32", "i32"), taps }) })
  local per_channel = w:i64s({ 1, -1, 1, 1 })
  local scale = w:one("Mul", { s, w:one("Reshape", { n.ins[3], per_channel }) })
  last(w, n, "Add", { w:one("Mul", { w:cast(v, "i32", "f32"), scale }), w:one("Reshape", { n.ins[4], per_channel }) })
end
FORMS.conv2d_int8 = function(w, n) conv_int8(w, n, false) end
FORMS.conv2d_int8_static = function(w, n) conv_int8(w, n, true) end

-- linear_int8_static(x, w, wscale, bias, x_scale, x_zero_point): QuantizeLinear per tensor, MatMulInteger with
-- that zero point, Cast(.) * (x_scale * wscale) + bias: ds's bits
FORMS.linear_int8_static = function(w, n)
  local q = w:one("QuantizeLinear", { n.ins[1], n.ins[5], n.ins[6] })
  local acc = w:one("MatMulInteger", { q, w:one("Transpose", { n.ins[2] }, { perm = A.ints({ 1, 0 }) }), n.ins[6] })
  last(w, n, "Add", { w:one("Mul", { w:cast(acc, "i32", "f32"), w:one("Mul", { n.ins[5], n.ins[3] }) }), n.ins[4] })
end

local function pads(p) return { p[1], p[2], p[1], p[2] } end
FORMS.conv2d = function(w, n)
  local a = n.node.attrs
  last(w, n, "Conv", { n.ins[1], n.ins[2], n.ins[3] }, { strides = A.ints(a.stride), pads = A.ints(pads(a.padding)),
    dilations = A.ints(a.dilation), group = A.int(a.groups), kernel_shape =
      A.ints({ n.inm[2].shape[3], n.inm[2].shape[4] }) })
end
-- max_pool2d: values, and indices 1-based within each (H,W) plane (ONNX's count over the whole NCHW tensor)
FORMS.max_pool2d = function(w, n)
  local a = n.node.attrs
  local outs = { n.outs[1], n.used[2] and w:fresh("flat_indices") or nil }
  w:node("MaxPool", { n.ins[1] }, { kernel_shape = A.ints(a.kernel_size), strides = A.ints(a.stride or a.kernel_size),
    pads = A.ints(pads(a.padding)) }, outs)
  if n.used[2] then
    local s = n.inm[1].shape
    local plane = w:one("Mul", { w:dim(s[3]), w:dim(s[4]) })
    w:node("Add", { w:one("Mod", { outs[2], plane }), w:scalar(1, "i64") }, nil, { n.outs[2] })
  end
end
FORMS.avg_pool2d = function(w, n)
  local a = n.node.attrs
  last(w, n, "AveragePool", { n.ins[1] }, { kernel_shape = A.ints(a.kernel_size),
    strides = A.ints(a.stride or a.kernel_size),
    pads = A.ints(pads(a.padding)), count_include_pad = A.int(a.count_include_pad and 1 or 0) })
end
-- layer_norm -> LayerNormalization (y, mean, 1/std: the same three outputs and shapes as ds's)
FORMS.layer_norm = function(w, n)
  local a = n.node.attrs
  local outs = { n.outs[1], n.used[2] and n.outs[2] or "", n.used[3] and n.outs[3] or "" }
  while outs[#outs] == "" do outs[#outs] = nil end
  w:node("LayerNormalization", { n.ins[1], n.ins[2], n.ins[3] }, { axis = A.int(-#a.normalized_shape),
    epsilon = A.float(a.eps) }, outs)
end
-- attention: softmax(q k^T * scale + mask) v, the mask bool (true attends) or float (added); is_causal hides
-- key j from query i when j > i
FORMS.scaled_dot_product_attention = function(w, n)
  local a, dt = n.node.attrs, n.outm[1].dtype
  local qs, ks = n.inm[1].shape, n.inm[2].shape
  local nd = #ks
  local perm = {}
  for i = 1, nd do perm[i] = i - 1 end
  perm[nd - 1], perm[nd] = nd - 1, nd - 2
  local scale = a.scale or 1 / math.sqrt(qs[#qs])
  local s = w:one("Mul", { w:one("MatMul", { n.ins[1], w:one("Transpose", { n.ins[2] }, { perm = A.ints(perm) }) }),
    w:scalar(scale, dt) })
  local ninf = w:scalar(-math.huge, dt)
  if a.mask == "bool" then s = w:one("Where", { w:cast(n.ins[4], n.inm[4].dtype, "bool"), s, ninf })
  elseif a.mask == "float" then s = w:one("Add", { s, w:cast(n.ins[4], n.inm[4].dtype, dt) }) end
  if a.is_causal then
    local L, S = qs[#qs - 1], ks[#ks - 1]
    local ones = w:one("ConstantOfShape", { w:shape({ L, S }) }, { value = A.tensor({ data_type = types.ONNX.i64,
      dims = { 1 }, raw_data = types.list_bytes({ 1 }, "i64") }) })
    local keep = w:cast(w:one("Trilu", { ones }, { upper = A.int(0) }), "i64", "bool")
    s = w:one("Where", { keep, s, ninf })
  end
  last(w, n, "MatMul", { w:one("Softmax", { s }, { axis = A.int(-1) }), n.ins[3] })
end

-- ---- no ONNX form ----
local TRAINING = "a training-graph op (ONNX export covers inference graphs; the optimizer update is out of scope)"
for _, op in ipairs({ "adam_update", "adam_amsgrad_update", "adagrad_update", "rmsprop_update", "rmsprop_full_update",
  "sgd_update", "sgd_momentum_update", "radam_update", "nadam_update", "adamax_update", "adadelta_update",
  "conv2d_backward_input", "conv2d_backward_weight", "conv2d_backward_bias",
  "avg_pool2d_backward", "max_pool2d_backward", "layer_norm_backward" }) do NO_FORM[op] = TRAINING end
local RANDOM = "ds draws from its own Philox stream, which ONNX's Random* ops cannot reproduce"
for _, op in ipairs({ "rand", "randn", "randint", "multinomial" }) do NO_FORM[op] = RANDOM end
NO_FORM.index_copy_ = "an in-place write into graph state (a KV cache); an ONNX graph has no state to write"
NO_FORM.all_reduce = "a collective across MPI processes (ds.distributed): an ONNX model runs in one process"
NO_FORM.cumprod = "ONNX has no cumulative product"
NO_FORM.matmul_bf16 = "ONNX's MatMul has no bf16 inputs with an f32 result, and ONNX Runtime's CPU MatMul no bf16 kernel: "
  .. "ds's bf16 dot (docs/DTYPES.md) cannot be written out there"
NO_FORM.conv2d_bf16 = "ONNX Runtime's CPU Conv has no bf16 kernel, and ds's bf16 dot (docs/DTYPES.md) cannot be "
  .. "written out there"
NO_FORM.scatter_reduce = "opset 17's ScatterElements has no max/min reduction (opset 18 added them)"
NO_FORM.sort = "ONNX's TopK does not promise ds's stable order of equal values"
NO_FORM.print = "ONNX has no printing op"
NO_FORM.segment_attention = "ONNX attention has no per-sequence segments (export the padded model with a mask)"

-- write ds node `node` through its form (w.scope is the graph being written)
function M.write(w, node, n)
  local form = FORMS[node.op]
  if not form then
    local why = NO_FORM[node.op] or "no ONNX mapping is written for it (lua/ds/onnx/export_ops.lua)"
    error(string.format("ds.onnx.export: op %s has no ONNX form: %s (%s)", node.op, why, node.line or "?"), 0)
  end
  form(w, n)
end

return M
