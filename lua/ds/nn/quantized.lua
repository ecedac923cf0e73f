-- nn/quantized.lua: int8 inference. nn.QuantizedLinear (a Linear whose weight is stored int8 per output channel,
-- run by the linear_int8 op: each input row quantized to u8 on the fly; or, static, by linear_int8_static with
-- the input's scale and zero point fixed by calibration) and ds.quantize(model, opts), which returns a copy of
-- a model with its Linear (and, with ops = {"linear", "conv2d"}, Conv2d: nn.QuantizedConv2d, each image
-- quantized as a whole) layers quantized (dynamic quantization, as PyTorch's
-- torch.ao.quantization.quantize_dynamic, or static with min-max / percentile observers), compiled when specs
-- are given, with a per-layer error report against f32 on calibration batches.
local Module = require("ds.nn.module")
local linear = require("ds.nn.linear")
local conv = require("ds.nn.conv")
local conv_padding = require("ds.nn.conv_padding")
local options = require("ds.options")
local errors = require("ds.errors")
local ops = require("ds.ops.common").functions
local autograd = require("ds.autograd")
require("ds.ops.quantized")

local M = {}
local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- w (N, K) f32 -> q (N, K) i8 and scale (N) f32: symmetric per row, scale = max|w_n| / 127 (1 for a zero row),
-- q = round(w / scale) (half to even), within [-127, 127]
function M.quantize_weight(w)
  return autograd.no_grad(function()
    local amax = w:abs():amax(2)                                           -- (N)
    local scale = ops.where(amax:gt(0), amax / 127, ops.ones_like(amax))
    local q = (w / scale:reshape(-1, 1)):round():clamp(-127, 127):astype("i8")
    return q, scale:contiguous()
  end)
end

--[[ the fixed input quantization of a range [lo, hi] (numbers) seen by an observer, as the kernels compute a
  row's: widened to hold 0, scale = (hi - lo) / 255 and zero point = round(clamp(-lo / scale, 0, 255)) in f32;
  a range of zeros gets scale 1, zero point 0. Returns scale {} f32, zero point {} u8. ]]
function M.input_params(lo, hi)
  local lo_t = ops.full({}, math.min(lo, 0), { dtype = "f32" })
  local hi_t = ops.full({}, math.max(hi, 0), { dtype = "f32" })
  local scale = (hi_t - lo_t) / 255
  if scale:item() == 0 then return ops.ones({}), ops.zeros({}, { dtype = "u8" }) end
  local zero = (-lo_t / scale):clamp(0, 255):round():astype("u8")
  return scale:contiguous(), zero
end

-- x (..., in_features) -> (..., out_features) f32
local QuantizedLinear = Module:extend("QuantizedLinear")
function QuantizedLinear:init(in_features, out_features)
  if type(in_features) ~= "number" or type(out_features) ~= "number" then
    errors.raise("QuantizedLinear: expects QuantizedLinear(in_features, out_features)")
  end
  self.in_features, self.out_features = in_features, out_features
  self:register_buffer("weight", ops.zeros(out_features, in_features, { dtype = "i8" }))
  self:register_buffer("scale", ops.ones(out_features))
  self:register_buffer("bias", ops.zeros(out_features))
end
-- a QuantizedLinear holding a Linear's weights (its bias, or zeros); static = {scale, zero_point} of its input
-- (input_params) for static quantization, nil for dynamic
function QuantizedLinear.from_linear(lin, static)
  local N, K = lin.weight.shape[1], lin.weight.shape[2]
  if lin.weight.dtype ~= "f32" then raise("quantize: Linear weights must be f32, got %s", lin.weight.dtype) end
  local q = QuantizedLinear(K, N)
  q.weight, q.scale = M.quantize_weight(lin.weight)
  if lin.bias then q.bias = lin.bias:detach():clone() end
  if static then
    q:register_buffer("input_scale", static[1])
    q:register_buffer("input_zero_point", static[2])
  end
  q.training = lin.training
  return q
end
function QuantizedLinear:forward(x)
  if self.input_scale then
    return ops.linear_int8_static(x, self.weight, self.scale, self.bias, self.input_scale, self.input_zero_point)
  end
  return ops.linear_int8(x, self.weight, self.scale, self.bias)
end
function QuantizedLinear:extra_repr()
  return string.format("in_features=%d, out_features=%d, int8 per channel, %s", self.in_features,
    self.out_features, self.input_scale and "static input" or "dynamic input")
end
M.QuantizedLinear = QuantizedLinear

local function pair(v) if type(v) == "table" then return v end return { v, v } end

-- x (B, C, H, W) -> (B, O, OH, OW) f32: a Conv2d (groups 1) whose weight is stored int8 per output channel, run
-- by conv2d_int8 (each image quantized to u8 on the fly) or conv2d_int8_static (the input's scale and zero point
-- fixed by calibration)
local QuantizedConv2d = Module:extend("QuantizedConv2d")
function QuantizedConv2d:init(in_channels, out_channels, kernel_size, opts)
  if type(in_channels) ~= "number" or type(out_channels) ~= "number" or kernel_size == nil then
    errors.raise("QuantizedConv2d: expects QuantizedConv2d(in_channels, out_channels, kernel_size, [opts])")
  end
  opts = options.check(opts, "QuantizedConv2d", { stride = "any", padding = "any", dilation = "any",
    padding_mode = conv_padding.MODES })
  local k = pair(kernel_size)
  self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
  self.stride, self.padding, self.dilation = opts.stride or 1, opts.padding or 0, opts.dilation or 1
  self.padding_mode = opts.padding_mode or "zeros"
  if self.padding == "valid" then self.padding = 0
  elseif self.padding == "same" then   -- stride 1: (k - 1) * dilation split evenly (odd kernels)
    local d, pads = pair(self.dilation), {}
    for i = 1, 2 do
      local total = d[i] * (k[i] - 1)
      if total % 2 ~= 0 or pair(self.stride)[i] ~= 1 then
        raise("QuantizedConv2d: padding 'same' needs stride 1 and an even (k - 1) * dilation (kernel %dx%d)", k[1],
          k[2])
      end
      pads[i] = total / 2
    end
    self.padding = pads
  elseif type(self.padding) == "string" then
    raise("QuantizedConv2d: padding '%s' is not implemented (numbers, pairs, \"same\" or \"valid\")", self.padding)
  end
  self:register_buffer("weight", ops.zeros(out_channels, in_channels, k[1], k[2], { dtype = "i8" }))
  self:register_buffer("scale", ops.ones(out_channels))
  self:register_buffer("bias", ops.zeros(out_channels))
end
-- a QuantizedConv2d holding a Conv2d's weights (its bias, or zeros); static as QuantizedLinear.from_linear's
function QuantizedConv2d.from_conv(c, static)
  if c.groups ~= 1 then
    raise("quantize: Conv2d with groups = %d is not implemented (groups 1; skip the layer by name)", c.groups)
  end
  if c.weight.dtype ~= "f32" then raise("quantize: Conv2d weights must be f32, got %s", c.weight.dtype) end
  local q = QuantizedConv2d(c.in_channels, c.out_channels, c.kernel_size, { stride = c.stride, padding = c.padding,
    dilation = c.dilation, padding_mode = c.padding_mode })
  local O = c.out_channels
  local w, scale = M.quantize_weight(c.weight:reshape(O, -1))
  q.weight, q.scale = w:reshape(c.weight.shape), scale
  if c.bias then q.bias = c.bias:detach():clone() end
  if static then
    q:register_buffer("input_scale", static[1])
    q:register_buffer("input_zero_point", static[2])
  end
  q.training = c.training
  return q
end
function QuantizedConv2d:forward(x)
  local padding = self.padding
  if self.padding_mode ~= "zeros" then
    x = conv_padding.pad(x, self.padding_mode, padding, self.kernel_size, pair(self.dilation), 2)
    padding = 0
  end
  local o = { stride = self.stride, padding = padding, dilation = self.dilation }
  if self.input_scale then
    return ops.conv2d_int8_static(x, self.weight, self.scale, self.bias, self.input_scale, self.input_zero_point, o)
  end
  return ops.conv2d_int8(x, self.weight, self.scale, self.bias, o)
end
function QuantizedConv2d:extra_repr()
  return string.format("%d, %d, kernel_size=(%d, %d), int8 per channel, %s", self.in_channels, self.out_channels,
    self.kernel_size[1], self.kernel_size[2], self.input_scale and "static input" or "dynamic input")
end
M.QuantizedConv2d = QuantizedConv2d

local MODES = { dynamic = true, static = true }
local OBSERVERS = { minmax = true, percentile = true }
-- the layer classes ds.quantize's ops name, and how each becomes quantized
local OPS = { linear = { class = linear.Linear, make = QuantizedLinear.from_linear },
  conv2d = { class = conv.Conv2d, make = QuantizedConv2d.from_conv } }

-- the layers of model of the classes in kinds (class -> true) that skip does not name: {parent, key, name, module}
local function targets(model, skip, kinds)
  local list = {}
  for name, m in model:named_modules() do
    for key, child in m:named_children() do
      local full = name == "" and key or name .. "." .. key
      if kinds[getmetatable(child)] and not skip[full] then
        local index = tonumber(key)   -- a container's children sit at number keys (named "1", "2", ...)
        if index and rawget(m, index) == child then key = index end
        list[#list + 1] = { parent = m, key = key, name = full, module = child }
      end
    end
  end
  return list
end

-- each batch of calibration run through model without gradients
local function run_batches(model, calibration)
  autograd.no_grad(function()
    for i, batch in ipairs(calibration) do
      if type(batch) ~= "table" then raise("quantize: calibration batch %d must be a list of inputs", i) end
      model(unpack(batch))
    end
  end)
end

--[[ the input range of each target layer over the calibration batches: "minmax" the smallest and largest value
  seen; "percentile" the (100 - p)-th and p-th percentiles of all values seen (p = opts.percentile, 99.99 by
  default: the rare outliers clipped). Returns {lo, hi} per target, in order. ]]
local function observe(list, model, calibration, observer, p)
  local seen, hooks = {}, {}
  for i, t in ipairs(list) do
    seen[t.module] = { i = i, lo = 0, hi = 0, values = {} }
    hooks[i] = t.module:register_forward_pre_hook(function(m, inputs)
      local o, x = seen[m], inputs[1]:detach()
      if observer == "minmax" then
        o.lo, o.hi = math.min(o.lo, x:min():item()), math.max(o.hi, x:max():item())
      else
        o.values[#o.values + 1] = x:reshape(-1):clone()
      end
    end)
  end
  run_batches(model, calibration)
  for _, h in ipairs(hooks) do h:remove() end
  local ranges = {}
  for _, t in ipairs(list) do
    local o = seen[t.module]
    if observer == "percentile" and #o.values > 0 then
      local all = ops.cat(o.values):sort()
      local n = all:numel()
      local function at(q) return all[math.max(1, math.min(n, math.floor(q / 100 * (n - 1) + 0.5) + 1))]:item() end
      o.lo, o.hi = at(100 - p), at(p)
    end
    ranges[#ranges + 1] = { o.lo, o.hi }
  end
  return ranges
end

-- per layer: the largest |int8 output - f32 output| over the calibration batches, and the largest |f32 output|
local function report(pairs_, model, calibration)
  local rows, seen = {}, {}
  for _, p in ipairs(pairs_) do
    local row = { name = p.name, max_abs_error = 0, max_abs = 0 }
    rows[#rows + 1] = row
    seen[p.f32] = { row = row, q = p.q }
    p.f32:register_forward_hook(function(m, inputs, out)
      local s = seen[m]
      local y = s.q(inputs[1])
      s.row.max_abs_error = math.max(s.row.max_abs_error, (y - out):abs():max():item())
      s.row.max_abs = math.max(s.row.max_abs, out:abs():max():item())
    end)
  end
  run_batches(model, calibration)
  return rows
end

--[[ ds.quantize(model, {mode = "dynamic" | "static", ops = {"linear", "conv2d"}, per_channel = true, skip = {names},
  calibration = {{inputs...}, ...}, observer = "minmax" | "percentile", percentile = 99.99, specs = {...}}): a
  quantized copy of model (the model itself is unchanged); with specs, that copy compiled with frozen weights by
  `compile` (ds.compile, a layer above: ds's namespace passes it). Static mode needs calibration: the observer
  fixes each layer's input scale and zero point from the inputs it sees there. With calibration, also the
  per-layer report {name, max_abs_error, max_abs} of each quantized layer against its f32 output on those
  batches (each layer fed the f32 model's input to it). ]]
function M.quantize(model, opts, compile)
  if type(model) ~= "table" or getmetatable(model) == nil or not model.named_modules then
    raise("quantize: expects an nn.Module (a compiled graph cannot be quantized: quantize its module)")
  end
  opts = options.check(opts, "quantize", { mode = "string", ops = "table", per_channel = "boolean",
    skip = "table", calibration = "table", specs = "table", observer = "string", percentile = "number" })
  local mode = opts.mode or "dynamic"
  if not MODES[mode] then
    raise("quantize: mode '%s' is not implemented (\"dynamic\": activations quantized per row on the fly; "
      .. "\"static\": with a scale and zero point fixed by calibration)", mode)
  end
  local kinds, make = {}, {}
  for _, op in ipairs(opts.ops or { "linear" }) do
    if not OPS[op] then
      raise("quantize: ops: '%s' is not implemented (\"linear\" and \"conv2d\")", tostring(op))
    end
    kinds[OPS[op].class], make[OPS[op].class] = true, OPS[op].make
  end
  if opts.per_channel == false then
    raise("quantize: per_channel = false is not implemented (weights are per channel)")
  end
  local observer = opts.observer or "minmax"
  if mode ~= "static" and (opts.observer or opts.percentile) then
    raise("quantize: observer and percentile are options of mode = \"static\"")
  end
  if not OBSERVERS[observer] then
    raise("quantize: observer '%s' is not known (\"minmax\" or \"percentile\")", observer)
  end
  local p = opts.percentile or 99.99
  if opts.percentile and (observer ~= "percentile" or not (p > 50 and p <= 100)) then
    raise("quantize: percentile must be in (50, 100] with observer = \"percentile\", got %s", tostring(p))
  end
  if mode == "static" and not opts.calibration then
    raise("quantize: mode \"static\" needs calibration batches (the observers fix the input scales from them)")
  end
  local skip = {}
  for _, n in ipairs(opts.skip or {}) do skip[n] = true end
  local f32_model = model:deepcopy()
  local q_model = model:deepcopy()
  local f32_list, list = targets(f32_model, skip, kinds), targets(q_model, skip, kinds)
  if #list == 0 then raise("quantize: the model has no layer to quantize (of ops %s)", table.concat(opts.ops or
    { "linear" }, ", ")) end
  local ranges = mode == "static" and observe(f32_list, f32_model, opts.calibration, observer, p) or {}
  local layer_pairs = {}
  for i, t in ipairs(list) do
    local r = ranges[i]
    local q = make[getmetatable(t.module)](t.module, r and { M.input_params(r[1], r[2]) })
    t.parent[t.key] = q
    layer_pairs[i] = { name = t.name, f32 = f32_list[i].module, q = q }
  end
  local rows = opts.calibration and report(layer_pairs, f32_model, opts.calibration) or nil
  local result = q_model
  if opts.specs then result = compile(q_model, opts.specs, { freeze = true }) end
  return result, rows
end

return M
