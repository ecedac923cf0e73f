-- ops/optim.lua: fused optimizer updates (kind "update"): one C kernel per parameter tensor that
-- writes param and optimizer state in place; `mutates` lists the inputs written (1-based), so a
-- tracer records them as state writes. They have no outputs and no backward.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")

-- every tensor operand: same dtype and shape as the parameter; the step counter: 1-element f32
local function check(opname, nstate_like, has_step)
  return function(inputs)
    local p = inputs[1]
    for i = 2, nstate_like do
      local x = inputs[i]
      if x.dtype ~= p.dtype or not S.equal(x._shape, p._shape) then
        errors.raise(string.format("%s: operand %d is %s %s, the parameter is %s %s", opname, i, x.dtype,
          S.str(x._shape), p.dtype, S.str(p._shape)))
      end
    end
    if has_step then
      local s = inputs[nstate_like + 1]
      if s.dtype ~= "f32" or S.numel(s._shape) ~= 1 then
        errors.raise(string.format("%s: step counter must be a 1-element f32 tensor, got %s %s", opname, s.dtype,
          S.str(s._shape)))
      end
    end
    return {}
  end
end

local function define(def)
  def.kind = "update"; def.dtypes = C.FLOAT; def.noutputs = 0
  def.kernel = "ds_" .. def.name .. "_%s"
  D.define(def)
  C.export(def.name, C.api(def), { method = false })
end

-- param, grad: p -= lr * (g + wd * p)
define {
  name = "sgd_update", doc = "plain SGD step in place: p -= lr * (g + weight_decay * p)", ninputs = 2, mutates = { 1 },
  attrs = { { "lr", "float" }, { "weight_decay", "float", 0 } },
  infer = check("sgd_update", 2, false),
}

-- param, grad, momentum_buffer, step
define {
  name = "sgd_momentum_update", doc = "SGD step with momentum (optionally Nesterov) in place, as torch.optim.SGD",
  ninputs = 4, mutates = { 1, 3, 4 },
  attrs = { { "lr", "float" }, { "momentum", "float" }, { "dampening", "float", 0 }, { "weight_decay", "float", 0 },
            { "nesterov", "bool", false } },
  infer = check("sgd_momentum_update", 3, true),
}

-- param, grad, exp_avg, exp_avg_sq, step; decoupled = true is AdamW
define {
  name = "adam_update", doc = "Adam step in place (AdamW when decoupled), as torch.optim.Adam/AdamW", ninputs = 5,
  mutates = { 1, 3, 4, 5 },
  attrs = { { "lr", "float" }, { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "eps", "float", 1e-8 },
            { "weight_decay", "float", 0 }, { "decoupled", "bool", false } },
  infer = check("adam_update", 4, true),
}

-- param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step: Adam / AdamW with amsgrad
define {
  name = "adam_amsgrad_update", doc = "Adam/AdamW step with amsgrad (the running max of exp_avg_sq) in place",
  ninputs = 6, mutates = { 1, 3, 4, 5, 6 },
  attrs = { { "lr", "float" }, { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "eps", "float", 1e-8 },
            { "weight_decay", "float", 0 }, { "decoupled", "bool", false } },
  infer = check("adam_amsgrad_update", 5, true),
}

-- param, grad, square_avg, step: RMSprop without momentum or centering
define {
  name = "rmsprop_update", doc = "RMSprop step in place, no momentum or centering (torch.optim.RMSprop)", ninputs = 4,
  mutates = { 1, 3, 4 },
  attrs = { { "lr", "float" }, { "alpha", "float", 0.99 }, { "eps", "float", 1e-8 }, { "weight_decay", "float", 0 } },
  infer = check("rmsprop_update", 3, true),
}

-- param, grad, square_avg, grad_avg, momentum_buffer, step: RMSprop with momentum and/or centering
define {
  name = "rmsprop_full_update", doc = "RMSprop step in place with momentum and/or centering (torch.optim.RMSprop)",
  ninputs = 6, mutates = { 1, 3, 4, 5, 6 },
  attrs = { { "lr", "float" }, { "alpha", "float", 0.99 }, { "eps", "float", 1e-8 }, { "weight_decay", "float", 0 },
            { "momentum", "float", 0 }, { "centered", "bool", false } },
  infer = check("rmsprop_full_update", 5, true),
}

-- param, grad, sum, step: Adagrad
define {
  name = "adagrad_update", doc = "Adagrad step in place with lr_decay (torch.optim.Adagrad)", ninputs = 4,
  mutates = { 1, 3, 4 },
  attrs = { { "lr", "float" }, { "lr_decay", "float", 0 }, { "weight_decay", "float", 0 }, { "eps", "float", 1e-10 } },
  infer = check("adagrad_update", 3, true),
}
