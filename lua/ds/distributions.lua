-- distributions.lua: ds.distributions, the basics of torch.distributions: Categorical, Normal, Bernoulli, Uniform with
-- PyTorch's constructor arguments, sample(shape) / rsample, log_prob, entropy; draws come from ds's generator.
-- Categories are 1-based, as every ds index. Parameters are checked when their values are known (eagerly).
local ops = require("ds.ops")
local autograd = require("ds.autograd")
local errors = require("ds.errors")
local options = require("ds.options")
local random = require("ds.random")
local S = require("ds.shape")
local Tensor = require("ds.tensor")

local M = {}
local LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- a parameter: a tensor (floating) or a number (an f32 0-d tensor, as PyTorch's default dtype)
local function param(v, cls, name)
  if Tensor.is_tensor(v) then return v.dtype == "f64" and v or v:astype("f32") end
  if type(v) ~= "number" then raise("%s: %s must be a tensor or a number, got %s", cls, name, type(v)) end
  return ops.tensor(v)
end

-- check(cond_tensor) when values exist (eagerly): PyTorch validates arguments by default
local function check(ok, cls, msg)
  if rawget(ok, "_c") and not ok:all():item() then raise("%s: %s", cls, msg) end
end

-- exactly one of probs and logits (PyTorch's constructor rule)
local function probs_or_logits(opts, cls)
  opts = options.check(opts, cls, { probs = "any", logits = "any" })
  if (opts.probs == nil) == (opts.logits == nil) then
    raise("%s: either probs or logits must be specified, but not both", cls)
  end
  return opts.probs and param(opts.probs, cls, "probs"), opts.logits and param(opts.logits, cls, "logits")
end

-- sample_shape .. batch_shape .. event_shape
local function extended(sample_shape, shape)
  local out = {}
  for _, d in ipairs(sample_shape or {}) do out[#out + 1] = d end
  for _, d in ipairs(shape) do out[#out + 1] = d end
  return out
end

local function class(name)
  local cls = { __name = name }
  cls.__index = cls
  cls.__tostring = function(self) return name .. "(" .. S.str(self.batch_shape) .. ")" end
  -- sample(shape): a draw without gradient (rsample keeps it where the distribution has one)
  function cls:sample(sample_shape)
    return autograd.no_grad(function() return self:_draw(sample_shape or {}) end)
  end
  return cls
end

-- ---- Categorical({probs = (..., K)} | {logits = (..., K)}): values 1..K ----
local Categorical = class("Categorical")
function M.Categorical(opts)
  local probs, logits = probs_or_logits(opts, "Categorical")
  local self = setmetatable({}, Categorical)
  local x = probs or logits
  if #x._shape < 1 then raise("Categorical: %s must have at least one dim, got %s", probs and "probs" or "logits",
    S.str(x._shape)) end
  if probs then
    check(ops.logical_and(probs:ge(0), probs:isfinite()), "Categorical", "probs must be non-negative and finite")
    self.probs = probs / probs:sum(-1, true)
    self.logits = ops.log(self.probs)
  else
    self.logits = logits - logits:logsumexp(-1, true)
    self.probs = ops.softmax(logits, -1)
  end
  self.num_events = x._shape[#x._shape]
  self.batch_shape = {}
  for i = 1, #x._shape - 1 do self.batch_shape[i] = x._shape[i] end
  return self
end
-- (sample_shape..., batch...) i64
function Categorical:_draw(sample_shape)
  local n = S.numel(sample_shape)
  if n == 0 then return ops.zeros(extended(sample_shape, self.batch_shape), { dtype = "i64" }) end
  local rows = self.probs:reshape(-1, self.num_events)                       -- (B, K)
  return ops.multinomial(rows, n, true):t():reshape(extended(sample_shape, self.batch_shape))
end
-- value: i64 categories 1..K, broadcast with the batch shape
function Categorical:log_prob(value)
  local v = value:astype("i64"):unsqueeze(-1)                                   -- (..., 1)
  local shape = S.broadcast(v._shape, extended(self.batch_shape, { 1 }), "Categorical.log_prob")
  local rows = extended({}, shape)
  rows[#rows] = self.num_events
  return ops.gather(self.logits:expand(rows), -1, v:expand(shape)):squeeze(-1)
end
function Categorical:entropy()
  local lg = self.logits:clamp(-3.4028234663852886e38, math.huge)   -- finfo.min, as PyTorch: 0 * -inf is 0
  return -(lg * self.probs):sum(-1)
end

-- ---- Normal(loc, scale) ----
local Normal = class("Normal")
function M.Normal(loc, scale)
  local self = setmetatable({}, Normal)
  loc, scale = param(loc, "Normal", "loc"), param(scale, "Normal", "scale")
  check(scale:gt(0), "Normal", "scale must be positive")
  self.batch_shape = S.broadcast(loc._shape, scale._shape, "Normal")
  self.loc, self.scale = loc:expand(self.batch_shape), scale:expand(self.batch_shape)
  self.mean, self.stddev, self.variance = self.loc, self.scale, self.scale * self.scale
  return self
end
function Normal:_draw(sample_shape) return self:rsample(sample_shape) end
-- loc + scale * eps, differentiable in loc and scale
function Normal:rsample(sample_shape)
  local eps = random.randn(extended(sample_shape or {}, self.batch_shape), { dtype = self.loc.dtype })
  return self.loc + eps * self.scale
end
function Normal:log_prob(value)
  local v = param(value, "Normal.log_prob", "value")
  return -((v - self.loc) ^ 2) / (self.variance * 2) - ops.log(self.scale) - LOG_SQRT_2PI
end
function Normal:entropy() return ops.log(self.scale) + (0.5 + LOG_SQRT_2PI) end

-- ---- Bernoulli({probs} | {logits}): values 0 and 1 in the parameter's dtype ----
local Bernoulli = class("Bernoulli")
function M.Bernoulli(opts)
  local probs, logits = probs_or_logits(opts, "Bernoulli")
  local self = setmetatable({}, Bernoulli)
  if probs then
    check(ops.logical_and(probs:ge(0), probs:le(1)), "Bernoulli", "probs must be in [0, 1]")
    self.probs = probs
    local eps = probs.dtype == "f64" and 2.220446049250313e-16 or 1.1920928955078125e-07
    local p = probs:clamp(eps, 1 - eps)                                -- PyTorch's clamp_probs
    self.logits = ops.log(p) - ops.log1p(-p)
  else
    self.logits, self.probs = logits, ops.sigmoid(logits)
  end
  self.batch_shape = self.probs._shape
  self.mean, self.variance = self.probs, self.probs * (1 - self.probs)
  return self
end
function Bernoulli:_draw(sample_shape)
  return random.bernoulli(self.probs:expand(extended(sample_shape, self.batch_shape)))
end
-- value * logits - softplus(logits): -binary_cross_entropy_with_logits(logits, value)
function Bernoulli:log_prob(value)
  local v = param(value, "Bernoulli.log_prob", "value")
  return v * self.logits - ops.softplus(self.logits)
end
function Bernoulli:entropy() return ops.softplus(self.logits) - self.probs * self.logits end

-- ---- Uniform(low, high): [low, high) ----
local Uniform = class("Uniform")
function M.Uniform(low, high)
  local self = setmetatable({}, Uniform)
  low, high = param(low, "Uniform", "low"), param(high, "Uniform", "high")
  check(low:lt(high), "Uniform", "low must be less than high")
  self.batch_shape = S.broadcast(low._shape, high._shape, "Uniform")
  self.low, self.high = low:expand(self.batch_shape), high:expand(self.batch_shape)
  self.mean, self.variance = (self.low + self.high) / 2, (self.high - self.low) ^ 2 / 12
  return self
end
function Uniform:_draw(sample_shape) return self:rsample(sample_shape) end
function Uniform:rsample(sample_shape)
  local u = random.rand(extended(sample_shape or {}, self.batch_shape), { dtype = self.low.dtype })
  return self.low + u * (self.high - self.low)
end
-- log(1 / (high - low)) inside [low, high), -inf outside (PyTorch's formula without its validation error)
function Uniform:log_prob(value)
  local v = param(value, "Uniform.log_prob", "value")
  local inside = ops.logical_and(self.low:le(v), self.high:gt(v)):astype(self.low.dtype)
  return ops.log(inside) - ops.log(self.high - self.low)
end
function Uniform:entropy() return ops.log(self.high - self.low) end

return M
