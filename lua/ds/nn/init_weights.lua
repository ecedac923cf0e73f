-- nn/init_weights.lua: ds.nn.init: in-place initializers (PyTorch's names and formulas), run
-- without recording gradients.
local errors = require("ds.errors")
local autograd = require("ds.autograd")
local S = require("ds.shape")
local options = require("ds.options")
local args = require("ds.args")
local ops = require("ds.ops")
local random = require("ds.random")

local M = {}

local function fill(t, fn)
  autograd.no_grad(fn)
  return t
end

-- weight (out, in, k...) -> fan_in = in * prod(k), fan_out = out * prod(k)
function M.calculate_fan_in_and_fan_out(t)
  local s = t._shape
  if #s < 2 then errors.raise("init: fan in/out needs a tensor with >= 2 dims, got " .. S.str(s)) end
  local field = 1
  for i = 3, #s do field = field * s[i] end
  return s[2] * field, s[1] * field
end

function M.calculate_gain(nonlinearity, param)
  if nonlinearity == "linear" or nonlinearity == "sigmoid" or nonlinearity:match("^conv") then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "leaky_relu" then
    local a = param or 0.01
    return math.sqrt(2 / (1 + a * a))
  end
  if nonlinearity == "selu" then return 3 / 4 end
  errors.raise("calculate_gain: unsupported nonlinearity '" .. tostring(nonlinearity) .. "'")
end

function M.uniform_(t, a, b) return fill(t, function() random.uniform_(t, a or 0, b or 1) end) end
function M.normal_(t, mean, std) return fill(t, function() random.normal_(t, mean or 0, std or 1) end) end
function M.constant_(t, v) return fill(t, function() t:fill_(v) end) end
function M.zeros_(t) return M.constant_(t, 0) end
function M.ones_(t) return M.constant_(t, 1) end

function M.xavier_uniform_(t, gain)
  local fi, fo = M.calculate_fan_in_and_fan_out(t)
  local a = (gain or 1) * math.sqrt(6 / (fi + fo))
  return M.uniform_(t, -a, a)
end
function M.xavier_normal_(t, gain)
  local fi, fo = M.calculate_fan_in_and_fan_out(t)
  return M.normal_(t, 0, (gain or 1) * math.sqrt(2 / (fi + fo)))
end

-- opts: a (leaky_relu slope, default 0), mode "fan_in" | "fan_out", nonlinearity (default leaky_relu)
local function kaiming_std(t, opts, name)
  opts = options.check(opts, name, { a = "number", mode = { "fan_in", "fan_out" }, nonlinearity = "string" })
  local fi, fo = M.calculate_fan_in_and_fan_out(t)
  local fan = (opts.mode or "fan_in") == "fan_in" and fi or fo
  return M.calculate_gain(opts.nonlinearity or "leaky_relu", opts.a or 0) / math.sqrt(fan)
end
function M.kaiming_uniform_(t, opts)
  local bound = math.sqrt(3) * kaiming_std(t, opts, "kaiming_uniform_")
  return M.uniform_(t, -bound, bound)
end
function M.kaiming_normal_(t, opts) return M.normal_(t, 0, kaiming_std(t, opts, "kaiming_normal_")) end

-- PyTorch's default for Linear/Conv: weight kaiming_uniform(a = sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
function M.default_weight_(w) return M.kaiming_uniform_(w, { a = math.sqrt(5) }) end
function M.default_bias_(b, w)
  local fi = M.calculate_fan_in_and_fan_out(w)
  local bound = fi > 0 and 1 / math.sqrt(fi) or 0
  return M.uniform_(b, -bound, bound)
end

-- normal(mean, std) values outside [a, b] drawn again (up to 64 rounds, then clamped into [a, b], as PyTorch
-- clamps its inverse-CDF draws): a normal distribution truncated to [a, b]
function M.trunc_normal_(t, mean, std, a, b)
  mean, std, a, b = mean or 0, std or 1, a or -2, b or 2
  if not (a < b) then errors.raise(string.format("trunc_normal_: a = %s must be below b = %s", tostring(a), tostring(b))) end
  return fill(t, function()
    local x = random.randn(t._shape, { dtype = "f64" }) * std + mean
    for _ = 1, 64 do
      local outside = ops.logical_or(x:lt(a), x:gt(b))
      if not outside:any():item() then break end
      x = ops.where(outside, random.randn(t._shape, { dtype = "f64" }) * std + mean, x)
    end
    t:copy_(ops.clamp(x, a, b))
  end)
end

-- a (semi-)orthogonal matrix (rows or columns orthonormal) of t viewed as (size(1), rest), times gain: the Q of a
-- normal matrix's QR with R's diagonal positive (PyTorch's sign correction), by Gram-Schmidt with a second pass
function M.orthogonal_(t, gain)
  if #t._shape < 2 then errors.raise("orthogonal_: needs a tensor with at least 2 dims, got " .. S.str(t._shape)) end
  local rows = t._shape[1]
  local cols = S.numel(t._shape) / rows
  return fill(t, function()
    local a = random.randn({ rows, cols }, { dtype = "f64" })
    if rows < cols then a = a:t() end
    local m = ops.zeros(a._shape, { dtype = "f64" }) -- the columns found so far, zeros after them
    for j = 1, a._shape[2] do
      local v = a:select(2, j)
      for _ = 1, 2 do v = v - ops.matmul(m, ops.matmul(m:t(), v)) end
      m:select(2, j):copy_(v / ops.norm(v))
    end
    if rows < cols then m = m:t() end
    t:copy_((m * (gain or 1)):reshape(t._shape))
  end)
end

-- the kinds of each initializer's arguments, checked before it runs (lua/ds/args.lua)
local SIGNATURES = {
  calculate_fan_in_and_fan_out = { "tensor" }, calculate_gain = { "string", "number?" },
  uniform_ = { "tensor", "number?", "number?" }, normal_ = { "tensor", "number?", "number?" },
  constant_ = { "tensor", "number|boolean" }, zeros_ = { "tensor" }, ones_ = { "tensor" },
  xavier_uniform_ = { "tensor", "number?" }, xavier_normal_ = { "tensor", "number?" },
  kaiming_uniform_ = { "tensor", "table?" }, kaiming_normal_ = { "tensor", "table?" },
  default_weight_ = { "tensor" }, default_bias_ = { "tensor", "tensor" },
  trunc_normal_ = { "tensor", "number?", "number?", "number?", "number?" }, orthogonal_ = { "tensor", "number?" },
}
for name, f in pairs(M) do
  M[name] = args.wrap(name, SIGNATURES[name] or error("init_weights: no signature for " .. name), f)
end

return M
