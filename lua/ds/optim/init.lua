-- optim/init.lua: ds.optim: SGD, Adam, AdamW, RMSprop, Adagrad and the learning-rate schedulers (each
-- also under ds.optim.lr_scheduler, as in PyTorch).
local Optimizer = require("ds.optim.optimizer")
local SGD = require("ds.optim.sgd")
local adam = require("ds.optim.adam")
local RMSprop = require("ds.optim.rmsprop")
local Adagrad = require("ds.optim.adagrad")
local epoch_schedulers = require("ds.optim.lr_scheduler")
local OneCycleLR = require("ds.optim.one_cycle_lr")
local ReduceLROnPlateau = require("ds.optim.reduce_lr_on_plateau")
local SequentialLR = require("ds.optim.sequential_lr")

local M = {}

function M.install(ds)
  local sched = { OneCycleLR = OneCycleLR, ReduceLROnPlateau = ReduceLROnPlateau, SequentialLR = SequentialLR }
  for name, cls in pairs(epoch_schedulers) do sched[name] = cls end
  ds.optim = { Optimizer = Optimizer, SGD = SGD, Adam = adam.Adam, AdamW = adam.AdamW, RMSprop = RMSprop, Adagrad = Adagrad,
               lr_scheduler = sched }
  for name, cls in pairs(sched) do
    if name ~= "Scheduler" then ds.optim[name] = cls end
  end
end

return M
