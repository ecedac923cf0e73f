-- bench/ddp_bench.lua: data-parallel scaling: LeNet-5 training samples/s with 1 and 2 processes (1 thread each, the
-- global batch of 256 split across the ranks, compiled steps with DistributedDataParallel) and the all_reduce time of
-- LeNet-5's and the BERT-style model's gradients. Run from the repository root (it starts mpirun itself):
--   luajit bench/ddp_bench.lua [steps]        (LUA_PATH="./lua/?.lua;./lua/?/init.lua;;" as for the examples)
local ds = require("ds")

local STEPS = tonumber(arg[1]) or 30
local GLOBAL_BATCH = 256

-- ---- one rank of a job (started by the driver below under mpirun) ----
local function worker()
  local dist = ds.distributed.init()
  local P, rank = dist.world_size(), dist.rank()
  local lenet = dofile("examples/lenet_fashion_mnist.lua")
  ds.manual_seed(1)
  local model = ds.nn.DistributedDataParallel(lenet.LeNet())
  local opt = ds.optim.Adam(model:parameters(), { lr = 1e-3 })
  local B = GLOBAL_BATCH / P
  local step = ds.compile(function(x, y)
    local loss = ds.F.cross_entropy(model(x), y)
    opt:zero_grad()
    loss:backward()
    model:sync_gradients()
    opt:step()
    return loss
  end, { ds.spec({ B, 1, 28, 28 }, "f32", "x"), ds.spec({ B }, "i64", "y") })
  local x, y = ds.rand(B, 1, 28, 28), ds.randint(1, 11, { B })
  for _ = 1, 3 do step(x, y) end
  dist.barrier()
  local t0 = ds.clock()
  for _ = 1, STEPS do step(x, y) end
  local elapsed = dist.all_reduce(ds.tensor({ ds.clock() - t0 }, { dtype = "f64" }), { op = "max" }):item()

  -- all_reduce (mean) of a gradient-sized f32 tensor, alone: the communication share of a step
  local function allreduce_ms(n, reps)
    local g = ds.rand(n)
    dist.all_reduce(g, { op = "mean" })
    dist.barrier()
    local t = ds.clock()
    for _ = 1, reps do dist.all_reduce(g, { op = "mean" }) end
    return dist.all_reduce(ds.tensor({ (ds.clock() - t) / reps * 1000 }, { dtype = "f64" }), { op = "max" }):item()
  end
  local n_lenet = 0
  for _, p in ipairs(model:parameters()) do n_lenet = n_lenet + p:numel() end
  local bert = dofile("examples/bert_sentiment.lua")
  local n_bert = 0
  for _, p in ipairs(bert.Bert(bert.CFG):parameters()) do n_bert = n_bert + p:numel() end
  local lenet_ms, bert_ms = allreduce_ms(n_lenet, 50), allreduce_ms(n_bert, 5)
  if rank == 1 then
    print(string.format("RESULT %d %.1f %d %.3f %d %.3f", P, GLOBAL_BATCH * STEPS / elapsed, n_lenet, lenet_ms, n_bert, bert_ms))
  end
end

-- ---- the driver: one job per process count, then the table ----
local function driver()
  local root_flag = io.popen("id -u"):read("*l") == "0" and "--allow-run-as-root " or ""
  local rows = {}
  for _, np in ipairs { 1, 2 } do
    local cmd = string.format("OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 900 mpirun %s--oversubscribe --mca btl self,vader -np %d " ..
      "-x LUA_PATH -x DS_LIB -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS luajit bench/ddp_bench.lua %d 2>&1", root_flag, np, STEPS)
    local p = io.popen("DS_BENCH_WORKER=1 " .. cmd)
    local out = p:read("*a")
    p:close()
    local P, sps, nl, lms, nb, bms = out:match("RESULT (%d+) (%S+) (%d+) (%S+) (%d+) (%S+)")
    if not P then error("ddp_bench: the " .. np .. "-process job failed:\n" .. out, 0) end
    rows[np] = { sps = tonumber(sps), nl = tonumber(nl), lms = tonumber(lms), nb = tonumber(nb), bms = tonumber(bms) }
  end
  print(string.format("LeNet-5 training, global batch %d, compiled steps, 1 thread per process, %d steps", GLOBAL_BATCH, STEPS))
  print("processes  samples/s  speed-up  all_reduce LeNet-5 grads (ms)  all_reduce BERT-style grads (ms)")
  for np = 1, 2 do
    local r = rows[np]
    print(string.format("%9d  %9.0f  %7.2fx  %22.3f (%d floats)  %18.2f (%d floats)", np, r.sps, r.sps / rows[1].sps, r.lms, r.nl, r.bms, r.nb))
  end
  local info = io.open("/proc/cpuinfo") and io.popen("grep -m1 'model name' /proc/cpuinfo"):read("*l") or "?"
  print(string.format("host: %s; %s", info:gsub("^model name%s*:%s*", ""), io.popen("nproc"):read("*l") .. " cores"))
end

if os.getenv("DS_BENCH_WORKER") then worker() else driver() end
