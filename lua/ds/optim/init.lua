-- optim/init.lua: ds.optim: SGD, Adam, AdamW and the learning-rate schedulers.
local Optimizer = require("ds.optim.optimizer")
local SGD = require("ds.optim.sgd")
local adam = require("ds.optim.adam")
local sched = require("ds.optim.lr_scheduler")

local M = {}

function M.install(ds)
  ds.optim = {
    Optimizer = Optimizer,
    SGD = SGD,
    Adam = adam.Adam,
    AdamW = adam.AdamW,
    StepLR = sched.StepLR,
    CosineAnnealingLR = sched.CosineAnnealingLR,
    lr_scheduler = sched,
  }
end

return M
