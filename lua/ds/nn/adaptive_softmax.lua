-- nn/adaptive_softmax.lua: AdaptiveLogSoftmaxWithLoss (PyTorch's: a head over the shortlist and one entry per
-- cluster, a two-layer tail per cluster of in_features / div_value^i hidden units). log_prob gives every class's
-- log-probability (shortlist from the head, cluster classes as head cluster entry + the tail's log_softmax);
-- forward(input, target) reads the targets' entries of it, so it traces and compiles with no data-dependent shapes
-- (PyTorch computes only the rows each cluster needs: the same formulas, equal to rounding). Classes are 1-based.
local Module = require("ds.nn.module")
local Linear = require("ds.nn.linear").Linear
local container = require("ds.nn.container")
local constructor_args = require("ds.nn.constructor_args")
local ops = require("ds.ops")
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value = 4, head_bias = false[, {dtype}])
local ALS = Module:extend("AdaptiveLogSoftmaxWithLoss")
ALS._doc = "PyTorch's adaptive softmax: AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value, " ..
  "head_bias); forward(input, target) -> output, loss; log_prob(input); predict(input) (1-based classes)"
function ALS:init(in_features, n_classes, cutoffs, ...)
  local name = "AdaptiveLogSoftmaxWithLoss"
  if type(in_features) ~= "number" or type(n_classes) ~= "number" or type(cutoffs) ~= "table" then
    raise("%s: expects %s(in_features, n_classes, cutoffs, [div_value, head_bias])", name, name)
  end
  local o = constructor_args.merge(name, { "div_value", "head_bias" },
    { div_value = "number", head_bias = "boolean", dtype = "dtype" }, {}, ...)
  for i, c in ipairs(cutoffs) do
    if type(c) ~= "number" or c ~= math.floor(c) or c <= 0 or c >= n_classes or (i > 1 and c <= cutoffs[i - 1]) then
      raise("%s: cutoffs must be increasing integers in 1..n_classes - 1 (%d), got %s", name, n_classes - 1,
        tostring(c))
    end
  end
  if #cutoffs == 0 then raise("%s: cutoffs must not be empty", name) end
  local div, dt = o.div_value or 4, o.dtype
  self.in_features, self.n_classes, self.div_value = in_features, n_classes, div
  self.cutoffs = {}
  for i, c in ipairs(cutoffs) do self.cutoffs[i] = c end
  self.cutoffs[#self.cutoffs + 1] = n_classes
  self.shortlist_size, self.n_clusters = cutoffs[1], #cutoffs
  self.head_size = self.shortlist_size + self.n_clusters
  self.head = Linear(in_features, self.head_size, { bias = o.head_bias == true, dtype = dt })
  local tails = {}
  for i = 1, self.n_clusters do
    local hsz = math.floor(in_features / div ^ i)
    local osz = self.cutoffs[i + 1] - self.cutoffs[i]
    tails[i] = container.Sequential(Linear(in_features, hsz, { bias = false, dtype = dt }),
      Linear(hsz, osz, { bias = false, dtype = dt }))
  end
  self.tail = container.ModuleList(tails)
end

-- input (N, in_features) or (in_features) -> (N, n_classes) or (n_classes) log-probabilities
function ALS:log_prob(input)
  if not Tensor.is_tensor(input) or (#input._shape ~= 1 and #input._shape ~= 2)
    or not S.same(input._shape[#input._shape], self.in_features) then
    raise("AdaptiveLogSoftmaxWithLoss: input must be (N, %d) or (%d)", self.in_features, self.in_features)
  end
  local x = #input._shape == 1 and input:unsqueeze(1) or input
  local head = ops.log_softmax(self.head(x), 2)
  local parts = { head:narrow(2, 1, self.shortlist_size) }
  for i = 1, self.n_clusters do
    local cluster = ops.log_softmax(self.tail[i](x), 2)
    parts[#parts + 1] = cluster + head:narrow(2, self.shortlist_size + i, 1)
  end
  local out = ops.cat(parts, 2)
  return #input._shape == 1 and out:squeeze(1) or out
end

-- forward(input (N, in) or (in), target (N) or () 1-based classes) -> output (the targets' log-probabilities),
-- loss (their negative mean)
function ALS:forward(input, target)
  if not Tensor.is_tensor(target) or target.dtype == "f32" or target.dtype == "f64" or target.dtype == "bool" then
    raise("AdaptiveLogSoftmaxWithLoss: target must be a tensor of 1-based integer classes")
  end
  if #target._shape ~= #input._shape - 1 then
    raise("AdaptiveLogSoftmaxWithLoss: target %s does not match input %s", S.str(target._shape), S.str(input._shape))
  end
  if target._c ~= nil then
    local lo, hi = target:min():item(), target:max():item()
    if lo < 1 or hi > self.n_classes then
      raise("AdaptiveLogSoftmaxWithLoss: targets must be in 1..%d, got %d..%d", self.n_classes, lo, hi)
    end
  end
  local logp = self:log_prob(input)
  local output = ops.gather(logp, -1, target:astype("i64"):unsqueeze(-1)):squeeze(-1)
  return output, -output:mean()
end

-- the most likely class (1-based) of each row
function ALS:predict(input) return ops.argmax(self:log_prob(input), -1) end

M.AdaptiveLogSoftmaxWithLoss = ALS
return M
