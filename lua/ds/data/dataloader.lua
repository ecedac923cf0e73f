-- data/dataloader.lua: TensorDataset (tensors sharing their first dim) and DataLoader: batches of rows
-- gathered in C, seeded shuffling, drop_last, and a per-batch transform.
local ffi = require("ffi")
local dsffi = require("ds.ffi")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")
local random = require("ds.random")
local C = dsffi.C

local M = {}

-- ---- TensorDataset(t1, t2, ...): sample i is {t1[i], t2[i], ...} ----
local TensorDataset = {}
TensorDataset.__index = TensorDataset

function M.TensorDataset(...)
  local tensors = { ... }
  if #tensors == 0 then errors.raise("TensorDataset: needs at least one tensor") end
  local n
  for i, t in ipairs(tensors) do
    if not Tensor.is_tensor(t) or not t._c then
      errors.raise(string.format("TensorDataset: argument %d is not a tensor with values", i))
    end
    if t:dim() == 0 then errors.raise(string.format("TensorDataset: tensor %d is 0-d; samples index dim 1", i)) end
    n = n or t:size(1)
    if t:size(1) ~= n then
      errors.raise(string.format("TensorDataset: tensors disagree on the number of samples: %s vs %s",
        S.str(tensors[1].shape), S.str(t.shape)))
    end
    if not t:is_contiguous() then tensors[i] = t:contiguous() end
  end
  return setmetatable({ tensors = tensors, n = n }, TensorDataset)
end

function TensorDataset:len() return self.n end

-- get(i) -> t1[i], t2[i], ... (views; i is 1-based)
function TensorDataset:get(i)
  if type(i) ~= "number" or i < 1 or i > self.n or i ~= math.floor(i) then
    errors.raise(string.format("TensorDataset:get: index %s out of range 1..%d", tostring(i), self.n))
  end
  local out = {}
  for k, t in ipairs(self.tensors) do out[k] = t:select(1, i) end
  return unpack(out)
end

-- ---- DataLoader(dataset, {batch_size, shuffle, drop_last, transform, seed}) ----
-- dataset: a TensorDataset or a list of tensors {x, y} sharing dim 1.
-- Each pass (loader:iter() or loader:batches()) reshuffles when shuffle is true: with `seed` the
-- k-th pass uses a permutation derived from (seed, k); without it the seed of each pass is drawn
-- from ds's generator, so ds.manual_seed makes the order reproducible.
-- transform(x, y, ...) runs on each whole batch (not per sample) and returns the batch to yield.
-- sampler (instead of shuffle): an object whose order() gives each pass's 0-based indices, int64_t[len()]
-- (ds.data.DistributedSampler).
local DataLoader = {}
DataLoader.__index = DataLoader

local options = { batch_size = true, shuffle = true, drop_last = true, transform = true, seed = true, sampler = true }

function M.DataLoader(dataset, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not options[k] then
      errors.raise(string.format("DataLoader: unknown option '%s' (batch_size, shuffle, drop_last, transform, seed, " ..
        "sampler)", tostring(k)))
    end
  end
  if type(dataset) == "table" and getmetatable(dataset) ~= TensorDataset then
    if Tensor.is_tensor(dataset) then dataset = { dataset } end
    if not dataset.tensors then dataset = M.TensorDataset(unpack(dataset)) end
  end
  if type(dataset) ~= "table" or type(dataset.tensors) ~= "table" then
    errors.raise("DataLoader: dataset must be a TensorDataset or a list of tensors, got " .. type(dataset))
  end
  local bs = opts.batch_size or 1
  if type(bs) ~= "number" or bs < 1 or bs ~= math.floor(bs) then
    errors.raise("DataLoader: batch_size must be a positive integer, got " .. tostring(bs))
  end
  local seed = opts.seed
  if seed ~= nil and (type(seed) ~= "number" or seed < 0 or seed ~= math.floor(seed) or seed >= 2 ^ 53) then
    errors.raise("DataLoader: seed must be a non-negative integer below 2^53, got " .. tostring(seed))
  end
  if opts.transform ~= nil and type(opts.transform) ~= "function" then
    errors.raise("DataLoader: transform must be a function(x, y, ...) -> batch, got " .. type(opts.transform))
  end
  local sampler = opts.sampler
  if sampler ~= nil and (type(sampler) ~= "table" or type(sampler.order) ~= "function" or
    type(sampler.len) ~= "function") then
    errors.raise("DataLoader: sampler must have order() and len() (a ds.data.DistributedSampler), " ..
      "got " .. type(sampler))
  end
  if sampler and opts.shuffle then
    errors.raise("DataLoader: give shuffle or sampler, not both (the sampler shuffles)")
  end
  local n = sampler and sampler:len() or dataset.n or dataset.tensors[1]:size(1)
  return setmetatable({ sampler = sampler,
    dataset = dataset, tensors = dataset.tensors, n = n, batch_size = bs, shuffle = opts.shuffle == true,
    drop_last = opts.drop_last == true, transform = opts.transform, seed = seed, passes = 0,
  }, DataLoader)
end

-- number of batches in one pass
function DataLoader:len()
  if self.drop_last then return math.floor(self.n / self.batch_size) end
  return math.ceil(self.n / self.batch_size)
end

local GOLDEN = ffi.new("uint64_t", 0x9E3779B9) * 0x100000000ULL + 0x7F4A7C15ULL

local function pass_seed(self)
  self.passes = self.passes + 1
  if self.seed then return ffi.new("uint64_t", self.seed) + GOLDEN * self.passes end
  local r = random.randint(0, 2 ^ 31, { 2 }):totable()
  return ffi.new("uint64_t", r[1]) * 0x80000000ULL + r[2]
end

-- the sample order of a new pass, 0-based int64 indices
function DataLoader:_order()
  if self.sampler then return self.sampler:order() end
  local order = ffi.new("int64_t[?]", math.max(self.n, 1))
  if self.shuffle then
    C.ds_data_permutation(order, self.n, pass_seed(self))
  else
    for i = 0, self.n - 1 do order[i] = i end
  end
  return order
end

-- the batch of rows order[start .. start+count-1] of every tensor, transformed
function DataLoader:_batch(order, start, count)
  local out = {}
  for k, t in ipairs(self.tensors) do
    local shape = t.shape
    shape[1] = count
    local b = Tensor._empty(t.dtype, shape, "DataLoader")
    dsffi.check(C.ds_data_gather_rows(b._c, t._c, order + start, count), "DataLoader")
    out[k] = b
  end
  if self.transform then return self.transform(unpack(out)) end
  return unpack(out)
end

-- for i, x, y in loader:batches() do ... end   (i = batch number, 1-based)
function DataLoader:batches()
  local order, nb, bs, n = self:_order(), self:len(), self.batch_size, self.n
  local i = 0
  return function()
    if i >= nb then return nil end
    i = i + 1
    local start = (i - 1) * bs
    return i, self:_batch(order, start, math.min(bs, n - start))
  end
end

-- for x, y in loader:iter() do ... end
function DataLoader:iter()
  local next_batch = self:batches()
  return function()
    return select(2, next_batch())
  end
end

return M
