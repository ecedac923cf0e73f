-- optim/init.lua: ds.optim: SGD, Adam, AdamW, RMSprop, Adagrad and the learning-rate schedulers
-- (also under ds.optim.lr_scheduler, as in PyTorch).
local M = {}

function M.install(ds)
  local adam = require("ds.optim.adam")
  local sched = {}
  for name, cls in pairs(require("ds.optim.lr_scheduler")) do sched[name] = cls end
  sched.OneCycleLR = require("ds.optim.one_cycle_lr")
  sched.ReduceLROnPlateau = require("ds.optim.reduce_lr_on_plateau")
  sched.SequentialLR = require("ds.optim.sequential_lr")
  ds.optim = {
    Optimizer = require("ds.optim.optimizer"),
    SGD = require("ds.optim.sgd"),
    Adam = adam.Adam,
    AdamW = adam.AdamW,
    RMSprop = require("ds.optim.rmsprop"),
    Adagrad = require("ds.optim.adagrad"),
    lr_scheduler = sched,
  }
  for name, cls in pairs(sched) do
    if name ~= "Scheduler" then ds.optim[name] = cls end
  end
end

return M
