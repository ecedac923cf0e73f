-- nn/container.lua: Sequential (seq[1], #seq, append/add; parameters named "1.weight", ...), ModuleList, Flatten.
local Module = require("ds.nn.module")
local errors = require("ds.errors")

local M = {}

-- Sequential(m1, m2, ...) or Sequential({m1, m2, ...})
local Sequential = Module:extend("Sequential")
function Sequential:init(...)
  local n, list = select("#", ...), { ... }
  if n == 1 and type(list[1]) == "table" and not Module.is_module(list[1]) then list = list[1]; n = #list end
  for i = 1, n do
    local m = list[i]
    if not Module.is_module(m) then errors.raise(string.format("Sequential: argument %d is not a module (%s)", i, type(m))) end
    self[i] = m
  end
end
function Sequential:forward(x, ...)
  for i = 1, #self do x = self[i](x, ...) end
  return x
end
function Sequential:append(m)
  if not Module.is_module(m) then errors.raise("Sequential.append: not a module") end
  self[#self + 1] = m
  return self
end
Sequential.add = Sequential.append -- Torch7's name
M.Sequential = Sequential

-- a list of modules registered as children "1", "2", ...; no forward of its own
local ModuleList = Module:extend("ModuleList")
function ModuleList:init(list)
  for i, m in ipairs(list or {}) do
    if not Module.is_module(m) then errors.raise(string.format("ModuleList: element %d is not a module", i)) end
    self[i] = m
  end
end
ModuleList.append = Sequential.append
ModuleList.add = Sequential.append
M.ModuleList = ModuleList

-- x: (d1, ..., dn) -> dims start_dim..end_dim merged (default 2..-1: keep the batch dim)
local Flatten = Module:extend("Flatten")
function Flatten:init(start_dim, end_dim) self.start_dim, self.end_dim = start_dim or 2, end_dim or -1 end
function Flatten:forward(x) return x:flatten(self.start_dim, self.end_dim) end
function Flatten:extra_repr() return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim) end
M.Flatten = Flatten

return M
