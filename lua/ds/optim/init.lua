-- optim/init.lua: ds.optim: SGD, Adam, AdamW and the learning-rate schedulers.
local M = {}

function M.install(ds)
  local adam = require("ds.optim.adam")
  local sched = require("ds.optim.lr_scheduler")
  ds.optim = {
    Optimizer = require("ds.optim.optimizer"),
    SGD = require("ds.optim.sgd"),
    Adam = adam.Adam,
    AdamW = adam.AdamW,
    StepLR = sched.StepLR,
    CosineAnnealingLR = sched.CosineAnnealingLR,
    lr_scheduler = sched,
  }
end

return M
