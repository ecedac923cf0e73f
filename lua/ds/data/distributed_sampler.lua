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
-- Each pass (order()) advances the epoch; set_epoch(e) chooses it (resuming a run).
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

-- the 0-based sample indices of this rank for the next pass: int64_t[len()]
function Sampler:order()
  local n, P = self.n, self.P
  local all = ffi.new("int64_t[?]", n)
  if self.shuffle then
    C.ds_data_permutation(all, n, ffi.new("uint64_t", self.seed) * 1000003ULL + self.epoch)
  else
    for i = 0, n - 1 do all[i] = i end
  end
  self.epoch = self.epoch + 1
  local mine = ffi.new("int64_t[?]", self.per_rank)
  for k = 0, self.per_rank - 1 do mine[k] = all[(k * P + self.rank - 1) % n] end
  return mine
end

return M
