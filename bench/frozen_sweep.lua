-- bench/frozen_sweep.lua: x (M, K) @ W^T + b for W (N, K), compiled with the weight frozen (prepacked) and
-- unfrozen, beside OpenBLAS (cblas_sgemm on the same operands), over a sweep of shapes: M 1..16 and 128,
-- K 64..4096, N 8..1024; microseconds per call (the best of 15 batches, the three timed in turn: us_per_call), the
-- worst frozen / unfrozen ratios, unfrozen against OpenBLAS for M <= 16 (how many shapes it matches, the geometric
-- mean and worst ratio), and the regions team.c held on one thread (`held`). A shape where frozen came out
-- slower is timed again (retime) before it counts, and its two GEMM kernels are timed alone, so a slower kernel
-- shows apart from per-call overhead and noise.
-- usage (from the repo root): luajit bench/frozen_sweep.lua [THREADS [K,K,...]] (the K to sweep; all by default);
-- `make bench-frozen` runs it on each ISA path.
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local ffi = require("ffi")

local C = require("sgemm_kernels")
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

local us_per_call = require("stats").us_per_call

-- A shape where frozen came out slower, timed again (up to RETIMES times, each with both functions compiled afresh:
-- new plans, new buffers): frozen against unfrozen alone, after a full collection (both start with the same cached
-- output blocks), 31 rounds of batches of >= 3 ms. In the first pass OpenBLAS reads W as unfrozen does while frozen
-- reads its own packed copy, so with weights of 4-16 MiB the two that share W find it in the last-level cache more
-- often; calls of a few microseconds differ by less than a busy host's noise, and one run's state (where its
-- buffers landed, which traces LuaJIT kept) can slow one function for the whole run. The shape counts as slower
-- when every re-time finds frozen slower; the ratios of all of them are printed. Then the two GEMM kernels alone on
-- the same operands (ds_sgemm_packed_batch on W^T prepacked, ds_sgemm reading W^T in place: what the two plans
-- call, without the bias epilogue and the call's overhead), timed in turn the same way.
local RETIMES, RETIME_ROUNDS, RETIME_SECONDS = 3, 31, 0.003
local function retime(f, spec, x, W, M, K, N)
  local ratios, t = {}
  for _ = 1, RETIMES do
    local frozen, unfrozen = ds.compile(f, spec, { freeze = true }), ds.compile(f, spec)
    collectgarbage()
    t = us_per_call({ function() return frozen(x) end, function() return unfrozen(x) end }, RETIME_ROUNDS,
      RETIME_SECONDS)
    ratios[#ratios + 1] = string.format("%.2f", t[1] / t[2])
    if t[1] <= t[2] then break end
  end
  local bp, c = ds.empty(math.ceil(N / 32), K, 32), ds.empty(M, N)
  local pw, pbp = ffi.cast("float *", W:data_ptr()), ffi.cast("float *", bp:data_ptr())
  C.ds_sgemm_pack_b(K, N, pw, 1, K, pbp)   -- W^T (K, N): element (k, n) at W[n * K + k]
  local pa = ffi.new("const float *[1]", ffi.cast("float *", x:data_ptr()))
  local pc = ffi.new("float *[1]", ffi.cast("float *", c:data_ptr()))
  local k = us_per_call({ function() C.ds_sgemm_packed_batch(1, pa, pbp, pc, M, N, K, K, 1, N, 0) end,
    function() C.ds_sgemm(M, N, K, pa[0], K, 1, pw, 1, K, pc[0], N, 0) end }, RETIME_ROUNDS, RETIME_SECONDS)
  return t[1], t[2], table.concat(ratios, ","), k[1], k[2]
end

local info = ds.info()
print(string.format("# frozen sweep: ISA %s, %d threads, OpenBLAS core %s", info.isa, threads, info.blas_core))
-- retimed_*: the last re-time of a shape frozen came out slower in (`retimes`: the ratio of each), else "-"
print("M\tK\tN\tfrozen_us\tunfrozen_us\tblas_us\tfrozen/unfrozen\tfrozen/blas\theld\tretimed_frozen_us"
  .. "\tretimed_unfrozen_us\tretimes\tkernel_packed_us\tkernel_in_place_us")
local worst, flagged, slower, held_total = { ratio = 0 }, 0, {}, 0
-- unfrozen against OpenBLAS for M <= 16 (eager decoding and ds.generate's steps): shapes, wins, log-ratio sum, worst
local few = { shapes = 0, faster = 0, log_sum = 0, worst = { ratio = 0 } }
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
      if M <= 16 then
        local ub = t_unfrozen / t_blas
        few.shapes, few.log_sum = few.shapes + 1, few.log_sum + math.log(ub)
        if ub <= 1 then few.faster = few.faster + 1 end
        if ub > few.worst.ratio then few.worst = { ratio = ub, M = M, K = K, N = N } end
      end
      held_total = held_total + held
      local r, again = t_frozen / t_unfrozen, "-\t-\t-\t-\t-"
      if r > 1 then
        flagged = flagged + 1
        local rf, ru, ratios, kp, ki = retime(f, spec, x, W, M, K, N)
        again = string.format("%.2f\t%.2f\t%s\t%.2f\t%.2f", rf, ru, ratios, kp, ki)
        r = rf / ru
        if r > 1 then slower[#slower + 1] = string.format("%d x %d x %d %sx (kernels %.2f vs %.2f us)", M, K, N,
          ratios, kp, ki) end
      end
      if r > worst.ratio then worst = { ratio = r, M = M, K = K, N = N } end
      print(string.format("%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%s", M, K, N, t_frozen, t_unfrozen, t_blas,
        t_frozen / t_unfrozen, t_frozen / t_blas, held, again))
    end
  end
end
print(string.format("# frozen slower than unfrozen in %d of %d shapes (%d flagged by the first pass, re-timed); worst "
  .. "frozen/unfrozen %.2f at M %d K %d N %d (re-timed where flagged); %d regions held on one thread during the sweep",
  #slower, #MS * #KS * #NS, flagged, worst.ratio, worst.M or 0, worst.K or 0, worst.N or 0, held_total))
for _, line in ipairs(slower) do print("# slower: " .. line) end
print(string.format("# unfrozen vs OpenBLAS, M <= 16: unfrozen as fast or faster in %d of %d shapes; geometric mean "
  .. "unfrozen/blas %.2f; worst %.2f at M %d K %d N %d", few.faster, few.shapes,
  math.exp(few.log_sum / math.max(few.shapes, 1)), few.worst.ratio, few.worst.M or 0, few.worst.K or 0,
  few.worst.N or 0))
