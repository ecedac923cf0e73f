-- optim/init.lua: ds.optim: SGD, Adam, AdamW, RMSprop, Adagrad, RAdam, NAdam, Adamax, Adadelta and the
-- learning-rate schedulers (each also under ds.optim.lr_scheduler, as in PyTorch).
local Optimizer = require("ds.optim.optimizer")
local SGD = require("ds.optim.sgd")
local adam = require("ds.optim.adam")
local RMSprop = require("ds.optim.rmsprop")
local Adagrad = require("ds.optim.adagrad")
local variants = require("ds.optim.adam_variants")
local Adadelta = require("ds.optim.adadelta")
local epoch_schedulers = require("ds.optim.lr_scheduler")
local OneCycleLR = require("ds.optim.one_cycle_lr")
local ReduceLROnPlateau = require("ds.optim.reduce_lr_on_plateau")
local SequentialLR = require("ds.optim.sequential_lr")
local factor_lr = require("ds.optim.factor_lr")
local CyclicLR = require("ds.optim.cyclic_lr")
local ChainedScheduler = require("ds.optim.chained_scheduler")

local errors = require("ds.errors")

local M = {}

-- every method of the classes checks self, so opt.step() (a dot for a colon) is an error naming it
local NOT_METHODS = { new = true, extend = true, init = true, check_group = true, grad_of = true }
-- (self is an instance of cls or of a class extending it: each class's __index is its base)
local function instance_of(v, cls)
  local c = type(v) == "table" and getmetatable(v) or nil
  while type(c) == "table" do
    if c == cls then return true end
    local mt = getmetatable(c)
    c = mt and mt.__index
  end
  return false
end
local function check_self(cls, instance_field)
  for k, f in pairs(cls) do
    if type(f) == "function" and not NOT_METHODS[k] and k:sub(1, 2) ~= "__" then
      cls[k] = function(self, ...)
        if not instance_of(self, cls) or type(rawget(self, instance_field)) ~= "table" then
          errors.raise(string.format("%s: expects the %s as self (call it as x:%s(...))", k,
            instance_field == "optimizer" and "scheduler" or "optimizer", k))
        end
        return f(self, ...)
      end
    end
  end
end

function M.install(ds)
  local sched = { OneCycleLR = OneCycleLR, ReduceLROnPlateau = ReduceLROnPlateau, SequentialLR = SequentialLR,
    CyclicLR = CyclicLR, ChainedScheduler = ChainedScheduler }
  for name, cls in pairs(epoch_schedulers) do sched[name] = cls end
  for name, cls in pairs(factor_lr) do sched[name] = cls end
  local optimizers = { Optimizer = Optimizer, SGD = SGD, Adam = adam.Adam, AdamW = adam.AdamW, RMSprop = RMSprop,
    Adagrad = Adagrad, RAdam = variants.RAdam, NAdam = variants.NAdam, Adamax = variants.Adamax, Adadelta = Adadelta }
  for _, cls in pairs(optimizers) do check_self(cls, "param_groups") end
  for _, cls in pairs(sched) do check_self(cls, "optimizer") end
  ds.optim = { lr_scheduler = sched }
  for name, cls in pairs(optimizers) do ds.optim[name] = cls end
  for name, cls in pairs(sched) do
    if name ~= "Scheduler" then ds.optim[name] = cls end
  end
end

return M
