-- nn/quantized.lua: int8 inference. nn.QuantizedLinear (a Linear whose weight is stored int8 per output channel,
-- run by the linear_int8 op: each input row quantized to u8 on the fly) and ds.quantize(model, opts), which
-- returns a copy of a model with its Linear layers quantized (dynamic quantization, as PyTorch's
-- torch.ao.quantization.quantize_dynamic), compiled when specs are given, with a per-layer error report against
-- f32 on calibration batches.
local Module = require("ds.nn.module")
local linear = require("ds.nn.linear")
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
-- a QuantizedLinear holding a Linear's weights (its bias, or zeros)
function QuantizedLinear.from_linear(lin)
  local N, K = lin.weight.shape[1], lin.weight.shape[2]
  if lin.weight.dtype ~= "f32" then raise("quantize: Linear weights must be f32, got %s", lin.weight.dtype) end
  local q = QuantizedLinear(K, N)
  q.weight, q.scale = M.quantize_weight(lin.weight)
  if lin.bias then q.bias = lin.bias:detach():clone() end
  q.training = lin.training
  return q
end
function QuantizedLinear:forward(x) return ops.linear_int8(x, self.weight, self.scale, self.bias) end
function QuantizedLinear:extra_repr()
  return string.format("in_features=%d, out_features=%d, int8 per channel", self.in_features, self.out_features)
end
M.QuantizedLinear = QuantizedLinear

local MODES = { dynamic = true }
local OPS = { linear = true }

-- the Linear modules of model that opts keeps: {parent, key, name, module}
local function targets(model, skip)
  local list = {}
  for name, m in model:named_modules() do
    for key, child in m:named_children() do
      local full = name == "" and key or name .. "." .. key
      if getmetatable(child) == linear.Linear and not skip[full] then
        local index = tonumber(key)   -- a container's children sit at number keys (named "1", "2", ...)
        if index and rawget(m, index) == child then key = index end
        list[#list + 1] = { parent = m, key = key, name = full, module = child }
      end
    end
  end
  return list
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
  autograd.no_grad(function()
    for i, batch in ipairs(calibration) do
      if type(batch) ~= "table" then raise("quantize: calibration batch %d must be a list of inputs", i) end
      model(unpack(batch))
    end
  end)
  return rows
end

-- ds.quantize(model, {mode = "dynamic", ops = {"linear"}, per_channel = true, skip = {names}, calibration =
-- {{inputs...}, ...}, specs = {...}}): a quantized copy of model (the model itself is unchanged); with specs, that
-- copy compiled with frozen weights by `compile` (ds.compile, a layer above: ds's namespace passes it). With
-- calibration, also the per-layer report {name, max_abs_error, max_abs} of each quantized layer against its f32
-- output on those batches (each layer fed the f32 model's input to it).
function M.quantize(model, opts, compile)
  if type(model) ~= "table" or getmetatable(model) == nil or not model.named_modules then
    raise("quantize: expects an nn.Module (a compiled graph cannot be quantized: quantize its module)")
  end
  opts = options.check(opts, "quantize", { mode = "string", ops = "table", per_channel = "boolean",
    skip = "table", calibration = "table", specs = "table" })
  local mode = opts.mode or "dynamic"
  if not MODES[mode] then
    raise("quantize: mode '%s' is not implemented (only \"dynamic\": activations quantized per row on the fly)", mode)
  end
  for _, op in ipairs(opts.ops or { "linear" }) do
    if not OPS[op] then raise("quantize: ops: '%s' is not implemented (only \"linear\")", tostring(op)) end
  end
  if opts.per_channel == false then raise("quantize: per_channel = false is not implemented (weights are per channel)") end
  local skip = {}
  for _, n in ipairs(opts.skip or {}) do skip[n] = true end
  local f32_model = model:deepcopy()
  local q_model = model:deepcopy()
  local f32_list, list = targets(f32_model, skip), targets(q_model, skip)
  if #list == 0 then raise("quantize: the model has no Linear layer to quantize") end
  local layer_pairs = {}
  for i, t in ipairs(list) do
    local q = QuantizedLinear.from_linear(t.module)
    t.parent[t.key] = q
    layer_pairs[i] = { name = t.name, f32 = f32_list[i].module, q = q }
  end
  local rows = opts.calibration and report(layer_pairs, f32_model, opts.calibration) or nil
  local result = q_model
  if opts.specs then result = compile(q_model, opts.specs, { freeze = true }) end
  return result, rows
end

return M
