-- bench/frozen_sweep.lua: x (M, K) @ W^T + b for W (N, K), compiled with the weight frozen (prepacked) and
-- unfrozen, beside OpenBLAS (cblas_sgemm on the same operands), over a sweep of shapes: M 1..16 and 128,
-- K 64..4096, N 8..1024; microseconds per call (median of samples, frozen and unfrozen in turn, the better of two
-- each), the worst frozen / unfrozen ratios, and the regions team.c held on one thread (`held`).
-- usage (from the repo root): luajit bench/frozen_sweep.lua [THREADS]; `make bench-frozen` runs it on each ISA path.
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")
local ffi = require("ffi")

local openblas = require("openblas")
local blas, ROW_MAJOR, NO_TRANS, TRANS = openblas.lib, openblas.ROW_MAJOR, openblas.NO_TRANS, openblas.TRANS

local threads = tonumber(arg[1]) or 2
ds.set_num_threads(threads)
local MS = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 128 }
local KS = { 64, 256, 1024, 2400, 4096 }
local NS = { 8, 32, 64, 256, 1024 }

-- median microseconds per call of fn, over samples of ~5 ms each
local function us_per_call(fn)
  fn()
  local t0, n = ds.clock(), 0
  repeat fn(); n = n + 1 until ds.clock() - t0 > 0.002
  return stats.median_per_call_us(fn, math.max(1, math.floor(n * 2.5)), 5)
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
      local px, pw, pc = ffi.cast("float *", x:data_ptr()), ffi.cast("float *", W:data_ptr()), ffi.cast("float *", c:data_ptr())
      -- frozen and unfrozen measured in turn, twice each (the better of each pair), so neither always runs first
      -- after a compile; a region held on one thread by team.c (a worker starting late) shows in `held`
      local held0 = ds.info().starved_regions
      local t_frozen = us_per_call(function() return frozen(x) end)
      local t_unfrozen = us_per_call(function() return unfrozen(x) end)
      t_unfrozen = math.min(t_unfrozen, us_per_call(function() return unfrozen(x) end))
      t_frozen = math.min(t_frozen, us_per_call(function() return frozen(x) end))
      local held = ds.info().starved_regions - held0
      local t_blas = us_per_call(function()
        blas.cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, M, N, K, 1, px, K, pw, K, 0, pc, N)
      end)
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
