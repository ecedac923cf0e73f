-- nn/functional_dropout.lua: ds.F's channel-wise dropouts (dropout1d/2d/3d: a whole channel zeroed at once)
-- and alpha_dropout / feature_alpha_dropout (keep SELU's mean and variance), from ds.rand and elementwise ops.
local random = require("ds.random")
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")

local M = {}

local function check(name, x, p, dims)
  if not Tensor.is_tensor(x) then errors.raise(name .. ": input must be a tensor, got " .. type(x)) end
  if type(p) ~= "number" or p < 0 or p > 1 then
    errors.raise(name .. ": p must be in [0, 1], got " .. tostring(p))
  end
  if dims and not dims[#x._shape] then
    errors.raise(string.format("%s: input must be %s, got %s", name, dims.text, S.str(x._shape)))
  end
end

-- the noise's shape: x's up to the channel dim (2, or 1 for an unbatched input of `unbatched` dims), then 1s
local function channel_shape(x, unbatched)
  local c = #x._shape == unbatched and 1 or 2
  local s = {}
  for i = 1, #x._shape do s[i] = i <= c and x._shape[i] or 1 end
  return s
end

-- 1 with probability 1 - p, in x's dtype, of the given shape
local function keep_mask(x, p, shape) return random.rand(shape, { dtype = x.dtype }):ge(p):astype(x.dtype) end

local function channel_dropout(name, dims, unbatched)
  return function(x, p, training)
    p = p == nil and 0.5 or p
    check(name, x, p, dims)
    if training == false or p == 0 then return x end
    if p == 1 then return x * 0 end
    return x * (keep_mask(x, p, channel_shape(x, unbatched)) * (1 / (1 - p)))
  end
end
-- (N,C,L) or (C,L); (N,C,H,W) or (N,C,L) (PyTorch 1.13 reads a 3-D input as batched); (N,C,D,H,W) or (C,D,H,W)
M.dropout1d = channel_dropout("dropout1d", { [2] = true, [3] = true, text = "(N,C,L) or (C,L)" }, 2)
M.dropout2d = channel_dropout("dropout2d", { [3] = true, [4] = true, text = "(N,C,H,W) or (N,C,L)" }, 0)
M.dropout3d = channel_dropout("dropout3d", { [4] = true, [5] = true, text = "(N,C,D,H,W) or (C,D,H,W)" }, 4)

-- x * a * keep + alpha' a (p - (1 - keep)), alpha' = SELU's -scale * alpha (PyTorch's _dropout_impl)
local ALPHA = 1.7580993408473766
local function alpha_dropout(name, feature)
  return function(x, p, training)
    p = p == nil and 0.5 or p
    check(name, x, p, nil)
    if training == false or p == 0 then return x end
    if p == 1 then return x * 0 end
    local keep = keep_mask(x, p, feature and channel_shape(x, 0) or x._shape)
    local a = 1 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    return x * (keep * a) + ((keep - 1) * (ALPHA * a) + ALPHA * a * p)
  end
end
M.alpha_dropout = alpha_dropout("alpha_dropout", false)
M.feature_alpha_dropout = alpha_dropout("feature_alpha_dropout", true)

return M
