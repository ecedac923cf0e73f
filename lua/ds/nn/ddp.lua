-- nn/ddp.lua: DistributedDataParallel: one model replica per process (ds.distributed); parameters start equal
-- (broadcast from rank 1), gradients are averaged over the ranks in buckets by the all_reduce op at the end of
-- every backward through a forward of the wrapper (as PyTorch's), or by an explicit sync_gradients().
local Module = require("ds.nn.module")
local autograd = require("ds.autograd")
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
      errors.raise(string.format("DistributedDataParallel: rank %d has %d parameter tensors, rank 1 has %d", r,
        count[r], count[1]))
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

-- each parameter's .grad becomes the mean over the ranks (a missing grad counts as zeros); eager or traced:
-- each bucket is one all_reduce node, so a compiled train step holds its reduction
local function average(buckets)
  for _, bucket in ipairs(buckets) do
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

-- the end of a backward (autograd's hook): a backward reaching the parameters after a forward in sync mode
-- averages the gradients; `_state` says what the last forward asked for: "sync" (pending), "local" (no_sync or
-- no forward yet), "synced" (done since that forward)
local function after_backward(self, written)
  local reached = false
  for _, p in ipairs(rawget(self, "_params")) do if written[p] then reached = true; break end end
  local state = rawget(self, "_state")
  if not reached or state == "local" then return end
  if state == "synced" then
    errors.raise("DistributedDataParallel: a second backward through one forward (its gradients were averaged " ..
      "already); run the forward again, or accumulate gradients under model:no_sync(fn)")
  end
  average(rawget(self, "_buckets"))
  rawset(self, "_state", "synced")
end

-- DistributedDataParallel(module, {bucket_mb = 25}): as PyTorch's: forward calls module, and loss:backward()
-- then averages every parameter's gradient over the ranks (in buckets, in a fixed order); model:no_sync(fn)
-- runs fn with that turned off (gradient accumulation); model:sync_gradients() averages explicitly.
local DDP = Module:extend("DistributedDataParallel", { init = { "module", "table?" } })
function DDP:init(module, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "bucket_mb" then
      errors.raise("DistributedDataParallel: unknown option " .. tostring(k) .. " (bucket_mb)")
    end
  end
  if not Module.is_module(module) then
    errors.raise("DistributedDataParallel: expects a module, got " .. type(module))
  end
  if not distributed.is_initialized() then errors.raise("DistributedDataParallel: call ds.distributed.init() first") end
  local bucket_mb = opts.bucket_mb or DEFAULT_BUCKET_MB
  if type(bucket_mb) ~= "number" or not (bucket_mb > 0) then
    errors.raise("DistributedDataParallel: bucket_mb must be a positive number")
  end
  self.module = module
  local named, params = {}, {}
  for name, p in module:named_parameters() do named[#named + 1] = { name, p }; params[#params + 1] = p end
  check_same_parameters(named)
  for _, p in ipairs(params) do distributed.broadcast(p, 1) end   -- in place, outside autograd
  for _, b in ipairs(module:buffers()) do distributed.broadcast(b, 1) end
  rawset(self, "_params", params)
  rawset(self, "_buckets", make_buckets(params, bucket_mb))
  rawset(self, "_state", "local")
  rawset(self, "_hook", autograd.register_backward_end_hook(function(written) after_backward(self, written) end))
end

-- a forward with grad enabled decides what the next backward does (as in PyTorch): average, or not under no_sync
function DDP:forward(...)
  if autograd.is_grad_enabled() then rawset(self, "_state", rawget(self, "_no_sync") and "local" or "sync") end
  return self.module(...)
end

-- no_sync(fn, ...): fn(...) with averaging off: the backwards of forwards run inside fn accumulate local
-- gradients; the first backward of a forward outside averages the accumulated ones. Returns fn's results.
function DDP:no_sync(fn, ...)
  if type(fn) ~= "function" then errors.raise("DistributedDataParallel.no_sync: expects a function, got " .. type(fn)) end
  local prev = rawget(self, "_no_sync")
  rawset(self, "_no_sync", true)
  local res = { pcall(fn, ...) }
  rawset(self, "_no_sync", prev)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- sync_gradients(): averages the gradients now (every rank, the same number of times); does nothing when the
-- backward since the last forward averaged them already
function DDP:sync_gradients()
  if rawget(self, "_state") == "synced" then return end
  average(rawget(self, "_buckets"))
  rawset(self, "_state", "synced")
end

function DDP:bucket_count() return #rawget(self, "_buckets") end

M.DistributedDataParallel = DDP
return M
