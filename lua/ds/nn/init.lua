-- nn/init.lua: ds.nn (Module, Parameter, layers, init, functional) and ds.F; installs gradcheck
-- as ds.autograd.gradcheck.
local M = {}

function M.install(ds)
  local Module = require("ds.nn.module")
  local nn = { Module = Module, Parameter = Module.Parameter, functional = require("ds.nn.functional"),
               init = require("ds.nn.init_weights"), utils = require("ds.nn.utils") }
  for _, family in ipairs { "linear", "conv", "activation", "dropout", "norm", "embedding", "container", "attention", "transformer", "rnn" } do
    for name, cls in pairs(require("ds.nn." .. family)) do nn[name] = cls end
  end
  ds.nn = nn
  ds.F = nn.functional
  local gc = require("ds.gradcheck")
  ds.autograd.gradcheck = gc.gradcheck
  ds.autograd.gradgradcheck = gc.gradgradcheck
end

return M
