-- nn/functional_pool3d.lua: ds.F's 3-D pooling (max_pool3d, avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool3d)
-- as two passes of the 2-D pools: over (H, W) with the depth folded into the channels, then over D with
-- (OH, OW) folded into the channels. A max over a box is the max of the maxes; PyTorch's average divides by the
-- product of the per-dim window extents (with or without padding, ceil_mode's clipped windows too), so the two
-- averages compose exactly (a divisor_override divides the sum of sums). They differentiate, trace and compile as
-- the 2-D pools do.
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local spatial = require("ds.nn.functional_spatial")
local pool_window = require("ds.nn.functional_pool_window")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- x (N, C, D, H, W) or (C, D, H, W) -> the 5-D form and the function that puts a result back
local function as_5d(x, opname)
  if not Tensor.is_tensor(x) then raise("%s: input must be a tensor, got %s", opname, type(x)) end
  if #x._shape ~= 4 and #x._shape ~= 5 then
    raise("%s: input must be (N, C, D, H, W) or (C, D, H, W), got %s", opname, S.str(x._shape))
  end
  for i = #x._shape - 3, #x._shape do
    if type(x._shape[i]) ~= "number" then
      raise("%s: dim %d of %s must have a known size", opname, i, S.str(x._shape))
    end
  end
  local unbatched = #x._shape == 4
  return unbatched and x:unsqueeze(1) or x, function(y) return unbatched and y:squeeze(1) or y end
end

-- pool2d over (H, W) of (N, C, D, H, W): (N, C * D, H, W) -> (N, C, D, OH, OW)
local function over_hw(x, pool2d)
  local N, C, D, H, W = unpack(x._shape)
  local y = pool2d(x:reshape(N, C * D, H, W))
  return y:reshape(N, C, D, y._shape[3], y._shape[4])
end
-- pool2d over D of (N, C, D, OH, OW) as (N, C * OH * OW, 1, D) -> (N, C, OD, OH, OW)
local function over_d(x, pool2d)
  local N, C, D, OH, OW = unpack(x._shape)
  local y = pool2d(x:permute(1, 2, 4, 5, 3):reshape(N, C * OH * OW, 1, D))
  return y:reshape(N, C, OH, OW, y._shape[4]):permute(1, 2, 5, 3, 4):contiguous()
end

-- a number or a list of 3 (positive or, for padding, non-negative integers)
local function triple(v, opname, what, min)
  if type(v) == "number" then v = { v, v, v } end
  if type(v) ~= "table" or #v ~= 3 then raise("%s: %s must be an integer or a list of 3, got %s", opname, what,
    tostring(v)) end
  for i = 1, 3 do
    if type(v[i]) ~= "number" or v[i] ~= math.floor(v[i]) or v[i] < min then
      raise("%s: %s must be integers >= %d, got %s", opname, what, min, tostring(v[i]))
    end
  end
  return v
end

-- opts: stride (kernel_size), padding (0), ceil_mode, and dilation / count_include_pad (true), divisor_override
local function pool(name, name2d, extra)
  local spec = { stride = "any", padding = "any", ceil_mode = "boolean" }
  for k, v in pairs(extra) do spec[k] = v end
  return function(x, kernel_size, opts)
    opts = options.check(opts, name, spec)
    if opts.return_indices then raise("%s: return_indices is not implemented", name) end
    local k = triple(kernel_size, name, "kernel_size", 1)
    local s = triple(opts.stride or k, name, "stride", 1)
    local p = triple(opts.padding or 0, name, "padding", 0)
    local d = triple(opts.dilation or 1, name, "dilation", 1)
    for i = 1, 3 do
      if 2 * p[i] > k[i] then raise("%s: padding %d must be at most half the kernel %d", name, p[i], k[i]) end
    end
    local div = opts.divisor_override
    if div ~= nil and (type(div) ~= "number" or div ~= math.floor(div) or div == 0) then
      raise("%s: divisor_override must be a nonzero integer, got %s", name, tostring(div))
    end
    -- a dilation or divisor_override: the gathered-window pools (sums of sums for the divisor)
    local pool2d, extra = opts.ceil_mode and spatial.ceil_mode[name2d] or ops[name2d], {}
    if d[1] ~= 1 or d[2] ~= 1 or d[3] ~= 1 or div then
      pool2d = pool_window[name2d]
      extra = { ceil_mode = opts.ceil_mode, divisor_override = div and 1 }
    end
    local function pass(k2, s2, p2, d2)
      local o = { stride = s2, padding = p2, count_include_pad = opts.count_include_pad }
      for key, v in pairs(extra) do o[key] = v end
      if d2[1] ~= 1 or d2[2] ~= 1 then o.dilation = d2 end
      return function(t) return pool2d(t, k2, o) end
    end
    local x5, back = as_5d(x, name)
    local y = over_hw(x5, pass({ k[2], k[3] }, { s[2], s[3] }, { p[2], p[3] }, { d[2], d[3] }))
    y = over_d(y, pass({ 1, k[1] }, { 1, s[1] }, { 0, p[1] }, { 1, d[1] }))
    return back(div and y / div or y)
  end
end
-- x: (N, C, D, H, W) or (C, D, H, W) -> (..., OD, OH, OW)
M.max_pool3d = pool("max_pool3d", "max_pool2d", { dilation = "any", return_indices = "boolean" })
M.avg_pool3d = pool("avg_pool3d", "avg_pool2d", { count_include_pad = "boolean", divisor_override = "any" })

-- output_size: a number or {OD, OH, OW} (nil entries keep the input's size)
local function adaptive(name, pool2d)
  return function(x, output_size, return_indices)
    if return_indices then raise("%s: return_indices is not implemented", name) end
    local x5, back = as_5d(x, name)
    local o = output_size
    if type(o) == "number" then o = { o, o, o } end
    if type(o) ~= "table" then raise("%s: output_size must be a number or a list of 3, got %s", name, tostring(o)) end
    for key, v in pairs(o) do
      local index_ok = key == 1 or key == 2 or key == 3
      if not index_ok or type(v) ~= "number" or v ~= math.floor(v) or not (v >= 1 and v <= 65536) then
        raise("%s: output_size must be a number or a list of 3 integers in 1..65536 (nil: the input's), got %s", name,
          tostring(v))
      end
    end
    local D = x5._shape[3]
    local y = over_hw(x5, function(t) return pool2d(t, { o[2] or x5._shape[4], o[3] or x5._shape[5] }) end)
    return back(over_d(y, function(t) return pool2d(t, { 1, o[1] or D }) end))
  end
end
M.adaptive_avg_pool3d = adaptive("adaptive_avg_pool3d", spatial.adaptive_avg_pool2d)
M.adaptive_max_pool3d = adaptive("adaptive_max_pool3d", spatial.adaptive_max_pool2d)

return M
