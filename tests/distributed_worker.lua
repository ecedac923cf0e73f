-- tests/distributed_worker.lua: one rank of tests/distributed_spec.lua's mpirun jobs; prints "RESULT <rank> <key> <value>"
-- lines the spec compares across ranks and runs.   mpirun -np N luajit tests/distributed_worker.lua <mode> [args]
local ds = require("ds")
local ffi = require("ffi")
local dist = ds.distributed
local mode = arg[1]

local function crc(t)
  local c = t:contiguous()
  return string.format("%08x", tonumber(require("ds.ffi").C.ds_crc32(c:data_ptr(), c:numel() * c:element_size())))
end
local function params_crc(model)
  local parts = {}
  for name, p in model:named_parameters() do parts[#parts + 1] = name .. "=" .. crc(p) end
  return table.concat(parts, ",")
end
-- results go to stdout, and also to DS_RESULT_DIR/rank<r> when set: mpirun forwards each rank's output in
-- pieces, so a long line of one rank can have another rank's line in its middle
io.stdout:setvbuf("line")
local result_file
local function result(key, value)
  local line = string.format("RESULT %d %s %s", dist.rank(), key, value)
  print(line)
  io.stdout:flush()
  local dir = os.getenv("DS_RESULT_DIR")
  if dir then
    result_file = result_file or assert(io.open(string.format("%s/rank%d", dir, dist.rank()), "a"))
    result_file:write(line, "\n")
    result_file:flush()
  end
end

-- rank r's input: a fixed wave, different per rank, with many digits so the order of additions matters
local function input_of(r, n) return (ds.arange(n, { dtype = "f32" }) * (0.37 + r) + r / 3):sin() * 1000 + 1 / (r + 0.7) end

local modes = {}

-- every collective against a reference computed locally in rank order
function modes.collectives()
  local r, P = dist.rank(), dist.world_size()
  local n = 37   -- not a multiple of the world size: chunks of different lengths
  local sum = input_of(1, n)
  local max = input_of(1, n)
  for j = 2, P do sum = sum + input_of(j, n); max = ds.maximum(max, input_of(j, n)) end
  local x = input_of(r, n)
  local got = dist.all_reduce(x:clone(), { op = "sum" })
  result("sum", crc(got))
  result("sum_is_rank_order", tostring(ds.equal(got, sum)))
  result("mean_is_sum_over_P", tostring(ds.equal(dist.all_reduce(x:clone(), { op = "mean" }), sum / P)))
  result("max", tostring(ds.equal(dist.all_reduce(x:clone(), { op = "max" }), max)))
  result("op", tostring(ds.equal(ds.all_reduce(x, "sum"), sum)))
  local g = dist.all_gather(ds.tensor({ { r, 10 * r } }))
  result("all_gather", table.concat(g:reshape(-1):totable(), " "))
  local rs = dist.reduce_scatter(ds.arange(2 * P, { dtype = "f64" }) * r)
  result("reduce_scatter", table.concat(rs:totable(), " "))
  local b = ds.full({ 3 }, r, { dtype = "i64" })
  dist.broadcast(b, P)
  result("broadcast", table.concat(b:totable(), " "))
  dist.barrier()
  result("done", "yes")
end

-- LeNet-5 steps on Fashion-MNIST with DDP (no explicit sync): eager and compiled, weights after the steps
function modes.train()
  local steps, global_batch = tonumber(arg[2]) or 4, 64
  local lenet = dofile("examples/lenet_fashion_mnist.lua")
  local train = ds.data.fashion_mnist { split = "train" }
  local function run(compiled)
    ds.manual_seed(22 + dist.rank())   -- different initial weights per rank: DDP's broadcast must equalize them
    local net = lenet.LeNet()
    local model = ds.nn.DistributedDataParallel(net, { bucket_mb = 0.1 })
    local opt = ds.optim.Adam(model:parameters(), { lr = 1e-3 })
    local sampler = ds.data.DistributedSampler(train, { seed = 5 })
    local loader = ds.data.DataLoader(train, { batch_size = global_batch / dist.world_size(), sampler = sampler, transform = lenet.scale })
    local function step(x, y)
      local loss = ds.F.cross_entropy(model(x), y)
      opt:zero_grad()
      loss:backward()   -- averages the gradients over the ranks (DDP's hook), traced into the compiled step too
      opt:step()
      return loss
    end
    if compiled then step = ds.compile(step, { ds.spec({ global_batch / dist.world_size(), 1, 28, 28 }, "f32", "x"), ds.spec({ global_batch / dist.world_size() }, "i64", "y") }) end
    local loss
    for i, x, y in loader:batches() do
      loss = step(x, y)
      if i == steps then break end
    end
    return net, model:bucket_count(), loss:item()
  end
  local eager, nb, loss = run(false)
  local compiled = arg[3] ~= "eager" and run(true) or eager   -- "eager": the repeated and one-process runs skip it
  local test = ds.data.DataLoader(ds.data.fashion_mnist { split = "test" }, { batch_size = 1000, transform = lenet.scale })
  local x, y = select(2, test:batches()())
  result("accuracy", ds.no_grad(function() return eager(x):argmax(-1):eq(y):sum():item() / 1000 end))
  result("loss", string.format("%.9g", loss))
  result("buckets", nb)
  result("weights", params_crc(eager))
  if compiled ~= eager then result("compiled_equals_eager", tostring(params_crc(compiled) == params_crc(eager))) end
end

-- rank 2 raises inside ds.distributed.run while rank 1 waits in an all_reduce
function modes.raise()
  dist.run(function()
    if dist.rank() == 2 then error("boom on purpose") end
    dist.all_reduce(ds.ones(4))
  end)
end

-- rank 2 is killed while rank 1 waits in an all_reduce
function modes.die()
  dist.init()
  if dist.rank() == 2 then ffi.cdef("int kill(int pid, int sig); int getpid(void);"); ffi.C.kill(ffi.C.getpid(), 9) end
  dist.all_reduce(ds.ones(4))
end

-- rank 2 does not take part for longer than the timeout: rank 1's all_reduce names it
function modes.silent()
  dist.init({ timeout = 2 })
  dist.run(function()
    if dist.rank() == 2 then os.execute("sleep 20"); return end
    dist.all_reduce(ds.ones(4))
  end)
end

-- rank 2 builds a model of another shape: DDP refuses at wrap time
function modes.mismatch()
  dist.run(function()
    local model = ds.nn.Linear(4, dist.rank() == 1 and 2 or 3)
    ds.nn.DistributedDataParallel(model)
    result("wrapped", "yes")
  end)
end

-- one rank writes the checkpoint, every rank reads it back
function modes.checkpoint()
  dist.init()
  local path = arg[2]
  ds.manual_seed(dist.rank())
  local model = ds.nn.DistributedDataParallel(ds.nn.Linear(3, 2))
  dist.save_state(model.module:state_dict(), path)
  local fresh = ds.nn.Linear(3, 2)
  fresh:load_state_dict(ds.load_state(path))
  result("loaded", params_crc(fresh) == params_crc(model.module) and params_crc(fresh) or "differs")
end

-- PyTorch's DDP tutorial model (Linear(10, 10), ReLU, Linear(10, 5)) and data: every rank draws the same global
-- batches of 40 rows per step (X (steps, 40, 10), Y (steps, 40, 5)); rank r trains on its rows
local function toy()
  ds.manual_seed(dist.rank())   -- different initial weights per rank: DDP's broadcast equalizes them
  local net = ds.nn.Sequential(ds.nn.Linear(10, 10), ds.nn.ReLU(), ds.nn.Linear(10, 5))
  ds.manual_seed(100)
  return net, ds.randn(4, 40, 10), ds.randn(4, 40, 5)
end
local function weights(net)
  local parts = {}
  for _, p in ipairs(net:parameters()) do
    for _, v in ipairs(p:reshape(-1):totable()) do parts[#parts + 1] = string.format("%.9g", v) end
  end
  return table.concat(parts, " ")
end

-- written as PyTorch's DDP tutorial writes it (no explicit sync): zero_grad, forward, backward, step
function modes.tutorial()
  local net, X, Y = toy()
  local P, r = dist.world_size(), dist.rank()
  local ddp_model = P > 1 and ds.nn.DistributedDataParallel(net) or net   -- one process: the plain model
  local loss_fn = ds.nn.MSELoss()
  local optimizer = ds.optim.SGD(ddp_model:parameters(), { lr = 0.1 })
  local B = 40 / P
  for s = 1, 4 do
    optimizer:zero_grad()
    local outputs = ddp_model(X[s]:narrow(1, (r - 1) * B + 1, B))
    local labels = Y[s]:narrow(1, (r - 1) * B + 1, B)
    loss_fn(outputs, labels):backward()
    optimizer:step()
  end
  result("crc", params_crc(net))
  if dist.rank() == 1 then result("weights", weights(net)) end   -- the other ranks: the same crc
end

-- gradient accumulation: two micro-batches under no_sync (local gradients, different per rank), a third outside
-- (the backward averages the sum); rows from DistributedSampler:indices(); an explicit sync_gradients() after it
-- changes nothing
function modes.accumulate()
  local net, X, Y = toy()
  local P = dist.world_size()
  local model = ds.nn.DistributedDataParallel(net)
  local loss_fn = ds.nn.MSELoss()
  local optimizer = ds.optim.SGD(model:parameters(), { lr = 0.1 })
  local rows = ds.tensor(ds.data.DistributedSampler(ds.data.TensorDataset(X[1]), { shuffle = false }):indices(),
    { dtype = "i64" })
  local function micro(s) loss_fn(model(X[s]:index_select(1, rows)), Y[s]:index_select(1, rows)):backward() end
  for epoch = 1, 2 do
    optimizer:zero_grad()
    model:no_sync(function() micro(1); micro(2) end)
    if epoch == 1 and P > 1 then
      local g = dist.all_gather(net:parameters()[1].grad:reshape(1, -1))
      result("local_grads_differ", tostring(not ds.equal(g[1], g[2])))
    end
    micro(3)
    local before = params_crc(net) .. crc(net:parameters()[1].grad)
    model:sync_gradients()
    if epoch == 1 then result("explicit_after_auto_is_noop", tostring(before == params_crc(net) .. crc(net:parameters()[1].grad))) end
    optimizer:step()
  end
  -- accumulation with no automatic sync at all, then an explicit one: the ranks agree again
  optimizer:zero_grad()
  model:no_sync(function() micro(4) end)
  model:sync_gradients()
  optimizer:step()
  result("crc", params_crc(net))
  if dist.rank() == 1 then result("weights", weights(net)) end   -- the other ranks: the same crc
end

-- collectives whose dtype, shape, op, kind or root differ on the last rank: every rank fails naming both; a
-- matching collective afterwards still works
function modes.checked()
  local r, P = dist.rank(), dist.world_size()
  local odd = r == P
  local function try(key, fn)
    local ok, err = pcall(fn)
    result(key, ok and "ok" or (tostring(err):match("^[^\n]*")))
  end
  try("dtype", function() dist.all_reduce(odd and ds.ones(2, { dtype = "f64" }) or ds.ones(4)) end)
  try("shape", function() dist.all_reduce(odd and ds.ones(3, 2) or ds.ones(2, 3)) end)
  try("gather", function() dist.all_gather(odd and ds.ones(2, 4) or ds.ones(2, 3)) end)
  try("op", function() dist.all_reduce(ds.ones(3), { op = odd and "max" or "sum" }) end)
  try("kind", function() if odd then dist.broadcast(ds.ones(3)) else dist.barrier() end end)
  try("root", function() dist.broadcast(ds.ones(3), odd and 2 or 1) end)
  try("scatter", function() dist.reduce_scatter(ds.ones(odd and 2 * P or 4 * P)) end)
  try("after", function() assert(dist.all_reduce(ds.ones(3)):sum():item() == 3 * P, "wrong sum") end)
end

-- rank 2 raises outside ds.distributed.run while rank 1 waits in an all_reduce (or, "late", first computes for 3 s)
function modes.raise_outside()
  if dist.rank() == 2 then error("boom outside run") end
  if arg[2] == "late" then os.execute("sleep 3") end
  dist.all_reduce(ds.ones(4))
  result("unreachable", "yes")
end

local base = mode and mode:match("^(.*)_single$")
if base then dist.init({ world_size = 1 }); mode = base end   -- "<mode>_single": the same steps in one process
if not modes[mode] then error("distributed_worker: unknown mode " .. tostring(mode), 0) end
if not dist.is_initialized() and mode ~= "raise" and mode ~= "mismatch" and mode ~= "silent" then dist.init() end
modes[mode]()
