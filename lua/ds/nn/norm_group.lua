-- nn/norm_group.lua: GroupNorm and InstanceNorm1d/2d as modules over F.group_norm / F.instance_norm.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local ops = require("ds.ops")
local errors = require("ds.errors")

local M = {}

-- x: (N, C, ...); opts eps (1e-5), affine (true: weight ones, bias zeros), dtype
local GroupNorm = Module:extend("GroupNorm")
function GroupNorm:init(num_groups, num_channels, opts)
  if type(num_groups) ~= "number" or type(num_channels) ~= "number" or num_channels % num_groups ~= 0 then
    errors.raise("GroupNorm: expects GroupNorm(num_groups, num_channels, [opts]) with num_groups dividing num_channels")
  end
  opts = options.check(opts, "GroupNorm", { eps = { "number", min = 0 }, affine = "boolean", dtype = "dtype" })
  self.num_groups, self.num_channels, self.eps = num_groups, num_channels, opts.eps or 1e-5
  if opts.affine ~= false then
    self.weight = Module.Parameter(ops.ones(num_channels, { dtype = opts.dtype or "f32" }))
    self.bias = Module.Parameter(ops.zeros(num_channels, { dtype = opts.dtype or "f32" }))
  end
end
function GroupNorm:forward(x) return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps) end
function GroupNorm:extra_repr() return string.format("%d, %d, eps=%g", self.num_groups, self.num_channels, self.eps) end
M.GroupNorm = GroupNorm

-- spatial: the number of spatial dims (1 or 2); an input without the batch dim gets one for the call
-- opts eps (1e-5), affine (false), track_running_stats (false only: running statistics are not implemented)
local function instance_norm(name, spatial)
  local cls = Module:extend(name)
  function cls:init(num_features, opts)
    if type(num_features) ~= "number" then errors.raise(name .. ": expects " .. name .. "(num_features, [opts])") end
    opts = options.check(opts, name, { eps = { "number", min = 0 }, affine = "boolean", track_running_stats = "boolean",
                                       momentum = "number", dtype = "dtype" })
    if opts.track_running_stats then errors.raise(name .. ": track_running_stats is not implemented") end
    self.num_features, self.eps = num_features, opts.eps or 1e-5
    if opts.affine then
      self.weight = Module.Parameter(ops.ones(num_features, { dtype = opts.dtype or "f32" }))
      self.bias = Module.Parameter(ops.zeros(num_features, { dtype = opts.dtype or "f32" }))
    end
  end
  function cls:forward(x)
    local unbatched = #x._shape == spatial + 1
    if unbatched then x = x:unsqueeze(1) end
    if #x._shape ~= spatial + 2 then
      errors.raise(string.format("%s: input must have %d or %d dims, got %d", name, spatial + 1,
        spatial + 2, #x._shape))
    end
    local y = F.instance_norm(x, { weight = self.weight, bias = self.bias, eps = self.eps })
    return unbatched and y:squeeze(1) or y
  end
  function cls:extra_repr() return string.format("%d, eps=%g", self.num_features, self.eps) end
  M[name] = cls
end
instance_norm("InstanceNorm1d", 1)
instance_norm("InstanceNorm2d", 2)

return M
