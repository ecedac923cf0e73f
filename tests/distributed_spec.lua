-- tests/distributed_spec.lua: ds.distributed over Open MPI: 2- and 3-process jobs (mpirun under `timeout`, shared
-- memory and loopback only) running tests/distributed_worker.lua; the sampler and the errors in this process.
local ds = require("ds")
local H = require("tests.helpers")

local have_mpi = os.execute("command -v mpirun >/dev/null 2>&1") == 0
-- child processes run without the sanitizer preload of make test-asan (and find libds from the source tree)
local CLEAN = "env -u LD_PRELOAD -u DS_ALLOC -u DS_LIB -u ASAN_OPTIONS -u UBSAN_OPTIONS "
  .. "LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "
local ROOT_FLAG = io.popen("id -u"):read("*l") == "0" and "--allow-run-as-root " or ""
local LIMIT = 120   -- seconds any job may take before `timeout` ends it (the test then fails)

-- runs an mpirun job; returns its output, exit status, seconds taken, and RESULT lines as results[rank][key]
local function job(np, args)
  local t0 = ds.clock()
  local dir = H.tmp_dir() -- each rank writes its RESULT lines to dir/rank<r> (stdout pieces interleave)
  local p = io.popen(CLEAN .. string.format("DS_RESULT_DIR=%s timeout %d mpirun %s--oversubscribe --bind-to none " ..
    "--mca btl self,vader -np %d -x LUA_PATH -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x DS_RESULT_DIR " ..
    "luajit tests/distributed_worker.lua %s 2>&1; echo \"exit=$?\"", dir, LIMIT, ROOT_FLAG, np, args))
  local out = p:read("*a")
  p:close()
  local results = {}
  for r = 1, np do
    local f = io.open(string.format("%s/rank%d", dir, r))
    if f then
      for k, v in f:read("*a"):gmatch("RESULT %d+ (%S+) ([^\n]*)") do
        results[r] = results[r] or {}
        results[r][k] = v
      end
      f:close()
    end
  end
  os.execute("rm -rf '" .. dir .. "'")
  return out, tonumber(out:match("exit=(%d+)")), ds.clock() - t0, results
end

local function single(args)
  local p = io.popen(CLEAN .. "timeout " .. LIMIT .. " luajit tests/distributed_worker.lua " .. args .. " 2>&1")
  local out = p:read("*a")
  p:close()
  local results = {}
  for k, v in out:gmatch("RESULT 1 (%S+) ([^\n]*)") do results[k] = v end
  return out, results
end

