-- bench/frozen_sweep.lua: x (M, K) @ W^T + b for W (N, K), compiled with the weight frozen (prepacked) and
-- unfrozen, beside OpenBLAS (cblas_sgemm on the same operands), over a sweep of shapes: M 1..16 and 128,
-- K 64..4096, N 8..1024; microseconds per call (the best of 15 batches, the three timed in turn: us_per_call), the
-- worst frozen / unfrozen ratios, and the regions team.c held on one thread (`held`).
-- usage (from the repo root): luajit bench/frozen_sweep.lua [THREADS [K,K,...]] (the K to sweep; all by default);
-- `make bench-frozen` runs it on each ISA path.
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local ffi = require("ffi")

local openblas = require("openblas")
local blas, ROW_MAJOR, NO_TRANS, TRANS = openblas.lib, openblas.ROW_MAJOR, openblas.NO_TRANS, openblas.TRANS

local threads = tonumber(arg[1]) or 2
ds.set_num_threads(threads)
local MS = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 128 }
local KS = { 64, 256, 1024, 2400, 4096 }
if arg[2] then   -- a reduced sweep: these K only
  KS = {}
  for k in arg[2]:gmatch("%d+") do KS[#KS + 1] = tonumber(k) end
end
local NS = { 8, 32, 64, 256, 1024 }

-- calls per timed batch of fn: enough for ~0.5 ms
local function batch_size(fn)
  fn()
  local t0, n = ds.clock(), 0
  repeat fn(); n = n + 1 until ds.clock() - t0 > 0.0005
  return n
end

-- each function's own timing loop (stats.lua: a loop shared by several closures slows the ones timed later)
local LOOP = "local fn, n = ...; for _ = 1, n do fn() end"

-- microseconds per call of each function in fns: ROUNDS rounds, each timing one batch of every function in turn
-- (the order reversed every other round), the best batch of each. Other processes on the host only ever add time
-- to a batch, and both variants face them alike; a median of a few samples per variant, taken one variant after
-- the other, put frozen above unfrozen in ~30 of 425 shapes when a busy host slowed one variant's samples.
local ROUNDS = 15
local function us_per_call(fns)
  local n, loops, best = {}, {}, {}
  for i, fn in ipairs(fns) do
    n[i], loops[i], best[i] = batch_size(fn), assert(loadstring(LOOP, "=timing loop")), math.huge
  end
  for r = 1, ROUNDS do
    for j = 1, #fns do
      local i = r % 2 == 1 and j or #fns + 1 - j
      local t0 = ds.clock()
      loops[i](fns[i], n[i])
      best[i] = math.min(best[i], (ds.clock() - t0) / n[i] * 1e6)
    end
  end
  return best
end

local info = ds.info()
print(string.format("# frozen sweep: ISA %s, %d threads, OpenBLAS core %s", info.isa, threads, info.blas_core))
print("M\tK\tN\tfrozen_us\tunfrozen_us\tblas_us\tfrozen/unfrozen\tfrozen/blas\theld")
local worst, slower, held_total = { ratio = 0 }, 0, 0
for _, K in ipairs(KS) do
  for _, N in ipairs(NS) do
    ds.manual_seed(0)
    local W, b = ds.randn(N, K), ds.randn(N)
    local function f(x) return ds.matmul(x, W:t()) + b end
    for _, M in ipairs(MS) do
      local x = ds.randn(M, K)
      local spec = { ds.spec({ M, K }) }
      local frozen, unfrozen = ds.compile(f, spec, { freeze = true }), ds.compile(f, spec)
      local c = ds.empty(M, N)
      local px, pw = ffi.cast("float *", x:data_ptr()), ffi.cast("float *", W:data_ptr())
      local pc = ffi.cast("float *", c:data_ptr())
      -- a region held on one thread by team.c (a worker starting late) shows in `held`
      local held0 = ds.info().starved_regions
      local t = us_per_call({ function() return frozen(x) end, function() return unfrozen(x) end, function()
        blas.cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, M, N, K, 1, px, K, pw, K, 0, pc, N)
      end })
      local t_frozen, t_unfrozen, t_blas = t[1], t[2], t[3]
      local held = ds.info().starved_regions - held0
      held_total = held_total + held
      local r = t_frozen / t_unfrozen
      if r > 1 then slower = slower + 1 end
      if r > worst.ratio then worst = { ratio = r, M = M, K = K, N = N } end
      print(string.format("%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d", M, K, N, t_frozen, t_unfrozen, t_blas, r,
        t_frozen / t_blas, held))
    end
  end
end
print(string.format("# frozen slower than unfrozen in %d of %d shapes; worst frozen/unfrozen %.2f at M %d K %d N %d; "
  .. "%d regions held on one thread during the sweep", slower, #MS * #KS * #NS, worst.ratio, worst.M or 0, worst.K or 0,
  worst.N or 0, held_total))
