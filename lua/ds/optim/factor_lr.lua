-- optim/factor_lr.lua: ConstantLR, PolynomialLR and MultiplicativeLR (torch 1.13): the chainable form at
-- step(), the closed form at step(epoch) where torch has one (ConstantLR, PolynomialLR).
local Scheduler = require("ds.optim.lr_scheduler").Scheduler
local errors = require("ds.errors")

local M = {}

-- the lr times factor until epoch total_iters, then the lr (factor in [0, 1])
local ConstantLR = Scheduler.extend("ConstantLR", { "factor", "total_iters" },
  { factor = "number", total_iters = "integer" })
-- opts (or positionally): factor (1/3, in [0, 1]), total_iters (5), last_epoch (-1)
function ConstantLR.new(cls, optimizer, opts)
  local factor = opts.factor or 1 / 3
  if factor > 1 or factor < 0 then
    errors.raise("ConstantLR: factor must be between 0 and 1, got " .. factor)
  end
  local self = Scheduler.init(cls, optimizer, opts)
  self.factor, self.total_iters = factor, opts.total_iters or 5
  self:_initial_step()
  return self
end
function ConstantLR:get_lr()
  local e, n = self.last_epoch, self.total_iters
  return self:_each_group(function(g)
    if e == 0 then return g.lr * self.factor end
    if e ~= n then return g.lr end
    return g.lr * (1.0 / self.factor)
  end)
end
function ConstantLR:closed_form_lr()
  local on = self.last_epoch >= self.total_iters and 1 or 0
  return self:_each_group(function(_, base) return base * (self.factor + on * (1 - self.factor)) end)
end
M.ConstantLR = ConstantLR

-- the lr decays as (1 - epoch / total_iters) ^ power to 0 at total_iters
local PolynomialLR = Scheduler.extend("PolynomialLR", { "total_iters", "power" },
  { total_iters = "integer", power = "number" })
-- opts (or positionally): total_iters (5), power (1), last_epoch (-1)
function PolynomialLR.new(cls, optimizer, opts)
  local self = Scheduler.init(cls, optimizer, opts)
  self.total_iters, self.power = opts.total_iters or 5, opts.power or 1.0
  self:_initial_step()
  return self
end
function PolynomialLR:get_lr()
  local e, n = self.last_epoch, self.total_iters
  if e == 0 or e > n then return self:_each_group(function(g) return g.lr end) end
  local decay = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ^ self.power
  return self:_each_group(function(g) return g.lr * decay end)
end
function PolynomialLR:closed_form_lr()
  local n = self.total_iters
  if n == 0 then errors.raise("PolynomialLR.step: total_iters 0 has no closed form (division by zero)") end
  return self:_each_group(function(_, base) return base * (1.0 - math.min(n, self.last_epoch) / n) ^ self.power end)
end
M.PolynomialLR = PolynomialLR

-- lr *= lr_lambda(epoch) at every step after the first; lr_lambda: a function or one per group (not in state_dict)
local MultiplicativeLR = Scheduler.extend("MultiplicativeLR", { "lr_lambda" }, { lr_lambda = "any" })
-- opts (or positionally): lr_lambda (a function of the epoch giving the factor, or one per param group),
-- last_epoch (-1)
function MultiplicativeLR.new(cls, optimizer, opts)
  local fns = opts.lr_lambda
  if type(fns) == "function" and type(optimizer) == "table" and type(optimizer.param_groups) == "table" then
    fns = {}
    for i = 1, #optimizer.param_groups do fns[i] = opts.lr_lambda end
  end
  local self = Scheduler.init(cls, optimizer, opts)
  if type(fns) ~= "table" or #fns ~= #optimizer.param_groups then
    errors.raise(string.format("MultiplicativeLR: lr_lambda must be a function or %d functions (one per param group)",
      #optimizer.param_groups))
  end
  for i, f in ipairs(fns) do
    if type(f) ~= "function" then errors.raise("MultiplicativeLR: lr_lambda " .. i .. " is not a function") end
  end
  self.lr_lambdas = fns
  self:_initial_step()
  return self
end
function MultiplicativeLR:get_lr()
  if self.last_epoch <= 0 then return self:_each_group(function(g) return g.lr end) end
  return self:_each_group(function(g, _, i)
    local f = self.lr_lambdas[i](self.last_epoch)
    if type(f) ~= "number" then
      errors.raise(string.format("MultiplicativeLR: lr_lambda %d returned a %s, not a number", i, type(f)))
    end
    return g.lr * f
  end)
end
function MultiplicativeLR:state_dict()
  local sd = Scheduler.state_dict(self)
  sd.lr_lambdas = nil
  return sd
end
M.MultiplicativeLR = MultiplicativeLR

return M
