-- nn/functional_pool1d.lua: ds.F's 1-D pooling (max_pool1d, avg_pool1d, adaptive_avg_pool1d,
-- adaptive_max_pool1d) as the 2-D pools over a height of 1, and pixel_shuffle / pixel_unshuffle as reshapes.
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local spatial = require("ds.nn.functional_spatial")
local pool_window = require("ds.nn.functional_pool_window")

local M = {}

-- x (N,C,L) or (C,L) as (N,C,1,L), and the function that puts a pooled (N,C,1,OL) back
local function as_2d(x, opname)
  if not Tensor.is_tensor(x) then errors.raise(opname .. ": input must be a tensor, got " .. type(x)) end
  if #x._shape ~= 2 and #x._shape ~= 3 then
    errors.raise(string.format("%s: input must be (N,C,L) or (C,L), got %s", opname, S.str(x._shape)))
  end
  local unbatched = #x._shape == 2
  local x4 = (unbatched and x:unsqueeze(1) or x):unsqueeze(3)
  return x4, function(y)
    y = y:squeeze(3)
    return unbatched and y:squeeze(1) or y
  end
end

-- a number or a one-element list
local function one(v, opname, what)
  if type(v) == "table" and #v == 1 then v = v[1] end
  if type(v) ~= "number" then errors.raise(string.format("%s: %s must be a number, got %s", opname, what, tostring(v))) end
  return v
end

-- opts: stride (kernel_size), padding (0), ceil_mode, and dilation for max_pool1d / count_include_pad for avg_pool1d;
-- x: (N,C,L) or (C,L) -> (..., OL)
local function pool(name, name2d, extra)
  local spec = { stride = "any", padding = "any", ceil_mode = "boolean", return_indices = "boolean" }
  for k, v in pairs(extra) do spec[k] = v end
  return function(x, kernel_size, opts)
    opts = options.check(opts, name, spec)
    if opts.return_indices then errors.raise(name .. ": return_indices is not implemented") end
    local dilation = opts.dilation ~= nil and one(opts.dilation, name, "dilation") or 1
    local k = one(kernel_size, name, "kernel_size")
    local o = { stride = { 1, one(opts.stride or k, name, "stride") },
      padding = { 0, one(opts.padding or 0, name, "padding") }, count_include_pad = opts.count_include_pad }
    local x4, back = as_2d(x, name)
    if dilation ~= 1 then -- max_pool1d only (avg_pool1d takes no dilation)
      o.dilation, o.ceil_mode = { 1, dilation }, opts.ceil_mode
      return back(pool_window.max_pool2d(x4, { 1, k }, o))
    end
    local pool2d = opts.ceil_mode and spatial.ceil_mode[name2d] or ops[name2d]
    return back(pool2d(x4, { 1, k }, o))
  end
end
M.max_pool1d = pool("max_pool1d", "max_pool2d", { dilation = "any" })
M.avg_pool1d = pool("avg_pool1d", "avg_pool2d", { count_include_pad = "boolean" })

-- x: (N,C,L) or (C,L) -> (..., output_size)
function M.adaptive_avg_pool1d(x, output_size)
  local x4, back = as_2d(x, "adaptive_avg_pool1d")
  return back(spatial.adaptive_avg_pool2d(x4, { 1, one(output_size, "adaptive_avg_pool1d", "output_size") }))
end
-- return_indices: also the 1-based position of each max
function M.adaptive_max_pool1d(x, output_size, return_indices)
  local x4, back = as_2d(x, "adaptive_max_pool1d")
  local y, i = spatial.adaptive_max_pool2d(x4, { 1, one(output_size, "adaptive_max_pool1d", "output_size") },
    return_indices)
  if i ~= nil then return back(y), back(i) end
  return back(y)
end

-- pixel_shuffle(x (..., C r^2, H, W), r) -> (..., C, H r, W r); pixel_unshuffle is its inverse
local function check_factor(name, x, r)
  if not Tensor.is_tensor(x) then errors.raise(name .. ": input must be a tensor, got " .. type(x)) end
  if #x._shape < 3 then errors.raise(name .. ": input must have at least 3 dims, got " .. S.str(x._shape)) end
  if type(r) ~= "number" or r < 1 or r ~= math.floor(r) then
    errors.raise(name .. ": the factor must be a positive integer, got " .. tostring(r))
  end
  local lead, n = {}, #x._shape
  for i = 1, n - 3 do lead[i] = x._shape[i] end
  return lead, x._shape[n - 2], x._shape[n - 1], x._shape[n]
end
local function with_lead(lead, ...)
  local s = {}
  for i, v in ipairs(lead) do s[i] = v end
  for _, v in ipairs { ... } do s[#s + 1] = v end
  return s
end
local function tail_perm(nlead, ...)
  local p = {}
  for i = 1, nlead do p[i] = i end
  for _, v in ipairs { ... } do p[#p + 1] = nlead + v end
  return p
end
function M.pixel_shuffle(x, r)
  local lead, c, h, w = check_factor("pixel_shuffle", x, r)
  if type(c) == "number" and c % (r * r) ~= 0 then
    errors.raise(string.format("pixel_shuffle: %d channels are not divisible by %d^2", c, r))
  end
  local oc = c / (r * r)
  return x:reshape(with_lead(lead, oc, r, r, h, w)):permute(tail_perm(#lead, 1, 4, 2, 5, 3))
    :reshape(with_lead(lead, oc, S.mul(h, r), S.mul(w, r)))
end
function M.pixel_unshuffle(x, r)
  local lead, c, h, w = check_factor("pixel_unshuffle", x, r)
  if type(h) == "number" and (h % r ~= 0 or w % r ~= 0) then
    errors.raise(string.format("pixel_unshuffle: spatial size %dx%d is not divisible by %d", h, w, r))
  end
  return x:reshape(with_lead(lead, c, h / r, r, w / r, r)):permute(tail_perm(#lead, 1, 3, 5, 2, 4))
    :reshape(with_lead(lead, S.mul(c, r * r), h / r, w / r))
end

return M
