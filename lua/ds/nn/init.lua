-- nn/init.lua: ds.nn (Module, Parameter, layers, init, functional) and ds.F; installs gradcheck
-- as ds.autograd.gradcheck.
local Module = require("ds.nn.module")
local functional = require("ds.nn.functional")
local init_weights = require("ds.nn.init_weights")
local utils = require("ds.nn.utils")
local gradcheck = require("ds.gradcheck")
local LAYER_FAMILIES = {
  require("ds.nn.linear"), require("ds.nn.conv"), require("ds.nn.activation"), require("ds.nn.dropout"),
  require("ds.nn.norm"), require("ds.nn.embedding"), require("ds.nn.container"), require("ds.nn.attention"),
  require("ds.nn.transformer"), require("ds.nn.transformer_encoder"), require("ds.nn.transformer_decoder"),
  require("ds.nn.rnn"), require("ds.nn.loss"), require("ds.nn.activation_functional"), require("ds.nn.conv_variants"),
  require("ds.nn.norm_group"), require("ds.nn.ddp"), require("ds.nn.pool1d"), require("ds.nn.rnn_cell"),
  require("ds.nn.kv_cache"), require("ds.nn.conv3d"), require("ds.nn.fold"), require("ds.nn.distance"),
  require("ds.nn.transformer_model"), require("ds.nn.pool3d"),
  require("ds.nn.padding"), require("ds.nn.layers_more"), require("ds.nn.norm3d"),
  require("ds.nn.adaptive_softmax"), require("ds.nn.lazy"), require("ds.nn.parameter_dict"),
  require("ds.nn.data_parallel"),
  { QuantizedLinear = require("ds.nn.quantized").QuantizedLinear,
    QuantizedConv2d = require("ds.nn.quantized").QuantizedConv2d },
}

local M = {}

function M.install(ds)
  local nn = { Module = Module, Parameter = Module.Parameter, functional = functional,
    init = init_weights, utils = utils }
  for _, family in ipairs(LAYER_FAMILIES) do
    for name, cls in pairs(family) do nn[name] = cls end
  end
  ds.nn = nn
  ds.F = functional
  ds.autograd.gradcheck = gradcheck.gradcheck
  ds.autograd.gradgradcheck = gradcheck.gradgradcheck
end

return M
