-- nn/functional_norm.lua: ds.F's group_norm, instance_norm and embedding_bag, composed from table ops
-- (mean/var, index_select/index_add), so they differentiate, trace and compile.
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function need_tensor(x, opname, what)
  if not Tensor.is_tensor(x) then raise("%s: %s must be a tensor, got %s", opname, what, type(x)) end
  return x
end

-- weight/bias (C) applied along dim 2 of x (N, C, ...)
local function affine(y, weight, bias, opname)
  local shape = { 1, y._shape[2] }
  for i = 3, #y._shape do shape[i] = 1 end
  if weight ~= nil then y = y * need_tensor(weight, opname, "weight"):reshape(shape) end
  if bias ~= nil then y = y + need_tensor(bias, opname, "bias"):reshape(shape) end
  return y
end

-- x (N, C, ...) normalized over each group of C / num_groups channels and the other dims (biased variance)
function M.group_norm(x, num_groups, weight, bias, eps)
  need_tensor(x, "group_norm", "input")
  if #x._shape < 2 then raise("group_norm: input must be (N,C,...), got %s", S.str(x._shape)) end
  local c = x._shape[2]
  if type(num_groups) ~= "number" or num_groups < 1 or type(c) ~= "number" or c % num_groups ~= 0 then
    raise("group_norm: num_groups %s must divide the %s channels of %s", tostring(num_groups), tostring(c),
      S.str(x._shape))
  end
  local xg = x:reshape(x._shape[1], num_groups, -1)
  local mean, var = xg:mean(3, true), xg:var(3, false, true)
  local y = ((xg - mean) * ops.rsqrt(var + (eps or 1e-5))):reshape(x._shape)
  return affine(y, weight, bias, "group_norm")
end

-- x (N, C, ...) normalized per sample and channel over the spatial dims (use_input_stats; no running stats)
function M.instance_norm(x, opts)
  need_tensor(x, "instance_norm", "input")
  opts = options.check(opts, "instance_norm", { weight = "tensor", bias = "tensor", eps = { "number", min = 0 } })
  if #x._shape < 3 then raise("instance_norm: input must be (N,C,spatial...), got %s", S.str(x._shape)) end
  local xs = x:reshape(x._shape[1], x._shape[2], -1)
  local mean, var = xs:mean(3, true), xs:var(3, false, true)
  local y = ((xs - mean) * ops.rsqrt(var + (opts.eps or 1e-5))):reshape(x._shape)
  return affine(y, opts.weight, opts.bias, "instance_norm")
end

-- input: (B, L) bags of 1-based ids, or (n) ids with offsets (B) 1-based bag starts; weight (V, D) -> (B, D)
-- opts: offsets (also the third argument, as PyTorch's), mode ("mean" or "sum"), per_sample_weights (input's
-- shape, mode "sum"); an empty bag gives 0
function M.embedding_bag(input, weight, offsets, opts)
  need_tensor(input, "embedding_bag", "input"); need_tensor(weight, "embedding_bag", "weight")
  if not Tensor.is_tensor(offsets) then offsets, opts = nil, offsets end
  opts = options.check(opts, "embedding_bag", { offsets = "tensor", mode = { "mean", "sum" },
    per_sample_weights = "tensor" })
  if offsets ~= nil then
    if opts.offsets ~= nil then raise("embedding_bag: offsets given twice (argument 3 and the options table)") end
    opts = { offsets = offsets, mode = opts.mode, per_sample_weights = opts.per_sample_weights }
  end
  local mode = opts.mode or "mean"
  local psw = opts.per_sample_weights
  if psw ~= nil and mode ~= "sum" then raise("embedding_bag: per_sample_weights needs mode 'sum'") end
  if psw ~= nil and not S.equal(psw._shape, input._shape) then
    raise("embedding_bag: per_sample_weights %s must have the input's shape %s", S.str(psw._shape), S.str(input._shape))
  end
  local rows = ops.embedding(input, weight)
  if psw ~= nil then rows = rows * psw:unsqueeze(-1) end
  if #input._shape == 2 then
    if opts.offsets ~= nil then raise("embedding_bag: offsets apply to a 1-D input only") end
    return mode == "sum" and rows:sum(2) or rows:mean(2)
  end
  if #input._shape ~= 1 or opts.offsets == nil or #opts.offsets._shape ~= 1 then
    raise("embedding_bag: input must be (B, L), or (n) with 1-D offsets")
  end
  local n, b = input._shape[1], opts.offsets._shape[1]
  -- bag of each id: 1 + the number of bag starts after the first at or before its position
  local starts = ops.zeros(n, { dtype = "i64" })
  if b > 1 then
    starts = ops.index_add(starts, 1, opts.offsets:narrow(1, 2, b - 1), ops.ones(b - 1, { dtype = "i64" }))
  end
  local bag = ops.cumsum(starts, 1) + 1
  local sums = ops.index_add(ops.zeros(b, weight._shape[2], { dtype = rows.dtype }), 1, bag, rows)
  if mode == "sum" then return sums end
  local counts = ops.index_add(ops.zeros(b, { dtype = rows.dtype }), 1, bag, ops.ones(n, { dtype = rows.dtype }))
  return sums / ops.clamp_min(counts, 1):unsqueeze(2)
end

return M
