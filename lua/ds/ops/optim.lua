-- ops/optim.lua: fused optimizer updates (kind "update"): one C kernel per parameter tensor that
-- writes param and optimizer state in place; `mutates` lists the inputs written (1-based), so a
-- tracer records them as state writes. They have no outputs and no backward. The numeric
-- hyper-parameters (def.hyper: lr, momentum, betas, ...) are the last operand, an f64 tensor, not attrs:
-- a compiled train step reads the optimizer's values at every run (M.refresh), so schedulers work compiled.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local ffi = require("ffi")

local M = {}

-- the update defs by name (optimizers require this module and take theirs from here)
M.defs = {}

-- hyper-parameter tensor -> the function that rewrites it from its optimizer's param group; a compiled graph
-- that reads such a tensor keeps the function and calls it before every run (weak: the optimizer holds both)
M.refresh = setmetatable({}, { __mode = "kv" })

-- a new f64 tensor for def's hyper-parameters (concrete even while tracing: the graph reads it as state)
function M.tensor(def)
  return Tensor._empty("f64", { #def.hyper }, def.name)
end

-- write values (by name; booleans as 0/1) into def's hyper-parameter tensor t; what names the values in errors
function M.fill(t, def, values, what)
  local data = ffi.cast("double *", t._c.data)
  for i, h in ipairs(def.hyper) do
    local v = values[h[1]]
    if v == nil then v = h[3] end
    if h[2] == "bool" and type(v) == "boolean" then v = v and 1 or 0 end
    if type(v) ~= "number" then
      errors.raise(string.format("%s: %s must be a %s, got %s", what, h[1], h[2] == "bool" and "boolean" or "number",
        tostring(v)))
    end
    data[i - 1] = v
  end
  return t
end

-- every tensor operand: same dtype and shape as the parameter; then def.counters 1-element f32 tensors (the step
-- counter, NAdam's mu_product); the last: the hyper-parameters
local function check(inputs, _, def)
  local opname, p = def.name, inputs[1]
  local nstate_like = def.ninputs - 1 - #def.counters
  for i = 2, nstate_like do
    local x = inputs[i]
    if x.dtype ~= p.dtype or not S.equal(x._shape, p._shape) then
      errors.raise(string.format("%s: operand %d is %s %s, the parameter is %s %s", opname, i, x.dtype,
        S.str(x._shape), p.dtype, S.str(p._shape)))
    end
  end
  for k, name in ipairs(def.counters) do
    local s = inputs[nstate_like + k]
    if s.dtype ~= "f32" or S.numel(s._shape) ~= 1 then
      errors.raise(string.format("%s: %s must be a 1-element f32 tensor, got %s %s", opname,
        name == "step" and "step counter" or name, s.dtype, S.str(s._shape)))
    end
  end
  local h = inputs[#inputs]
  if h.dtype ~= "f64" or #h._shape ~= 1 or h._shape[1] ~= #def.hyper then
    errors.raise(string.format("%s: the last operand (the hyper-parameters) must be an f64 tensor of shape (%d), " ..
      "got %s %s", opname, #def.hyper, h.dtype, S.str(h._shape)))
  end
  return {}
end

-- ds.<name>(tensors..., hyper): hyper is def's hyper-parameter tensor, or an options table of the
-- hyper-parameters and attrs by name (defaults filled in; lr has none)
local function api(def)
  local n = def.ninputs - 1
  local schema = { name = def.name, attrs = {}, attr_index = {} }
  for _, list in ipairs { def.hyper, def.attrs } do
    for _, a in ipairs(list) do
      schema.attrs[#schema.attrs + 1] = a
      schema.attr_index[a[1]] = #schema.attrs
    end
  end
  return function(...)
    local inputs = {}
    for i = 1, n do inputs[i] = (select(i, ...)) end
    local last = select(n + 1, ...)
    if Tensor.is_tensor(last) then
      inputs[n + 1] = last
      return D.call(def, inputs, C.collect_attrs(def, {}, n + 2, ...))
    end
    local nargs = select("#", ...)
    if type(last) ~= "table" or nargs > n + 1 then
      errors.raise(string.format("%s: expects %d tensors, then the hyper-parameters (a table like {lr = 0.1}, or " ..
        "their f64 tensor); got %d arguments, argument %d a %s", def.name, n, nargs, n + 1, type(last)))
    end
    local opts = D.attrs(schema, last)
    for _, h in ipairs(def.hyper) do
      if opts[h[1]] == nil then errors.raise(string.format("%s: option '%s' is required", def.name, h[1])) end
    end
    inputs[n + 1] = M.fill(M.tensor(def), def, opts, def.name)
    local attrs = {}
    for _, a in ipairs(def.attrs) do attrs[a[1]] = opts[a[1]] end
    return D.call(def, inputs, attrs)
  end
end

-- the op-table specs' sample of an update (inputs, attrs, the function to run): fixed (3) f32 tensors, ones for the
-- counters (the step counter, which the op writes), the hyper-parameters at their defaults with lr = 0.01 and
-- momentum = 0.9
local function sample(def)
  return function()
    local n = def.ninputs - 1
    local first_counter = n - #def.counters + 1
    local inputs = {}
    for i = 1, n do
      inputs[i] = i >= first_counter and C.functions.ones({ 1 }) or
        C.functions.sin(C.functions.arange(3, { dtype = "f32" }) * 0.7 + i) * 0.5 + (i > 2 and 0.6 or 0)
    end
    inputs[n + 1] = M.fill(M.tensor(def), def, { lr = 0.01, momentum = 0.9 }, def.name)
    return inputs, {}, function(...) -- the update, returning what it wrote
      local args = { ... }
      D.call(def, args, {})
      local written = {}
      for k, j in ipairs(def.mutates) do written[k] = args[j] end
      return unpack(written)
    end
  end
end

-- def.ninputs counts the tensors before the hyper-parameters, def.counters names the 1-element f32 ones among
-- them (last, default {"step"}); every update but sgd_update takes maximize as its last hyper-parameter
local MAXIMIZE = { "maximize", "bool", false }
local function define(def)
  def.kind = "update"; def.dtypes = C.FLOAT; def.noutputs = 0
  def.counters = def.counters or { "step" }
  def.infer = check
  if def.name ~= "sgd_update" then def.hyper[#def.hyper + 1] = MAXIMIZE end
  def.kernel = "ds_" .. def.name .. "_%s"
  def.sample = sample(def)
  def.ninputs = def.ninputs + 1
  local names = {}
  for i, h in ipairs(def.hyper) do names[i] = h[1] .. (h[3] ~= nil and " = " .. tostring(h[3]) or "") end
  def.doc = def.doc .. "; the last operand: f64 {" .. table.concat(names, ", ") .. "} (or options of these names)"
  D.define(def)
  M.defs[def.name] = def
  C.export(def.name, api(def), { method = false })
end

-- param, grad: p -= lr * (g + wd * p)
define {
  name = "sgd_update", doc = "plain SGD step in place: p -= lr * (g + weight_decay * p)", ninputs = 2, mutates = { 1 },
  hyper = { { "lr", "float" }, { "weight_decay", "float", 0 } }, counters = {},
}

-- param, grad, momentum_buffer, step
define {
  name = "sgd_momentum_update", doc = "SGD step with momentum (optionally Nesterov) in place, as torch.optim.SGD",
  ninputs = 4, mutates = { 1, 3, 4 },
  hyper = { { "lr", "float" }, { "momentum", "float" }, { "dampening", "float", 0 }, { "weight_decay", "float", 0 },
            { "nesterov", "bool", false } },
}

local function adam_hyper()
  return { { "lr", "float" }, { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "eps", "float", 1e-8 },
           { "weight_decay", "float", 0 } }
end

-- param, grad, exp_avg, exp_avg_sq, step; decoupled = true is AdamW
define {
  name = "adam_update", doc = "Adam step in place (AdamW when decoupled), as torch.optim.Adam/AdamW", ninputs = 5,
  mutates = { 1, 3, 4, 5 }, hyper = adam_hyper(), attrs = { { "decoupled", "bool", false } },
}

-- param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step: Adam / AdamW with amsgrad
define {
  name = "adam_amsgrad_update", doc = "Adam/AdamW step with amsgrad (the running max of exp_avg_sq) in place",
  ninputs = 6, mutates = { 1, 3, 4, 5, 6 }, hyper = adam_hyper(), attrs = { { "decoupled", "bool", false } },
}

-- param, grad, square_avg, step: RMSprop without momentum or centering
define {
  name = "rmsprop_update", doc = "RMSprop step in place, no momentum or centering (torch.optim.RMSprop)", ninputs = 4,
  mutates = { 1, 3, 4 },
  hyper = { { "lr", "float" }, { "alpha", "float", 0.99 }, { "eps", "float", 1e-8 }, { "weight_decay", "float", 0 } },
}

-- param, grad, square_avg, grad_avg, momentum_buffer, step: RMSprop with momentum and/or centering
define {
  name = "rmsprop_full_update", doc = "RMSprop step in place with momentum and/or centering (torch.optim.RMSprop)",
  ninputs = 6, mutates = { 1, 3, 4, 5, 6 },
  hyper = { { "lr", "float" }, { "alpha", "float", 0.99 }, { "eps", "float", 1e-8 }, { "weight_decay", "float", 0 },
            { "momentum", "float", 0 }, { "centered", "bool", false } },
}

-- param, grad, sum, step: Adagrad
define {
  name = "adagrad_update", doc = "Adagrad step in place with lr_decay (torch.optim.Adagrad)", ninputs = 4,
  mutates = { 1, 3, 4 },
  hyper = { { "lr", "float" }, { "lr_decay", "float", 0 }, { "weight_decay", "float", 0 }, { "eps", "float", 1e-10 } },
}

-- param, grad, exp_avg, exp_avg_sq, step: RAdam
define {
  name = "radam_update", doc = "RAdam step in place (rectified Adam, torch.optim.RAdam)", ninputs = 5,
  mutates = { 1, 3, 4, 5 }, hyper = adam_hyper(),
}

-- param, grad, exp_avg, exp_avg_sq, mu_product, step: NAdam
define {
  name = "nadam_update", doc = "NAdam step in place (Adam with Nesterov momentum, torch.optim.NAdam)", ninputs = 6,
  mutates = { 1, 3, 4, 5, 6 }, counters = { "mu_product", "step" },
  hyper = { { "lr", "float" }, { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "eps", "float", 1e-8 },
            { "weight_decay", "float", 0 }, { "momentum_decay", "float", 4e-3 } },
}

-- param, grad, exp_avg, exp_inf, step: Adamax
define {
  name = "adamax_update", doc = "Adamax step in place (Adam with the infinity norm, torch.optim.Adamax)", ninputs = 5,
  mutates = { 1, 3, 4, 5 }, hyper = adam_hyper(),
}

-- param, grad, square_avg, acc_delta, step: Adadelta
define {
  name = "adadelta_update", doc = "Adadelta step in place (torch.optim.Adadelta)", ninputs = 5,
  mutates = { 1, 3, 4, 5 },
  hyper = { { "lr", "float" }, { "rho", "float", 0.9 }, { "eps", "float", 1e-6 }, { "weight_decay", "float", 0 } },
}

return M
