-- nn/ordered_dict.lua: the base of ModuleDict (nn/container.lua) and ParameterDict (nn/parameter_dict.lua):
-- entries kept in insertion order (self._keys); built from a list of {key, value} pairs (kept in that order) or a
-- {key = value} table (keys sorted, as a Lua table has no order). A class extending it defines set(key, value),
-- which checks and stores one entry, and `_value_kind` ("module", "tensor") for its messages.
local Module = require("ds.nn.module")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")

local OrderedDict = Module:extend("OrderedDict")
function OrderedDict:init(entries)
  self._keys = {}
  if entries ~= nil then self:update(entries) end
end
-- d:update(entries): add or replace entries (same forms as the constructor)
function OrderedDict:update(entries)
  local name, kind = self._name, self._value_kind
  if type(entries) ~= "table" or Module.is_module(entries) or Tensor.is_tensor(entries) then
    errors.raise(string.format("%s: expects a table of %ss", name, kind))
  end
  if #entries > 0 then
    for i, e in ipairs(entries) do
      if type(e) ~= "table" or Module.is_module(e) or Tensor.is_tensor(e) then
        errors.raise(string.format("%s: entry %d must be a {key, %s} pair", name, i, kind))
      end
      self:set(e[1], e[2])
    end
  else
    local keys = {}
    for k in pairs(entries) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do self:set(k, entries[k]) end
  end
end
function OrderedDict:keys() return { unpack(self._keys) } end
function OrderedDict:len() return #self._keys end
-- for key, value in d:items() do ... end (insertion order)
function OrderedDict:items()
  local i, keys = 0, self._keys
  return function()
    i = i + 1
    if keys[i] then return keys[i], rawget(self, keys[i]) end
  end
end
function OrderedDict:values()
  local out = {}
  for i, k in ipairs(self._keys) do out[i] = rawget(self, k) end
  return out
end

return OrderedDict
