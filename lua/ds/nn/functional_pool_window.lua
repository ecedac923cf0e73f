-- nn/functional_pool_window.lua: the 2-D pools the pooling ops do not take, by gathering every window: max_pool2d
-- with dilation (PyTorch's output size and ceil_mode rule; padding reads -inf) and avg_pool2d with divisor_override
-- (the window's sum over zero padding divided by it). The padded image, flattened per channel, is read at
-- constant indices (one index_select), so both differentiate, trace and compile. Not ds.F functions: F.max_pool2d,
-- F.avg_pool2d and the 1-D and 3-D pools call them for these options.
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local spatial = require("ds.nn.functional_spatial")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function pair(v, opname, what, min)
  if type(v) == "number" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then
    raise("%s: %s must be an integer or a pair, got %s", opname, what, tostring(v))
  end
  for i = 1, 2 do
    if type(v[i]) ~= "number" or v[i] ~= math.floor(v[i]) or v[i] < min then
      raise("%s: %s must be integers >= %d, got %s", opname, what, min, tostring(v[i]))
    end
  end
  return v
end

-- whether opts asks for a dilation other than 1
function M.dilated(opts)
  local d = type(opts) == "table" and opts.dilation
  if d == nil then return false end
  if type(d) == "number" then return d ~= 1 end
  if type(d) == "table" then
    for _, v in ipairs(d) do if v ~= 1 then return true end end
  end
  return false
end

-- x (N, C, H, W) or (C, H, W) -> the windows (N, C, KH * KW, OH, OW) of x padded with `value`
local function windows(x, kernel_size, opts, value, opname)
  if not Tensor.is_tensor(x) then raise("%s: input must be a tensor, got %s", opname, type(x)) end
  local batched = #x._shape == 4
  if not batched and #x._shape ~= 3 then raise("%s: input must be (N,C,H,W) or (C,H,W), got %s", opname,
    S.str(x._shape)) end
  if not batched then x = x:unsqueeze(1) end
  for i = 2, 4 do
    if type(x._shape[i]) ~= "number" then
      raise("%s: dim %d of %s must have a known size", opname, i, S.str(x._shape))
    end
  end
  local k = pair(kernel_size, opname, "kernel_size", 1)
  local s = pair(opts.stride or k, opname, "stride", 1)
  local p = pair(opts.padding or 0, opname, "padding", 0)
  local d = pair(opts.dilation or 1, opname, "dilation", 1)
  local n, out, extra = { x._shape[3], x._shape[4] }, {}, {}
  for i = 1, 2 do
    if 2 * p[i] > k[i] then raise("%s: padding %d must be at most half the kernel %d", opname, p[i], k[i]) end
    local span = d[i] * (k[i] - 1) + 1
    local room = n[i] + 2 * p[i] - span
    out[i] = (opts.ceil_mode and math.ceil(room / s[i]) or math.floor(room / s[i])) + 1
    if opts.ceil_mode and (out[i] - 1) * s[i] >= n[i] + p[i] then out[i] = out[i] - 1 end
    if out[i] < 1 then raise("%s: the dilated kernel %d is larger than the padded input %d", opname, span,
      n[i] + 2 * p[i]) end
    extra[i] = math.max(0, (out[i] - 1) * s[i] + span - (n[i] + 2 * p[i]))
  end
  local xp = spatial.pad(x, { p[2], p[2] + extra[2], p[1], p[1] + extra[1] }, "constant", value)
  local Hp, Wp = xp._shape[3], xp._shape[4]
  local idx = {}
  for i = 0, k[1] - 1 do
    for j = 0, k[2] - 1 do
      for a = 0, out[1] - 1 do
        for b = 0, out[2] - 1 do idx[#idx + 1] = (a * s[1] + i * d[1]) * Wp + b * s[2] + j * d[2] + 1 end
      end
    end
  end
  local N, C = x._shape[1], x._shape[2]
  local w = ops.index_select(xp:reshape(N, C, Hp * Wp), 3, ops.tensor(idx, { dtype = "i64" }))
  return w:reshape(N, C, k[1] * k[2], out[1], out[2]), batched
end

-- opts: stride (kernel_size), padding, dilation, ceil_mode (return_indices: not with dilation)
function M.max_pool2d(x, kernel_size, opts)
  opts = options.check(opts, "max_pool2d", { stride = "any", padding = "any", dilation = "any", ceil_mode = "boolean",
    return_indices = "boolean" })
  if opts.return_indices then raise("max_pool2d: return_indices with dilation is not implemented") end
  local w, batched = windows(x, kernel_size, opts, -math.huge, "max_pool2d")
  local y = w:amax(3)
  return batched and y or y:squeeze(1)
end

-- opts: stride (kernel_size), padding, ceil_mode, count_include_pad (no effect: the divisor is given),
-- divisor_override (a nonzero integer)
function M.avg_pool2d(x, kernel_size, opts)
  opts = options.check(opts, "avg_pool2d", { stride = "any", padding = "any", ceil_mode = "boolean",
    count_include_pad = "boolean", divisor_override = "integer" })
  local div = opts.divisor_override
  if div == 0 then raise("avg_pool2d: divisor_override must be nonzero") end
  local w, batched = windows(x, kernel_size, opts, 0, "avg_pool2d")
  local y = w:sum(3) / div
  return batched and y or y:squeeze(1)
end

return M
