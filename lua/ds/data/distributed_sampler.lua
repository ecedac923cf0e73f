-- data/distributed_sampler.lua: DistributedSampler: each rank's share of every pass over a dataset (the same
-- shuffled order on every rank, rank r takes every P-th sample starting at r), for DataLoader's `sampler` option.
local ffi = require("ffi")
local dsffi = require("ds.ffi")
local errors = require("ds.errors")
local distributed = require("ds.distributed")
local C = dsffi.C

local M = {}

local Sampler = {}
Sampler.__index = Sampler

local OPTIONS = { shuffle = true, seed = true, drop_last = true, rank = true, world_size = true }

-- DistributedSampler(dataset, {shuffle = true, seed = 0, drop_last = false, rank =, world_size =}): rank and
-- world_size default to ds.distributed's. Without drop_last the order wraps around so every rank gets
-- ceil(n / P) samples (as torch's); with it, the last n % P samples of each pass are dropped.
-- set_epoch(e) chooses the epoch (the shuffle) as PyTorch's; indices() and iter() list this epoch's samples; a
-- DataLoader pass (order()) also moves on to the next epoch, so a loop without set_epoch still reshuffles.
function M.DistributedSampler(dataset, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then
      errors.raise("DistributedSampler: unknown option " .. tostring(k) ..
        " (shuffle, seed, drop_last, rank, world_size)")
    end
  end
  if type(dataset) ~= "table" or type(dataset.len) ~= "function" then
    errors.raise("DistributedSampler: expects a dataset with len()")
  end
  local P = opts.world_size or distributed.world_size()
  local rank = opts.rank or distributed.rank()
  if type(P) ~= "number" or P < 1 or P ~= math.floor(P) then
    errors.raise("DistributedSampler: world_size must be a positive integer")
  end
  if type(rank) ~= "number" or rank < 1 or rank > P or rank ~= math.floor(rank) then
    errors.raise("DistributedSampler: rank must be an integer in 1.." .. P .. ", got " .. tostring(rank))
  end
  local seed = opts.seed or 0
  if type(seed) ~= "number" or seed < 0 or seed ~= math.floor(seed) then
    errors.raise("DistributedSampler: seed must be a non-negative integer")
  end
  local n = dataset:len()
  local per_rank = opts.drop_last and math.floor(n / P) or math.ceil(n / P)
  if per_rank == 0 then
    errors.raise(string.format("DistributedSampler: %d samples cannot be shared by %d ranks", n, P))
  end
  return setmetatable({ n = n, P = P, rank = rank, shuffle = opts.shuffle ~= false, seed = seed, per_rank = per_rank,
    epoch = 0 }, Sampler)
end

function Sampler:len() return self.per_rank end
function Sampler:set_epoch(e)
  if type(e) ~= "number" or e < 0 or e ~= math.floor(e) then
    errors.raise("DistributedSampler.set_epoch: expects a non-negative integer")
  end
  self.epoch = e
end

-- this rank's 0-based sample indices in the current epoch: int64_t[len()]
local function epoch_order(self)
  local n, P = self.n, self.P
  local all = ffi.new("int64_t[?]", n)
  if self.shuffle then
    C.ds_data_permutation(all, n, ffi.new("uint64_t", self.seed) * 1000003ULL + self.epoch)
  else
    for i = 0, n - 1 do all[i] = i end
  end
  local mine = ffi.new("int64_t[?]", self.per_rank)
  for k = 0, self.per_rank - 1 do mine[k] = all[(k * P + self.rank - 1) % n] end
  return mine
end

-- indices(): this rank's samples in the current epoch, 1-based dataset indices (a Lua list of len() numbers)
function Sampler:indices()
  local o, list = epoch_order(self), {}
  for k = 0, self.per_rank - 1 do list[k + 1] = tonumber(o[k]) + 1 end
  return list
end

-- iter(): for i in sampler:iter() do ... end over indices()
function Sampler:iter()
  local list, k = self:indices(), 0
  return function()
    k = k + 1
    return list[k]
  end
end

-- order(): the DataLoader's protocol: indices() 0-based as int64_t[len()], then the epoch advances
function Sampler:order()
  local o = epoch_order(self)
  self.epoch = self.epoch + 1
  return o
end

return M