describe("ds.distributed in one process", function()
  it("init outside mpirun says how to start the job", function()
    H.raises(function() ds.distributed.init() end, "not started by Open MPI's mpirun", "mpirun -np 2", "--allow-run-as-root")
    assert.is_false(ds.distributed.is_initialized())
    H.raises(function() ds.distributed.rank() end, "ds.distributed.rank: call ds.distributed.init() first")
    H.raises(function() ds.distributed.init({ world_size = 2 }) end, "world_size can only be 1")
    H.raises(function() ds.distributed.init({ bogus = 1 }) end, "unknown option bogus")
  end)
  it("DistributedDataParallel needs init", function()
    if ds.distributed.is_initialized() then return end   -- the op table's sample may have set a world of one
    H.raises(function() ds.nn.DistributedDataParallel(ds.nn.Linear(2, 2)) end, "call ds.distributed.init() first")
  end)
  it("DistributedSampler: shards are disjoint, cover the data, share one shuffle per epoch", function()
    local data = ds.data.TensorDataset(ds.arange(1, 11))
    local function shard(rank, epoch, opts)
      local s = ds.data.DistributedSampler(data, { rank = rank, world_size = 3, seed = 7, drop_last = opts and opts.drop_last })
      s:set_epoch(epoch)
      local o, list = s:order(), {}
      for i = 0, s:len() - 1 do list[#list + 1] = tonumber(o[i]) end
      return list
    end
    local seen = {}
    for r = 1, 3 do
      local l = shard(r, 0)
      assert.equal(4, #l)            -- ceil(10 / 3), the order wraps around
      for _, i in ipairs(l) do seen[i] = (seen[i] or 0) + 1 end
    end
    for i = 0, 9 do assert.truthy(seen[i], "sample " .. i .. " in no shard") end
    assert.same(shard(2, 1), shard(2, 1))
    assert.are_not.same(shard(2, 0), shard(2, 1))
    assert.equal(3, #shard(1, 0, { drop_last = true }))
    local loader = ds.data.DataLoader(data, { batch_size = 2, sampler = ds.data.DistributedSampler(data, { rank = 1, world_size = 2, shuffle = false }) })
    assert.equal(3, loader:len())
    assert.same({ 1, 3 }, select(2, loader:batches()()):totable())
    H.raises(function() ds.data.DistributedSampler(data, { rank = 3, world_size = 2 }) end, "rank must be an integer in 1..2")
  end)
  it("DistributedSampler iterates: indices() and iter() list this epoch's 1-based samples, set_epoch picks the epoch", function()
    local data = ds.data.TensorDataset(ds.arange(1, 11))
    local s = ds.data.DistributedSampler(data, { rank = 2, world_size = 3, seed = 7 })
    local first = s:indices()
    assert.equal(4, #first)
    assert.same(first, s:indices())                 -- listing does not move to another epoch (as PyTorch's)
    local it = {}
    for i in s:iter() do it[#it + 1] = i end
    assert.same(first, it)
    local o = s:order()                             -- a DataLoader pass: the same samples 0-based, then the next epoch
    for k = 1, 4 do assert.equal(first[k], tonumber(o[k - 1]) + 1) end
    local second = s:indices()
    s:set_epoch(1)
    assert.same(second, s:indices())
    s:set_epoch(0)
    assert.same(first, s:indices())
    local all = {}
    for r = 1, 3 do
      for _, i in ipairs(ds.data.DistributedSampler(data, { rank = r, world_size = 3, shuffle = false }):indices()) do all[#all + 1] = i end
    end
    assert.same({ 1, 4, 7, 10, 2, 5, 8, 1, 3, 6, 9, 2 }, all)   -- every P-th from the rank, wrapping around
    H.raises(function() s:set_epoch(-1) end, "set_epoch: expects a non-negative integer")
    H.raises(function() ds.data.DataLoader(data, { shuffle = true, sampler = ds.data.DistributedSampler(data, { rank = 1, world_size = 2 }) }) end,
      "give shuffle or sampler, not both")
  end)
  it("DistributedDataParallel in a world of one: no_sync takes a function; a second backward through one forward is refused", function()
    if ds.distributed.is_initialized() then return end
    ds.distributed.init({ world_size = 1 })
    local ok, err = pcall(function()
      local model = ds.nn.DistributedDataParallel(ds.nn.Linear(3, 2))
      local x = ds.ones(4, 3)
      local y = model(x):sum()
      y:backward({ retain_graph = true })
      H.raises(function() y:backward() end, "a second backward through one forward", "model:no_sync(fn)")
      H.raises(function() model:no_sync() end, "no_sync: expects a function")
      model:zero_grad()
      assert.equal(7, model:no_sync(function(a) model(x):sum():backward(); return a + 1 end, 6))
      model(x):sum():backward()                    -- averaged (a world of one: unchanged)
      assert.equal(16, model.module.bias.grad:sum():item())   -- 4 per element and backward, summed
    end)
    ds.distributed.finalize()
    assert(ok, err)
  end)
end)

local d = have_mpi and describe or pending
d("ds.distributed under mpirun", function()
  it("collectives equal the rank-order reference, the same bits on every rank, with 2 and 3 processes", function()
    for _, np in ipairs { 2, 3 } do
      local out, code, _, res = job(np, "collectives")
      assert.equal(0, code, out)
      for r = 1, np do
        local R = res[r] or error("no results from rank " .. r .. ":\n" .. out)
        assert.equal(R.sum, res[1].sum)
        for _, k in ipairs { "sum_is_rank_order", "mean_is_sum_over_P", "max", "op" } do assert.equal("true", R[k], k .. " on rank " .. r) end
        assert.equal(np == 2 and "1 10 2 20" or "1 10 2 20 3 30", R.all_gather)
        -- reduce_scatter of arange(2P) * r summed over r = 1..P: slice r is (sum of r) * {2r-2, 2r-1}
        local s = np * (np + 1) / 2
        assert.equal(string.format("%d %d", s * (2 * r - 2), s * (2 * r - 1)), R.reduce_scatter)
        assert.equal(string.format("%d %d %d", np, np, np), R.broadcast)
        assert.equal("yes", R.done)
      end
    end
  end)

  it("LeNet-5 with DistributedDataParallel: same weights on both ranks and runs, compiled == eager, in line with one process", function()
    local out, code, _, a = job(2, "train 12")
    assert.equal(0, code, out)
    local out2, code2, _, b = job(2, "train 12 eager")
    assert.equal(0, code2, out2)
    assert.truthy(a[1] and a[2], out)
    assert.equal(a[1].weights, a[2].weights)            -- ranks agree bit for bit
    assert.equal(a[1].weights, b[1].weights)            -- and so do runs
    assert.equal("true", a[1].compiled_equals_eager)
    assert.equal("true", a[2].compiled_equals_eager)
    assert.equal("3", a[1].buckets)                     -- bucket_mb = 0.1 cuts LeNet's 61706 parameters into 3
    -- one process on the same global batches (the shards of 2 ranks are its batches): the same training up to rounding
    local sout, s = single("train_single 12 eager")
    assert.truthy(s.loss, sout)
    local mean_loss = (tonumber(a[1].loss) + tonumber(a[2].loss)) / 2
    assert(math.abs(mean_loss - tonumber(s.loss)) <= 1e-4 * tonumber(s.loss), string.format("loss %.9g vs one process %s", mean_loss, s.loss))
    assert(math.abs(tonumber(a[1].accuracy) - tonumber(s.accuracy)) <= 0.01, "accuracy " .. a[1].accuracy .. " vs one process " .. s.accuracy)
  end)

  it("DDP written as PyTorch's tutorial (no explicit sync): the same bits on both ranks, one-process training to 1e-5", function()
    local out, code, _, res = job(2, "tutorial")
    assert.equal(0, code, out)
    assert.truthy(res[1] and res[2], out)
    assert.equal(res[1].crc, res[2].crc)
    local sout, s = single("tutorial_single")
    assert.truthy(s.weights, sout)
    local a, b = {}, {}
    for v in res[1].weights:gmatch("%S+") do a[#a + 1] = tonumber(v) end
    for v in s.weights:gmatch("%S+") do b[#b + 1] = tonumber(v) end
    assert.equal(#b, #a)
    assert.equal(165, #a)                          -- 10x10 + 10 + 5x10 + 5
    for i = 1, #a do assert(math.abs(a[i] - b[i]) <= 1e-5, string.format("weight %d: %.9g vs one process %.9g", i, a[i], b[i])) end
    assert.are_not.equal(s.crc, res[1].crc)         -- (the one-process run sums in another order: close, not equal)
  end)

  it("no_sync accumulates local gradients; the next backward averages the sum; explicit sync_gradients still works", function()
    local out, code, _, res = job(2, "accumulate")
    assert.equal(0, code, out)
    for r = 1, 2 do
      assert.equal("true", res[r].local_grads_differ, out)
      assert.equal("true", res[r].explicit_after_auto_is_noop, out)
    end
    assert.equal(res[1].crc, res[2].crc)
    local sout, s = single("accumulate_single")
    assert.truthy(s.weights, sout)
    local b = {}
    for v in s.weights:gmatch("%S+") do b[#b + 1] = tonumber(v) end
    local i = 0
    for v in res[1].weights:gmatch("%S+") do
      i = i + 1
      assert(math.abs(tonumber(v) - b[i]) <= 1e-5, string.format("weight %d: %s vs one process %.9g", i, v, b[i]))
    end
    assert.equal(#b, i)
  end)

  it("collectives that differ in dtype, shape, op, kind or root fail on every rank, naming both ranks and both", function()
    for _, np in ipairs { 2, 3 } do
      local out, code, _, res = job(np, "checked")
      assert.equal(0, code, out)
      local want = {
        dtype = "all_reduce: the ranks disagree: rank 1 has all_reduce(sum) f32(4), rank %d has all_reduce(sum) f64(2)",
        shape = "all_reduce: the ranks disagree: rank 1 has all_reduce(sum) f32(2,3), rank %d has all_reduce(sum) f32(3,2)",
        gather = "all_gather: the ranks disagree: rank 1 has all_gather f32(2,3), rank %d has all_gather f32(2,4)",
        op = "all_reduce: the ranks disagree: rank 1 has all_reduce(sum) f32(3), rank %d has all_reduce(max) f32(3)",
        kind = "the ranks disagree: rank 1 has barrier, rank %d has broadcast(root 1) f32(3)",
        root = "broadcast: the ranks disagree: rank 1 has broadcast(root 1) f32(3), rank %d has broadcast(root 2) f32(3)",
        scatter = "reduce_scatter: the ranks disagree: rank 1 has reduce_scatter(sum) f32(" .. 4 * np .. "), rank %d " ..
          "has reduce_scatter(sum) f32(" .. 2 * np .. ")",
      }
      for r = 1, np do
        local R = res[r] or error("no results from rank " .. r .. ":\n" .. out)
        for k, msg in pairs(want) do
          assert.truthy(R[k]:find(string.format(msg, np), 1, true), "rank " .. r .. " " .. k .. ": " .. R[k])
          assert.truthy(R[k]:find("(this is rank " .. r .. ")", 1, true), R[k])
        end
        assert.equal("ok", R.after)                 -- a disagreement moves no data: the next collective works
      end
    end
  end)

  it("a rank that raises outside ds.distributed.run ends the job within seconds (the others waiting or busy)", function()
    for _, args in ipairs { "raise_outside", "raise_outside late" } do
      local out, code, seconds = job(2, args)
      assert.are_not.equal(0, code, out)
      assert.truthy(out:find("boom outside run", 1, true), out)
      assert.truthy(out:find("ds.distributed: rank 2 of 2 ends the job (MPI_Abort): finalize: the ranks disagree: rank 1 " ..
        "has all_reduce(sum) f32(4), rank 2 has ended its script", 1, true), out)
      assert.falsy(out:find("RESULT 1 unreachable", 1, true), out)
      assert(seconds < 10, args .. " took " .. seconds .. " s")
    end
  end)

  it("a checkpoint written by rank 1 loads on every rank", function()
    local path = os.tmpname()
    local out, code, _, res = job(2, "checkpoint " .. path)
    os.remove(path)
    assert.equal(0, code, out)
    assert.equal(res[1].loaded, res[2].loaded)
    assert.are_not.equal("differs", res[1].loaded)
  end)

  it("a rank that raises ends the job at once, naming the rank", function()
    local out, code, seconds = job(2, "raise")
    assert.are_not.equal(0, code)
    assert.truthy(out:find("ds.distributed: rank 2 of 2 failed: [^\n]*boom on purpose"), out)
    assert(seconds < 10, "took " .. seconds .. " s")
  end)

  it("a rank that is killed ends the job (mpirun names it with MPI's 0-based rank)", function()
    local out, code, seconds = job(2, "die")
    assert.are_not.equal(0, code)
    assert.truthy(out:find("process rank 1 with PID %d+ on node [^\n]* exited on signal 9"), out)
    assert(seconds < 10, "took " .. seconds .. " s")
  end)

  it("a rank that stays silent past the timeout is named by the others", function()
    local out, code, seconds = job(2, "silent")
    assert.are_not.equal(0, code)
    assert.truthy(out:find("all_reduce: rank 1: no message from rank 2 within 2 s", 1, true), out)
    assert(seconds < 20, "took " .. seconds .. " s")
  end)

  it("parameter shapes that differ between ranks are refused at wrap time", function()
    local out, code = job(2, "mismatch")
    assert.are_not.equal(0, code)
    assert.truthy(out:find("DistributedDataParallel: parameter weight has shape (3,4) on rank 2 but (2,4) on rank 1", 1, true), out)
  end)
end)
