-- nn/dropout.lua: Dropout, the channel-wise Dropout1d/2d/3d, AlphaDropout and FeatureAlphaDropout (active in
-- training mode only); PyTorch's constructor (p = 0.5, inplace = false).
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local constructor_args = require("ds.nn.constructor_args")
local random = require("ds.random")

local M = {}
local KINDS, NOT_REFUSED = { p = { "number", min = 0, max = 1 }, inplace = "boolean" }, {}

local function dropout(name, fn)
  local cls = Module:extend(name)
  function cls:init(...)
    local opts = constructor_args.no_inplace(name, constructor_args.merge(name, { "p", "inplace" }, KINDS, NOT_REFUSED,
      ...))
    self.p = opts.p == nil and 0.5 or opts.p
  end
  function cls:forward(x) return fn(x, self.p, self.training) end
  function cls:extra_repr() return "p=" .. self.p end
  M[name] = cls
end
dropout("Dropout", random.dropout)
dropout("Dropout1d", F.dropout1d)
dropout("Dropout2d", F.dropout2d)
dropout("Dropout3d", F.dropout3d)
dropout("AlphaDropout", F.alpha_dropout)
dropout("FeatureAlphaDropout", F.feature_alpha_dropout)

return M
