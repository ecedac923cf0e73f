-- nn/parameter_dict.lua: ParameterDict, PyTorch's dict of parameters (the ModuleDict of tensors): pd.key or
-- pd[key]; built from a list of {key, tensor} pairs (kept in that order) or a {key = tensor} table (keys sorted);
-- tensors are made parameters (a parameter is kept as it is); a key naming a method or starting with _ is refused.
local Module = require("ds.nn.module")
local OrderedDict = require("ds.nn.ordered_dict")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")

local ParameterDict = OrderedDict:extend("ParameterDict")
ParameterDict._value_kind = "tensor"
ParameterDict._doc = "ParameterDict([entries]): named parameters, pd.key or pd[key]; set, update, keys, items, " ..
  "values, len (insertion order)"
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
function ParameterDict:extra_repr()
  local lines = {}
  for i, k in ipairs(self._keys) do
    local p = rawget(self, k)
    lines[i] = string.format("(%s): Parameter containing: [%s of size %s]", k, p.dtype, S.str(p._shape))
  end
  return table.concat(lines, "\n")
end

return { ParameterDict = ParameterDict }
