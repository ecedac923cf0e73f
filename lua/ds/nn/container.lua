-- nn/container.lua: Sequential (seq[1], #seq, append/add; parameters named "1.weight", ...), ModuleList,
-- ModuleDict, ParameterList, Flatten, Unflatten.
local Module = require("ds.nn.module")
local OrderedDict = require("ds.nn.ordered_dict")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")
local S = require("ds.shape")

local M = {}

-- Sequential(m1, m2, ...) or Sequential({m1, m2, ...})
local Sequential = Module:extend("Sequential")
function Sequential:init(...)
  local n, list = select("#", ...), { ... }
  if n == 1 and type(list[1]) == "table" and not Module.is_module(list[1]) then list = list[1]; n = #list end
  for i = 1, n do
    local m = list[i]
    if not Module.is_module(m) then
      errors.raise(string.format("Sequential: argument %d is not a module (%s)", i, type(m)))
    end
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
local ModuleList = Module:extend("ModuleList", { init = { "table?" } })
function ModuleList:init(list)
  for i, m in ipairs(list or {}) do
    if not Module.is_module(m) then errors.raise(string.format("ModuleList: element %d is not a module", i)) end
    self[i] = m
  end
end
ModuleList.append = Sequential.append
ModuleList.add = Sequential.append
M.ModuleList = ModuleList

local ModuleDict = OrderedDict:extend("ModuleDict")
ModuleDict._value_kind = "module"
ModuleDict._doc = 'named modules, registered as children under their keys (names like "encoder.weight"); md[key] '
  .. "reads one. Built from a list of {key, module} pairs (kept in that order) or a {key = module} table (keys "
  .. "sorted, as a Lua table has no order). A key that names a method (forward, train, ...) is refused."
-- md:set(key, module): add or replace
function ModuleDict:set(key, m)
  if type(key) ~= "string" then errors.raise("ModuleDict: keys must be strings, got " .. type(key)) end
  local cur = rawget(self, key)
  if ModuleDict[key] ~= nil or key:sub(1, 1) == "_" or (cur ~= nil and not Module.is_module(cur)) then
    errors.raise(string.format("ModuleDict: key '%s' is reserved (a method or internal field)", key))
  end
  if not Module.is_module(m) then errors.raise(string.format("ModuleDict: value of '%s' is not a module", key)) end
  if cur == nil then rawget(self, "_keys")[#self._keys + 1] = key end
  self[key] = m
end
M.ModuleDict = ModuleDict

-- parameters registered as "1", "2", ... (pl[1]); tensors are made parameters
local ParameterList = Module:extend("ParameterList", { init = { "table?" } })
function ParameterList:init(list)
  for _, p in ipairs(list or {}) do self:append(p) end
end
function ParameterList:append(p)
  if not Tensor.is_tensor(p) then errors.raise("ParameterList: expects tensors, got " .. type(p)) end
  self[#self + 1] = Module.Parameter(p)
  return self
end
function ParameterList:extra_repr()
  local lines = {}
  for i = 1, #self do
    lines[i] = string.format("(%d): Parameter containing: [%s of size %s]", i, self[i].dtype, S.str(self[i]._shape))
  end
  return table.concat(lines, "\n")
end
M.ParameterList = ParameterList

-- x: (d1, ..., dn) -> dims start_dim..end_dim merged (default 2..-1: keep the batch dim)
local Flatten = Module:extend("Flatten")
function Flatten:init(start_dim, end_dim) self.start_dim, self.end_dim = start_dim or 2, end_dim or -1 end
function Flatten:forward(x) return x:flatten(self.start_dim, self.end_dim) end
function Flatten:extra_repr() return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim) end
M.Flatten = Flatten

-- x: (..., d_dim, ...) -> (..., sizes..., ...); prod(sizes) = d_dim, one size may be -1
local Unflatten = Module:extend("Unflatten")
function Unflatten:init(dim, sizes)
  if type(dim) ~= "number" or type(sizes) ~= "table" or #sizes == 0 then
    errors.raise("Unflatten: expects Unflatten(dim, {sizes...})")
  end
  self.dim, self.sizes = dim, sizes
end
function Unflatten:forward(x)
  local s = x._shape
  local d = S.dim(self.dim, #s, "Unflatten")
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = s[i] end
  for _, n in ipairs(self.sizes) do shape[#shape + 1] = n end
  for i = d + 1, #s do shape[#shape + 1] = s[i] end
  return x:reshape(shape)
end
function Unflatten:extra_repr()
  local parts = {}
  for i, n in ipairs(self.sizes) do parts[i] = tostring(n) end
  return string.format("dim=%d, unflattened_size=(%s)", self.dim, table.concat(parts, ", "))
end
M.Unflatten = Unflatten

return M
