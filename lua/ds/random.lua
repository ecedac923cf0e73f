-- random.lua: the global Philox generator (an i64 tensor {seed, offset}) and the random API:
-- manual_seed, rand/randn/randint(_like), uniform_/normal_, bernoulli, randperm, dropout.
local D = require("ds.dispatch")
local C = require("ds.ops.common")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local options = require("ds.options")
local args = require("ds.args")
local dsffi = require("ds.ffi")
local sizes_and_opts = require("ds.ops.sizes").sizes_and_opts
local random_ops = require("ds.ops.random") -- the rand / randn / randint defs
local ffi = dsffi.ffi

local M = {}

-- PyTorch's default seed: a fresh process draws the same stream until seeded.
M.DEFAULT_SEED = 67280421310721

-- The state tensor lives as long as the process: traced graphs hold it by reference as graph
-- state, so seeding writes into it instead of replacing it.
local state = Tensor._empty("i64", { 2 }, "manual_seed")
local initial_seed = M.DEFAULT_SEED
local pair = ffi.new("int64_t[2]")

local function write_state(seed, offset)
  pair[0] = seed; pair[1] = offset
  dsffi.C.ds_write_flat_i64(state._c, pair)
end
write_state(initial_seed, 0)

-- the live generator state tensor (random ops take it as their last input)
function M.state() return state end

local function check_seed(n, opname)
  if type(n) ~= "number" or n ~= math.floor(n) or math.abs(n) >= 2 ^ 53 then
    errors.raise(string.format("%s: seed must be an integer below 2^53 in magnitude, got %s", opname, tostring(n)))
  end
end

function M.manual_seed(n)
  check_seed(n, "manual_seed")
  initial_seed = n
  write_state(n, 0)
end

-- seed from the operating system's entropy; returns the seed
function M.seed()
  local f = io.open("/dev/urandom", "rb")
  local bytes = f and f:read(6) or tostring(os.time())
  if f then f:close() end
  local n = 0
  for i = 1, 6 do n = n * 256 + (bytes:byte(i) or 0) end
  M.manual_seed(n)
  return n
end

function M.initial_seed() return initial_seed end

-- a copy of the state: i64 (2) {seed, offset}
function M.get_rng_state() return state:clone() end

function M.set_rng_state(t)
  if not Tensor.is_tensor(t) or t.dtype ~= "i64" or t:numel() ~= 2 or t:dim() ~= 1 then
    errors.raise("set_rng_state: expects an i64 tensor of shape (2) from get_rng_state")
  end
  state:copy_(t)
end

local function finish(t, opts)
  if opts.requires_grad then t:requires_grad_() end
  return t
end

local function generate(name, shape, opts, params)
  local attrs = { shape = shape, dtype = opts.dtype }
  for k, v in pairs(params) do attrs[k] = v end
  return finish(D.call(random_ops[name], { state }, attrs), opts)
end

local OPTIONS = { dtype = "dtype", requires_grad = "boolean" }
local function check_opts(name, opts) return options.check(opts, name, OPTIONS) end

-- rand(sizes... | {sizes}, [opts]): uniform on [0, 1)
function M.rand(...)
  local shape, opts = sizes_and_opts("rand", ...)
  check_opts("rand", opts)
  return generate("rand", shape, opts, {})
end

-- randn(sizes... | {sizes}, [opts]): standard normal
function M.randn(...)
  local shape, opts = sizes_and_opts("randn", ...)
  check_opts("randn", opts)
  return generate("randn", shape, opts, {})
end

-- randint(high, size, [opts]) | randint(low, high, size, [opts]): integers in [low, high), i64 by default
function M.randint(a, b, c, d)
  local low, high, size, opts
  if type(b) == "table" or (type(b) == "number" and c == nil) then low, high, size, opts = 0, a, b, c
  else low, high, size, opts = a, b, c, d end
  if type(low) ~= "number" or type(high) ~= "number" then
    errors.raise("randint: low and high must be numbers: randint([low,] high, size, [opts])")
  end
  if type(size) == "number" then size = { size } end
  if type(size) ~= "table" then errors.raise("randint: size must be a table of sizes, got " .. type(size)) end
  local shape = sizes_and_opts("randint", size)
  opts = check_opts("randint", opts)
  return generate("randint", shape, { dtype = opts.dtype or "i64", requires_grad = opts.requires_grad },
    { low = low, high = high })
end

local function like(name)
  return function(x, opts)
    opts = check_opts(name .. "_like", opts)
    return generate(name, x._shape, { dtype = opts.dtype or x.dtype, requires_grad = opts.requires_grad }, {})
  end
end
M.rand_like = args.wrap("rand_like", { "tensor", "table?" }, like("rand"))
M.randn_like = args.wrap("randn_like", { "tensor", "table?" }, like("randn"))

-- in place: x:uniform_(low, high), x:normal_(mean, std)
function M.uniform_(x, low, high)
  return D.call(random_ops.rand, { state }, { shape = x._shape, dtype = x.dtype, low = low or 0, high = high or 1 }, x)
end
function M.normal_(x, mean, std)
  return D.call(random_ops.randn, { state }, { shape = x._shape, dtype = x.dtype, mean = mean or 0, std = std or 1 }, x)
end

-- bernoulli(p): 1 with probability p (elementwise), in p's dtype
function M.bernoulli(p)
  if not Tensor.is_tensor(p) then errors.raise("bernoulli: expects a tensor of probabilities") end
  return M.rand_like(p):lt(p):astype(p.dtype)
end

-- randperm(n): a random permutation of 1..n (i64), Fisher-Yates on the generator's stream (eager only)
function M.randperm(n)
  if type(n) ~= "number" or n < 0 or n ~= math.floor(n) then
    errors.raise("randperm: n must be a non-negative integer, got " .. tostring(n))
  end
  local u = M.rand(n, { dtype = "f64" }):totable()
  local perm = {}
  for i = 1, n do perm[i] = i end
  for i = n, 2, -1 do
    local j = 1 + math.floor(u[i] * i)
    perm[i], perm[j] = perm[j], perm[i]
  end
  return C.functions.tensor(perm, { dtype = "i64" })
end

-- dropout(x, p, training): zero each element with probability p and scale the rest by 1/(1-p);
-- composed from ds ops so autograd and tracing need nothing extra.
M.dropout = args.wrap("dropout", { "tensor", "number?", "boolean?" }, function(x, p, training)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p > 1 then
    errors.raise("dropout: probability must be in [0, 1], got " .. tostring(p))
  end
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local keep = M.rand_like(x):ge(p):astype(x.dtype)
  return x * keep * (1 / (1 - p))
end)

function M.install(ds)
  for _, name in ipairs { "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "rand", "randn",
                          "randint", "rand_like", "randn_like", "bernoulli", "randperm", "dropout" } do
    ds[name] = M[name]
  end
  ds.random = M
end

Tensor._define("ds.random", { uniform_ = M.uniform_, normal_ = M.normal_, bernoulli = M.bernoulli,
                              dropout = M.dropout })

return M
