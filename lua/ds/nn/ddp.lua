-- nn/ddp.lua: DistributedDataParallel: one model replica per process (ds.distributed); parameters start equal
-- (broadcast from rank 1), gradients are averaged over the ranks in buckets by the all_reduce op.
local Module = require("ds.nn.module")
local distributed = require("ds.distributed")
local errors = require("ds.errors")
local ops = require("ds.ops")
local S = require("ds.shape")

local M = {}

local DEFAULT_BUCKET_MB = 25   -- as torch's DistributedDataParallel

-- parameters in reverse registration order (the order backward finishes them) cut into buckets of at most
-- bucket_mb megabytes (a parameter larger than that is a bucket of its own)
local function make_buckets(params, bucket_mb)
  local buckets, cur, bytes = {}, nil, 0
  local limit = bucket_mb * 1024 * 1024
  for i = #params, 1, -1 do
    local p = params[i]
    local b = p:numel() * (p.dtype == "f64" and 8 or 4)
    if not cur or bytes + b > limit or cur[1].dtype ~= p.dtype then
      cur, bytes = {}, 0
      buckets[#buckets + 1] = cur
    end
    cur[#cur + 1] = p
    bytes = bytes + b
  end
  return buckets
end

-- every rank must hold the same parameter names and shapes: compared through all_gather before any broadcast
local function check_same_parameters(named)
  local P, me = distributed.world_size(), distributed.rank()
  local count = distributed.all_gather(ops.tensor({ #named }, { dtype = "i64" })):totable()
  for r = 2, P do
    if count[r] ~= count[1] then
      errors.raise(string.format("DistributedDataParallel: rank %d has %d parameter tensors, rank 1 has %d", r, count[r], count[1]))
    end
  end
  local sig = {}   -- per parameter: ndim, then 8 sizes
  for _, e in ipairs(named) do
    local shape = e[2].shape
    sig[#sig + 1] = #shape
    for d = 1, 8 do sig[#sig + 1] = shape[d] or 0 end
  end
  if #sig == 0 then return end
  local all = distributed.all_gather(ops.tensor(sig, { dtype = "i64" })):reshape(P, #named, 9):totable()
  for r = 2, P do
    for i, e in ipairs(named) do
      local a, b = all[1][i], all[r][i]
      for d = 1, 9 do
        if a[d] ~= b[d] then
          local function shape_of(v) local s = {}; for k = 1, v[1] do s[k] = v[k + 1] end; return S.str(s) end
          errors.raise(string.format("DistributedDataParallel: parameter %s has shape %s on rank %d but %s on rank 1%s",
            e[1], shape_of(b), r, shape_of(a), r == me and "" or " (this is rank " .. me .. ")"))
        end
      end
    end
  end
end

-- DistributedDataParallel(module, {bucket_mb = 25}): forward calls module; after loss:backward() call
-- model:sync_gradients() (every rank, the same number of times) before the optimizer step.
local DDP = Module:extend("DistributedDataParallel", { init = { "module", "table?" } })
function DDP:init(module, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "bucket_mb" then errors.raise("DistributedDataParallel: unknown option " .. tostring(k) .. " (bucket_mb)") end
  end
  if not Module.is_module(module) then errors.raise("DistributedDataParallel: expects a module, got " .. type(module)) end
  if not distributed.is_initialized() then errors.raise("DistributedDataParallel: call ds.distributed.init() first") end
  local bucket_mb = opts.bucket_mb or DEFAULT_BUCKET_MB
  if type(bucket_mb) ~= "number" or not (bucket_mb > 0) then errors.raise("DistributedDataParallel: bucket_mb must be a positive number") end
  self.module = module
  local named, params = {}, {}
  for name, p in module:named_parameters() do named[#named + 1] = { name, p }; params[#params + 1] = p end
  check_same_parameters(named)
  for _, p in ipairs(params) do distributed.broadcast(p, 1) end   -- in place, outside autograd
  for _, b in ipairs(module:buffers()) do distributed.broadcast(b, 1) end
  rawset(self, "_buckets", make_buckets(params, bucket_mb))
end

function DDP:forward(...) return self.module(...) end

-- each parameter's .grad becomes the mean over the ranks (a missing grad counts as zeros); eager or traced:
-- each bucket is one all_reduce node, so a compiled train step holds its reduction
function DDP:sync_gradients()
  for _, bucket in ipairs(rawget(self, "_buckets")) do
    local flat = {}
    for i, p in ipairs(bucket) do flat[i] = (p.grad or ops.zeros_like(p)):reshape(-1) end
    local avg = ops.all_reduce(#flat == 1 and flat[1] or ops.cat(flat, 1), "mean")
    local off = 1
    for _, p in ipairs(bucket) do
      local n = p:numel()
      p.grad = avg:narrow(1, off, n):reshape(p.shape)
      off = off + n
    end
  end
end

function DDP:bucket_count() return #rawget(self, "_buckets") end

M.DistributedDataParallel = DDP
return M
