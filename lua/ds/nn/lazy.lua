-- nn/lazy.lua: PyTorch's lazy modules (LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d,
-- LazyInstanceNorm1d/2d/3d): constructed without their input size, they become the full module on their first call
-- (its parameters made and initialized as the full module's constructor does, the instance turning into that class,
-- as PyTorch's cls_to_become). As in PyTorch, run one batch eagerly before making the optimizer or compiling: until
-- then the module has no parameters.
local Module = require("ds.nn.module")
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local linear = require("ds.nn.linear")
local conv = require("ds.nn.conv")
local conv_variants = require("ds.nn.conv_variants")
local conv3d = require("ds.nn.conv3d")
local norm = require("ds.nn.norm")
local norm_group = require("ds.nn.norm_group")
local norm3d = require("ds.nn.norm3d")

local M = {}

-- name, the class it becomes, how many spatial dims its input has (nil: a Linear's last dim is the size), and
-- whether the size goes first in the constructor (before the arguments the lazy module was given)
local function lazy(name, target, spatial)
  local cls = Module:extend(name)
  cls._doc = target._name .. " without its input size: " .. name .. "(the other arguments of " .. target._name ..
    "); the size is read from the first input, and the module becomes a " .. target._name
  function cls:init(...)
    self._lazy_args = { n = select("#", ...), ... }
  end
  function cls:forward(x, ...)
    if not Tensor.is_tensor(x) then errors.raise(name .. ": input must be a tensor") end
    local n = #x._shape
    local d
    if spatial == nil then d = n
    elseif spatial == "norm1d" then d = 2
    else d = n == spatial + 1 and 1 or 2 end
    local size = x._shape[d]
    if n < 1 or type(size) ~= "number" then
      errors.raise(string.format("%s: the input size (dim %d of %s) must be known", name, d, S.str(x._shape)))
    end
    local a = rawget(self, "_lazy_args")
    local real = target(size, unpack(a, 1, a.n))
    local training = rawget(self, "training")
    rawset(self, "_lazy_args", nil)
    for k, v in pairs(real) do rawset(self, k, v) end
    setmetatable(self, getmetatable(real))
    self:train(training)
    return self:forward(x, ...)
  end
  M[name] = cls
end
lazy("LazyLinear", linear.Linear, nil)
lazy("LazyConv1d", conv_variants.Conv1d, 1)
lazy("LazyConv2d", conv.Conv2d, 2)
lazy("LazyConv3d", conv3d.Conv3d, 3)
lazy("LazyConvTranspose1d", conv3d.ConvTranspose1d, 1)
lazy("LazyConvTranspose2d", conv_variants.ConvTranspose2d, 2)
lazy("LazyConvTranspose3d", conv3d.ConvTranspose3d, 3)
lazy("LazyBatchNorm1d", norm.BatchNorm1d, "norm1d")
lazy("LazyBatchNorm2d", norm.BatchNorm2d, "norm1d")
lazy("LazyBatchNorm3d", norm3d.BatchNorm3d, "norm1d")
lazy("LazyInstanceNorm1d", norm_group.InstanceNorm1d, 1)
lazy("LazyInstanceNorm2d", norm_group.InstanceNorm2d, 2)
lazy("LazyInstanceNorm3d", norm3d.InstanceNorm3d, 3)

return M
