-- nn/norm3d.lua: BatchNorm3d and InstanceNorm3d, the 2-D layers over (N, C, D * H, W): the statistics are per
-- channel (and per sample for instance norm) over every other dim, so folding D into H changes nothing.
local norm = require("ds.nn.norm")
local norm_group = require("ds.nn.norm_group")
local errors = require("ds.errors")
local S = require("ds.shape")

local M = {}

-- x: (N, C, D, H, W) (BatchNorm3d) or also (C, D, H, W) (InstanceNorm3d) -> x's shape
local function fold_depth(name, base, unbatched_ok)
  local cls = base:extend(name)
  cls._doc = name .. "(num_features, [opts]): the options of " .. name:gsub("3d", "2d") .. " over 5-D (N,C,D,H,W)" ..
    (unbatched_ok and " or 4-D (C,D,H,W)" or "") .. " input"
  function cls:forward(x)
    local unbatched = unbatched_ok and #x._shape == 4
    if unbatched then x = x:unsqueeze(1) end
    if #x._shape ~= 5 then
      errors.raise(string.format("%s: expected 5-D (N,C,D,H,W)%s input, got %s", name,
        unbatched_ok and " or 4-D (C,D,H,W)" or "", S.str(x._shape)))
    end
    local s = x._shape
    local y = base.forward(self, x:reshape(s[1], s[2], s[3] * s[4], s[5])):reshape(s)
    return unbatched and y:squeeze(1) or y
  end
  M[name] = cls
end
fold_depth("BatchNorm3d", norm.BatchNorm2d, false)
fold_depth("InstanceNorm3d", norm_group.InstanceNorm2d, true)

return M
