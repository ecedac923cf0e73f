-- nn/dropout.lua: Dropout (active in training mode only).
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local errors = require("ds.errors")

local Dropout = Module:extend("Dropout")
function Dropout:init(p)
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or p < 0 or p > 1 then errors.raise("Dropout: p must be in [0, 1], got " .. tostring(p)) end
  self.p = p
end
function Dropout:forward(x) return F.dropout(x, self.p, self.training) end
function Dropout:extra_repr() return "p=" .. self.p end

return { Dropout = Dropout }
