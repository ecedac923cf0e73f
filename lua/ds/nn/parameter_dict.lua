-- nn/parameter_dict.lua: ParameterDict, PyTorch's dict of parameters (the ModuleDict of tensors): pd.key or
-- pd[key]; built from a list of {key, tensor} pairs (kept in that order) or a {key = tensor} table (keys sorted);
-- tensors are made parameters (a parameter is kept as it is); a key naming a method or starting with _ is refused.
local Module = require("ds.nn.module")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")

local ParameterDict = Module:extend("ParameterDict")
ParameterDict._doc = "ParameterDict([entries]): named parameters, pd.key or pd[key]; set, update, keys, items, " ..
  "values, len (insertion order)"
function ParameterDict:init(entries)
  self._keys = {}
  if entries ~= nil then self:update(entries) end
end
-- pd:update(entries): add or replace entries (same forms as the constructor)
function ParameterDict:update(entries)
  if type(entries) ~= "table" or Module.is_module(entries) or Tensor.is_tensor(entries) then
    errors.raise("ParameterDict: expects a table of tensors")
  end
  if #entries > 0 then
    for i, e in ipairs(entries) do
      if type(e) ~= "table" or Tensor.is_tensor(e) then
        errors.raise(string.format("ParameterDict: entry %d must be a {key, tensor} pair", i))
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
-- pd:set(key, tensor): add or replace
function ParameterDict:set(key, p)
  if type(key) ~= "string" then errors.raise("ParameterDict: keys must be strings, got " .. type(key)) end
  local cur = rawget(self, key)
  if ParameterDict[key] ~= nil or key:sub(1, 1) == "_" or (cur ~= nil and not Tensor.is_tensor(cur)) then
    errors.raise(string.format("ParameterDict: key '%s' is reserved (a method or internal field)", key))
  end
  if not Tensor.is_tensor(p) then errors.raise(string.format("ParameterDict: value of '%s' is not a tensor", key)) end
  if cur == nil then rawget(self, "_keys")[#self._keys + 1] = key end
  self[key] = rawget(p, "_param") and p or Module.Parameter(p)
end
function ParameterDict:keys() return { unpack(self._keys) } end
function ParameterDict:len() return #self._keys end
-- for key, p in pd:items() do ... end (insertion order)
function ParameterDict:items()
  local i, keys = 0, self._keys
  return function()
    i = i + 1
    if keys[i] then return keys[i], rawget(self, keys[i]) end
  end
end
function ParameterDict:values()
  local out = {}
  for i, k in ipairs(self._keys) do out[i] = rawget(self, k) end
  return out
end
function ParameterDict:extra_repr()
  local lines = {}
  for i, k in ipairs(self._keys) do
    local p = rawget(self, k)
    lines[i] = string.format("(%s): Parameter containing: [%s of size %s]", k, p.dtype, S.str(p._shape))
  end
  return table.concat(lines, "\n")
end

return { ParameterDict = ParameterDict }
