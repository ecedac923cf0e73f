-- ops/nn.lua: conv2d, max_pool2d, avg_pool2d, layer_norm (C kernels; backward made of backward-kernel ops,
-- differentiable again except max_pool2d's) and batch_norm (composite of ds ops; running stats in place).
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local state = require("ds.state")
local autograd = require("ds.autograd")
local sym = require("ds.sym")
local conv_out = require("ds.ops.conv_shape").conv_out
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- a number or {h, w} -> {h, w} of integers >= lo
local function pair(v, what, op, lo)
  local p
  if type(v) == "number" then p = { v, v }
  elseif type(v) == "table" and not C.is_tensor(v) and #v == 2 then p = { v[1], v[2] }
  else raise("%s: %s must be a number or {h, w}, got %s", op, what, tostring(v)) end
  for i = 1, 2 do
    if type(p[i]) ~= "number" or p[i] ~= math.floor(p[i]) or p[i] < lo then
      raise("%s: %s must be integers >= %d, got %s", op, what, lo, tostring(p[i]))
    end
  end
  return p
end

local function num(d, op)
  if type(d) ~= "number" then raise("%s: spatial size must be static while tracing, got %s", op, tostring(d)) end
  return d
end

-- an unbatched (C,H,W) input runs as (1,C,H,W); returns x4, squeeze_after
local function batched(x, op)
  if not C.is_tensor(x) then raise("%s: input must be a tensor, got %s", op, type(x)) end
  local n = #x._shape
  if n == 3 then return x:unsqueeze(1), true end
  if n ~= 4 then raise("%s: input must be (N,C,H,W) or (C,H,W), got %s", op, S.str(x._shape)) end
  return x, false
end

local function contiguous_all(inputs)
  for i = 1, #inputs do inputs[i] = F.contiguous(inputs[i]) end
  return inputs
end

local function pack_conv(a, extra)
  local p = { a.stride[1], a.stride[2], a.padding[1], a.padding[2], a.dilation[1], a.dilation[2], a.groups }
  if extra then p[8], p[9] = extra[1], extra[2] end
  return p
end

local CONV_ATTRS = { { "stride", "ints", { 1, 1 } }, { "padding", "ints", { 0, 0 } }, { "dilation", "ints", { 1, 1 } },
                     { "groups", "int", 1 } }
local function conv_attrs(extra)
  local t = {}
  for i, a in ipairs(CONV_ATTRS) do t[i] = a end
  if extra then t[#t + 1] = extra end
  return t
end

-- ---- conv2d: x (N,C,H,W), w (OC,C/groups,KH,KW), b (OC) -> (N,OC,OH,OW) ----
local conv_bw_input, conv_bw_weight, conv_bw_bias

local function conv_forward(x, w, b, a)
  return D.call(D.by_name.conv2d, { x, w, b }, { stride = a.stride, padding = a.padding, dilation = a.dilation,
    groups = a.groups })
end
local function conv_input_grad(g, w, a, hw)
  return D.call(conv_bw_input, { g, w }, { stride = a.stride, padding = a.padding, dilation = a.dilation,
    groups = a.groups, input_size = hw })
end
local function conv_weight_grad(g, x, a, khw)
  return D.call(conv_bw_weight, { g, x }, { stride = a.stride, padding = a.padding, dilation = a.dilation,
    groups = a.groups, kernel_size = khw })
end
local function zero_bias(w) return F.zeros({ w._shape[1] }, { dtype = w.dtype }) end

D.define {
  name = "conv2d", doc = "2-D convolution (cross-correlation) of x (N,C,H,W) with weight (OC,C/groups,KH,KW) plus bias",
  kind = "nn", kernel = "ds_conv2d_%s", dtypes = C.FLOAT, ninputs = 3, attrs = conv_attrs(),
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  pack = function(a) return pack_conv(a) end,
  infer = function(inputs, a)
    local xs, ws, bs = inputs[1]._shape, inputs[2]._shape, inputs[3]._shape
    if #xs ~= 4 then raise("conv2d: input must be (N,C,H,W), got %s", S.str(xs)) end
    if #ws ~= 4 then raise("conv2d: weight must be (OC,C/groups,KH,KW), got %s", S.str(ws)) end
    local G = a.groups
    if G < 1 or G ~= math.floor(G) then raise("conv2d: groups must be an integer >= 1, got %s", tostring(G)) end
    if num(ws[1], "conv2d") % G ~= 0 then
      raise("conv2d: groups %d do not divide the %d out channels of weight %s", G, ws[1], S.str(ws))
    end
    if num(xs[2], "conv2d") % G ~= 0 then
      raise("conv2d: groups %d do not divide the %d channels of input %s", G, xs[2], S.str(xs))
    end
    if ws[2] * G ~= xs[2] then
      raise("conv2d: input %s has %d channels but weight %s with groups %d expects %d", S.str(xs), xs[2], S.str(ws), G,
        ws[2] * G)
    end
    if #bs ~= 1 or bs[1] ~= ws[1] then
      raise("conv2d: bias %s must be (%d) for weight %s", S.str(bs), ws[1], S.str(ws))
    end
    local oh = conv_out(xs[3], ws[3], a.stride[1], a.padding[1], a.dilation[1], "conv2d", xs, ws)
    local ow = conv_out(xs[4], ws[4], a.stride[2], a.padding[2], a.dilation[2], "conv2d", xs, ws)
    return { shape = { xs[1], ws[1], oh, ow }, dtype = inputs[1].dtype }
  end,
  backward = function(ctx, g)
    local x, w = ctx.inputs[1], ctx.inputs[2]
    local a, xs, ws = ctx.attrs, x._shape, w._shape
    local gx = ctx.needs[1] and conv_input_grad(g, w, a, { xs[3], xs[4] }) or nil
    local gw = ctx.needs[2] and conv_weight_grad(g, x, a, { ws[3], ws[4] }) or nil
    local gb = ctx.needs[3] and D.call(conv_bw_bias, { g }) or nil
    return gx, gw, gb
  end,
}

-- grad input (N,C,H,W) from g (N,OC,OH,OW) and w. Linear in g and in w, so its own backward is
-- conv2d (for g) and the weight grad (for w).
conv_bw_input = D.define {
  name = "conv2d_backward_input",
  doc = "gradient of conv2d for its input: g (N,OC,OH,OW), weight -> (N,C,H,W) (a transposed convolution)", kind = "nn",
  kernel = "ds_conv2d_backward_input_%s", dtypes = C.FLOAT, ninputs = 2,
  attrs = conv_attrs { "input_size", "ints" },
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  pack = function(a) return pack_conv(a, a.input_size) end,
  infer = function(inputs, a)
    local gs, ws = inputs[1]._shape, inputs[2]._shape
    if #gs ~= 4 or #ws ~= 4 then
      raise("conv2d_backward_input: expects 4-D grad and weight, got %s and %s", S.str(gs), S.str(ws))
    end
    return { shape = { gs[1], ws[2] * a.groups, a.input_size[1], a.input_size[2] }, dtype = inputs[1].dtype }
  end,
  backward = function(ctx, gg)
    local g, w, a = ctx.inputs[1], ctx.inputs[2], ctx.attrs
    local dg = ctx.needs[1] and conv_forward(gg, w, zero_bias(w), a) or nil
    local dw = ctx.needs[2] and conv_weight_grad(g, gg, a, { w._shape[3], w._shape[4] }) or nil
    return dg, dw
  end,
}

-- grad weight (OC,C/groups,KH,KW) from g (N,OC,OH,OW) and x (N,C,H,W); bilinear like the above.
conv_bw_weight = D.define {
  name = "conv2d_backward_weight",
  doc = "gradient of conv2d for its weight: g (N,OC,OH,OW), x (N,C,H,W) -> (OC,C/groups,KH,KW)", kind = "nn",
  kernel = "ds_conv2d_backward_weight_%s", dtypes = C.FLOAT, ninputs = 2,
  attrs = conv_attrs { "kernel_size", "ints" },
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  pack = function(a) return pack_conv(a, a.kernel_size) end,
  infer = function(inputs, a)
    local gs, xs = inputs[1]._shape, inputs[2]._shape
    if #gs ~= 4 or #xs ~= 4 then
      raise("conv2d_backward_weight: expects 4-D grad and input, got %s and %s", S.str(gs), S.str(xs))
    end
    return { shape = { gs[2], num(xs[2], "conv2d_backward_weight") / a.groups, a.kernel_size[1], a.kernel_size[2] },
      dtype = inputs[1].dtype }
  end,
  backward = function(ctx, gg)
    local g, x, a = ctx.inputs[1], ctx.inputs[2], ctx.attrs
    local dg = ctx.needs[1] and conv_forward(x, gg, zero_bias(gg), a) or nil
    local dx = ctx.needs[2] and conv_input_grad(g, gg, a, { x._shape[3], x._shape[4] }) or nil
    return dg, dx
  end,
}

-- grad bias (OC): g (N,OC,OH,OW) summed over N, OH, OW
conv_bw_bias = D.define {
  name = "conv2d_backward_bias", doc = "gradient of conv2d for its bias: g (N,OC,OH,OW) summed to (OC)", kind = "nn",
  kernel = "ds_conv2d_backward_bias_%s", dtypes = C.FLOAT, ninputs = 1,
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  infer = function(inputs)
    local gs = inputs[1]._shape
    if #gs ~= 4 then raise("conv2d_backward_bias: expects a 4-D grad, got %s", S.str(gs)) end
    return { shape = { gs[2] }, dtype = inputs[1].dtype }
  end,
  backward = function(ctx, gg)
    local gs = ctx.inputs[1]._shape
    return gg:reshape(1, gs[2], 1, 1):expand(gs)
  end,
}

-- ds.conv2d(x, w, b, {stride =, padding =, dilation =, groups =}); b may be nil; padding may be
-- "valid" or "same" (stride 1, even total padding)
C.export("conv2d", function(x, w, b, opts)
  if opts == nil and type(b) == "table" and not C.is_tensor(b) then opts, b = b, nil end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "stride" and k ~= "padding" and k ~= "dilation" and k ~= "groups" then
      raise("conv2d: unknown option '%s'", tostring(k))
    end
  end
  local x4, squeeze = batched(x, "conv2d")
  if not C.is_tensor(w) then raise("conv2d: weight must be a tensor, got %s", type(w)) end
  if #w._shape ~= 4 then raise("conv2d: weight must be (OC,C/groups,KH,KW), got %s", S.str(w._shape)) end
  local stride = pair(opts.stride or 1, "stride", "conv2d", 1)
  local dilation = pair(opts.dilation or 1, "dilation", "conv2d", 1)
  local padding = opts.padding or 0
  if padding == "valid" then padding = { 0, 0 }
  elseif padding == "same" then
    if stride[1] ~= 1 or stride[2] ~= 1 then raise("conv2d: padding 'same' needs stride 1, got %s", S.str(stride)) end
    padding = {}
    for i = 1, 2 do
      local total = dilation[i] * (w._shape[i + 2] - 1)
      if total % 2 ~= 0 then
        raise("conv2d: padding 'same' with kernel %s needs asymmetric padding (not supported)", S.str(w._shape))
      end
      padding[i] = total / 2
    end
  end
  padding = pair(padding, "padding", "conv2d", 0)
  local groups = opts.groups or 1
  if type(groups) ~= "number" or groups < 1 or groups ~= math.floor(groups) then
    raise("conv2d: groups must be an integer >= 1, got %s", tostring(groups))
  end
  if b ~= nil and not C.is_tensor(b) then raise("conv2d: bias must be a tensor or nil, got %s", type(b)) end
  local y = D.call(D.by_name.conv2d, { x4, w, b or zero_bias(w) },
    { stride = stride, padding = padding, dilation = dilation, groups = groups })
  if squeeze then y = y:squeeze(1) end
  return y
end, { args = { "tensor", "tensor", "tensor|table?", "table?" } })

-- ---- pooling: x (N,C,H,W) -> (N,C,OH,OW) ----
local POOL_ATTRS = { { "kernel_size", "ints" }, { "stride", "ints" }, { "padding", "ints", { 0, 0 } } }
local function pool_attrs(extra)
  local t = {}
  for i, a in ipairs(POOL_ATTRS) do t[i] = a end
  for _, e in ipairs(extra or {}) do t[#t + 1] = e end
  return t
end
local function pack_pool(a)
  return { a.kernel_size[1], a.kernel_size[2], a.stride[1], a.stride[2], a.padding[1], a.padding[2],
           a.count_include_pad == false and 0 or 1 }
end

local function pool_out(op, xs, a)
  if #xs ~= 4 then raise("%s: input must be (N,C,H,W), got %s", op, S.str(xs)) end
  local out = { xs[1], xs[2] }
  for i = 1, 2 do
    local n, k, s, p = xs[i + 2], a.kernel_size[i], a.stride[i], a.padding[i]
    if 2 * p > k then
      raise("%s: padding %s must be at most half the kernel %s", op, S.str(a.padding), S.str(a.kernel_size))
    end
    if type(n) ~= "number" then -- a dynamic dim: a floor symbol, checked when the plan is built
      out[i + 2] = sym.add(sym.floordiv(sym.add(n, 2 * p - k), s), 1)
    elseif n < 1 or k > n + 2 * p then
      raise("%s: kernel %s is larger than the padded input %s (padding %s)", op, S.str(a.kernel_size), S.str(xs),
        S.str(a.padding))
    else
      out[i + 2] = math.floor((n + 2 * p - k) / s) + 1
    end
  end
  return out
end

local function pool_call_attrs(a, extra)
  local t = { kernel_size = a.kernel_size, stride = a.stride, padding = a.padding }
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

local mp_bw = D.define {
  name = "max_pool2d_backward", doc = "gradient of max_pool2d: g routed to the input positions its indices name",
  kind = "nn", kernel = "ds_max_pool2d_backward_%s", dtypes = C.FLOAT, ninputs = 2,
  attrs = pool_attrs { { "input_size", "ints" } }, pack = pack_pool,
  promote = function(inputs) return contiguous_all(inputs) end,
  kernel_dtype = function(inputs) return inputs[1].dtype end,
  infer = function(inputs, a)
    local gs = inputs[1]._shape
    if #gs ~= 4 then raise("max_pool2d_backward: expects a 4-D grad, got %s", S.str(gs)) end
    if inputs[2].dtype ~= "i64" then raise("max_pool2d_backward: indices must be i64, got %s", inputs[2].dtype) end
    return { shape = { gs[1], gs[2], a.input_size[1], a.input_size[2] }, dtype = inputs[1].dtype }
  end,
  backward = function()
    raise("max_pool2d_backward: second-order gradients of max_pool2d are not supported")
  end,
}

-- the values alone, for compiled graphs that never read the indices (passes/single_output.lua)
local mp_values = D.define {
  name = "max_pool2d_values", kind = "nn", kernel = "ds_max_pool2d_values_%s", dtypes = C.FLOAT, ninputs = 1,
  attrs = pool_attrs(), pack = pack_pool, internal = true,
}

D.define {
  name = "max_pool2d", doc = "2-D max pooling of (N,C,H,W): values and the 1-based flat index of each in its HxW plane",
  kind = "nn", kernel = "ds_max_pool2d_%s", dtypes = C.FLOAT, ninputs = 1, noutputs = 2, single_output = mp_values,
  attrs = pool_attrs(), pack = pack_pool,
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  infer = function(inputs, a)
    local s = pool_out("max_pool2d", inputs[1]._shape, a)
    return { { shape = s, dtype = inputs[1].dtype }, { shape = s, dtype = "i64" } }
  end,
  backward = function(ctx, g)
    local xs = ctx.inputs[1]._shape
    return D.call(mp_bw, { g, ctx.outputs[2] }, pool_call_attrs(ctx.attrs, { input_size = { xs[3], xs[4] } }))
  end,
}

local ap_fwd
local ap_bw = D.define {
  name = "avg_pool2d_backward", doc = "gradient of avg_pool2d: g spread evenly over each window", kind = "nn",
  kernel = "ds_avg_pool2d_backward_%s", dtypes = C.FLOAT, ninputs = 1,
  attrs = pool_attrs { { "count_include_pad", "bool", true }, { "input_size", "ints" } }, pack = pack_pool,
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  infer = function(inputs, a)
    local gs = inputs[1]._shape
    if #gs ~= 4 then raise("avg_pool2d_backward: expects a 4-D grad, got %s", S.str(gs)) end
    return { shape = { gs[1], gs[2], a.input_size[1], a.input_size[2] }, dtype = inputs[1].dtype }
  end,
  -- linear: its adjoint is the forward pool
  backward = function(ctx, gg)
    return D.call(ap_fwd, { gg }, pool_call_attrs(ctx.attrs, { count_include_pad = ctx.attrs.count_include_pad }))
  end,
}

ap_fwd = D.define {
  name = "avg_pool2d", doc = "2-D average pooling of (N,C,H,W)", kind = "nn", kernel = "ds_avg_pool2d_%s",
  dtypes = C.FLOAT, ninputs = 1,
  attrs = pool_attrs { { "count_include_pad", "bool", true } }, pack = pack_pool,
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  infer = function(inputs, a)
    return { shape = pool_out("avg_pool2d", inputs[1]._shape, a), dtype = inputs[1].dtype }
  end,
  backward = function(ctx, g)
    local xs = ctx.inputs[1]._shape
    return D.call(ap_bw, { g },
      pool_call_attrs(ctx.attrs, { count_include_pad = ctx.attrs.count_include_pad, input_size = { xs[3], xs[4] } }))
  end,
}

-- kernel_size, then opts {stride = kernel_size, padding = 0, ...}
local function pool_api(op, x, kernel_size, opts, allowed)
  opts = opts or {}
  for k in pairs(opts) do
    if not allowed[k] then raise("%s: unknown option '%s'", op, tostring(k)) end
  end
  local x4, squeeze = batched(x, op)
  local k = pair(kernel_size, "kernel_size", op, 1)
  return x4, squeeze, {
    kernel_size = k,
    stride = pair(opts.stride or k, "stride", op, 1),
    padding = pair(opts.padding or 0, "padding", op, 0),
  }
end

-- ds.max_pool2d(x, kernel_size, {stride =, padding =, return_indices =})
--   -> y [, indices (i64, 1-based in each HxW plane)]
C.export("max_pool2d", function(x, kernel_size, opts)
  local x4, squeeze, a = pool_api("max_pool2d", x, kernel_size, opts, { stride = true, padding = true,
    return_indices = true })
  local y, idx = D.call(D.by_name.max_pool2d, { x4 }, a)
  if squeeze then y, idx = y:squeeze(1), idx:squeeze(1) end
  if opts and opts.return_indices then return y, idx end
  return y
end, { args = { "tensor", "integer|table", "table?" } })

-- ds.avg_pool2d(x, kernel_size, {stride =, padding =, count_include_pad = true})
C.export("avg_pool2d", function(x, kernel_size, opts)
  local x4, squeeze, a = pool_api("avg_pool2d", x, kernel_size, opts, { stride = true, padding = true,
    count_include_pad = true })
  if opts and opts.count_include_pad ~= nil then a.count_include_pad = opts.count_include_pad and true or false end
  local y = D.call(ap_fwd, { x4 }, a)
  if squeeze then y = y:squeeze(1) end
  return y
end, { args = { "tensor", "integer|table", "table?" } })

-- ---- layer_norm: x (..., *normalized_shape), w, b (normalized_shape) -> y, mean, rstd (..., 1...) ----
local function norm_size(xs, ns, op)
  local k, n = #ns, #xs
  if k == 0 or k > n then raise("%s: normalized_shape %s does not fit input %s", op, S.str(ns), S.str(xs)) end
  local d = 1
  for i = 1, k do
    if not S.same(xs[n - k + i], ns[i]) then
      raise("%s: normalized_shape %s does not match the last dims of input %s", op, S.str(ns), S.str(xs))
    end
    d = d * ns[i]
  end
  return d
end

-- the fast backward (one kernel: gx, gw, gb); never recorded for a second derivative, since with
-- create_graph the backward below uses ds ops instead
local ln_bw = D.define {
  name = "layer_norm_backward", doc = "gradients of layer_norm for x, weight and bias in one kernel", kind = "nn",
  kernel = "ds_layer_norm_backward_%s", dtypes = C.FLOAT, ninputs = 5, noutputs = 3,
  attrs = { { "normalized_shape", "ints" } },
  promote = function(inputs) return contiguous_all(inputs) end,
  pack = function(a) return { norm_size(a.normalized_shape, a.normalized_shape, "layer_norm_backward") } end,
  infer = function(inputs, a)
    local dt = inputs[1].dtype
    return { { shape = inputs[2]._shape, dtype = dt }, { shape = a.normalized_shape, dtype = dt },
      { shape = a.normalized_shape, dtype = dt } }
  end,
}

-- the same grads written with ds ops (differentiable again): x (..., *ns), w (ns), g like x
local function layer_norm_grads(x, w, g, ns, eps)
  local n, k = #x._shape, #ns
  local dims, lead = {}, {}
  for i = n - k + 1, n do dims[#dims + 1] = i end
  for i = 1, n - k do lead[#lead + 1] = i end
  local xc = x - x:mean(dims, true)
  local rstd = F.rsqrt((xc * xc):mean(dims, true) + eps)
  local xhat = xc * rstd
  local gh = g * w
  local gx = rstd * (gh - gh:mean(dims, true) - xhat * (gh * xhat):mean(dims, true))
  local gw, gb = g * xhat, g
  if #lead > 0 then gw, gb = gw:sum(lead), gb:sum(lead) end
  return gx, gw, gb
end

D.define {
  name = "layer_norm",
  doc = "(x - mean) / sqrt(var + eps) * weight + bias over the last dims; also gives mean and 1/std", kind = "nn",
  kernel = "ds_layer_norm_%s", dtypes = C.FLOAT, ninputs = 3, noutputs = 3,
  attrs = { { "normalized_shape", "ints" }, { "eps", "float", 1e-5 } },
  promote = function(inputs) return contiguous_all(C.promote_float(inputs)) end,
  pack = function(a) return { norm_size(a.normalized_shape, a.normalized_shape, "layer_norm"), a.eps } end,
  infer = function(inputs, a)
    local xs = inputs[1]._shape
    norm_size(xs, a.normalized_shape, "layer_norm")
    for i = 2, 3 do
      if not S.equal(inputs[i]._shape, a.normalized_shape) then
        raise("layer_norm: %s %s must have the normalized shape %s", i == 2 and "weight" or "bias",
          S.str(inputs[i]._shape), S.str(a.normalized_shape))
      end
    end
    local ss, k = {}, #a.normalized_shape
    for i = 1, #xs do ss[i] = i > #xs - k and 1 or xs[i] end
    local dt = inputs[1].dtype
    return { { shape = xs, dtype = dt }, { shape = ss, dtype = dt }, { shape = ss, dtype = dt } }
  end,
  -- grads of mean and rstd (internal outputs) are ignored
  backward = function(ctx, g)
    local x, w, a = ctx.inputs[1], ctx.inputs[2], ctx.attrs
    if state.grad_enabled then return layer_norm_grads(x, w, g, a.normalized_shape, a.eps) end
    local gx, gw, gb = D.call(ln_bw, { g, x, ctx.outputs[2], ctx.outputs[3], w },
      { normalized_shape = a.normalized_shape })
    return gx, gw, gb
  end,
}

-- ds.layer_norm(x, normalized_shape, weight, bias, eps); normalized_shape a number or a list
C.export("layer_norm", function(x, normalized_shape, weight, bias, eps)
  if not C.is_tensor(x) then raise("layer_norm: input must be a tensor, got %s", type(x)) end
  local ns = type(normalized_shape) == "number" and { normalized_shape } or normalized_shape
  if type(ns) ~= "table" then
    raise("layer_norm: normalized_shape must be a number or a list, got %s", type(normalized_shape))
  end
  for i, d in ipairs(ns) do -- checked before the default weight and bias of that shape are made
    if type(d) ~= "number" then
      raise("layer_norm: normalized_shape element %d must be a number, got %s", i, type(d))
    end
  end
  norm_size(x._shape, ns, "layer_norm")
  local dt = x.dtype == "f64" and "f64" or "f32"
  local y = D.call(D.by_name.layer_norm,
    { x, weight or F.ones(ns, { dtype = dt }), bias or F.zeros(ns, { dtype = dt }) },
    { normalized_shape = ns, eps = eps or 1e-5 })
  return y
end)

-- ---- batch_norm (functional): statistics over every dim but the channel dim 2 ----
-- x: (N,C,...) ; running_mean/var, weight, bias: (C) or nil. In training, running stats are
-- updated in place (running = (1 - m) * running + m * batch; the variance unbiased), under no_grad.
C.export("batch_norm", function(x, running_mean, running_var, weight, bias, training, momentum, eps)
  if not C.is_tensor(x) then raise("batch_norm: input must be a tensor, got %s", type(x)) end
  local xs = x._shape
  if #xs < 2 then raise("batch_norm: input must be (N,C,...), got %s", S.str(xs)) end
  local ch = xs[2]
  local bshape, dims, count = { 1, ch }, { 1 }, xs[1]
  for i = 3, #xs do bshape[i] = 1; dims[#dims + 1] = i; count = S.mul(count, xs[i]) end
  for name, t in pairs { running_mean = running_mean, running_var = running_var, weight = weight, bias = bias } do
    if t ~= nil and (not C.is_tensor(t) or #t._shape ~= 1 or not S.same(t._shape[1], ch)) then
      raise("batch_norm: %s must be a (%s) tensor for input %s", name, tostring(ch), S.str(xs))
    end
  end
  momentum, eps = momentum == nil and 0.1 or momentum, eps == nil and 1e-5 or eps
  -- momentum: a number in [0, 1], or a 0-d float tensor (the BatchNorm modules' cumulative average, momentum =
  -- false, passes 1 / num_batches_tracked so that a traced step reads it at every call)
  local tensor_momentum = C.is_tensor(momentum) and #momentum._shape == 0
  if not tensor_momentum and (type(momentum) ~= "number" or not (momentum >= 0 and momentum <= 1)) then
    raise("batch_norm: momentum must be a number in [0, 1] or a 0-d tensor, got %s", tostring(momentum))
  end
  if type(eps) ~= "number" or not (eps >= 0) then
    raise("batch_norm: eps must be a non-negative number, got %s", tostring(eps))
  end
  local y
  if training then
    local mean = x:mean(dims, true)
    local d = x - mean
    local var = (d * d):mean(dims, true)
    if running_mean or running_var then
      if type(count) == "number" and count < 2 and running_var then
        raise("batch_norm: training needs more than one value per channel, got input %s", S.str(xs))
      end
      autograd.no_grad(function()
        if running_mean then running_mean:mul_(1 - momentum):add_(mean:detach():reshape(ch) * momentum) end
        if running_var then
          -- unbiased: var * n / (n - 1); n is a tensor when the batch dim is symbolic (tracing)
          local n = type(count) == "number" and count or F.ones_like(x):sum(dims, true)
          running_var:mul_(1 - momentum):add_((var:detach() * (momentum * n / (n - 1))):reshape(ch))
        end
      end)
    end
    y = d * F.rsqrt(var + eps)
  else
    if not (running_mean and running_var) then
      raise("batch_norm: evaluation mode needs running_mean and running_var")
    end
    y = (x - running_mean:reshape(bshape)) * F.rsqrt(running_var:reshape(bshape) + eps)
  end
  if weight then y = y * weight:reshape(bshape) end
  if bias then y = y + bias:reshape(bshape) end
  return y
end, { method = false })

return D.defined_since(first)
