-- bench/small_gemm_sweep.lua: relu(x (M, K) @ W^T + b) for W (N, K), LeNet-5's classifier layers and their
-- neighbours (M 64, 256, 1024; K 84, 120, 400; N 10, 84, 120): GFLOP/s of the compiled graph with W frozen
-- (prepacked) and unfrozen, of ds's two GEMM kernels alone (ds_sgemm_packed_batch on the packed W^T, ds_sgemm reading
-- W^T in place: the products the two plans run, without the epilogue and the call) and of OpenBLAS (cblas_sgemm on
-- the same operands, without the epilogue). Each figure is the best of 15 batches, the five timed in turn.
-- usage (from the repo root): luajit bench/small_gemm_sweep.lua [THREADS]   (prints a table; 1 thread by default)
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local ffi = require("ffi")

local C = require("sgemm_kernels")
local openblas = require("openblas")
local blas, ROW_MAJOR, NO_TRANS, TRANS = openblas.lib, openblas.ROW_MAJOR, openblas.NO_TRANS, openblas.TRANS

local threads = tonumber(arg[1]) or 1
ds.set_num_threads(threads)
local MS, KS, NS = { 64, 256, 1024 }, { 84, 120, 400 }, { 10, 84, 120 }
local ROUNDS, SECONDS = 15, 0.002

local function us_per_call(fns) return require("stats").us_per_call(fns, ROUNDS, SECONDS) end

local info = ds.info()
print(string.format("# small GEMM sweep, relu(x @ W^T + b), GFLOP/s: ISA %s, %d threads, OpenBLAS core %s", info.isa,
  threads, info.blas_core))
print("M\tK\tN\tfrozen\tunfrozen\tkernel_packed\tkernel_in_place\topenblas\theld")
for _, M in ipairs(MS) do
  for _, K in ipairs(KS) do
    for _, N in ipairs(NS) do
      ds.manual_seed(0)
      local W, b, x = ds.randn(N, K), ds.randn(N), ds.randn(M, K)
      local function f(t) return ds.relu(ds.matmul(t, W:t()) + b) end
      local spec = { ds.spec({ M, K }) }
      local frozen, unfrozen = ds.compile(f, spec, { freeze = true }), ds.compile(f, spec)
      local c, bp = ds.empty(M, N), ds.empty(math.ceil(N / 32), K, 32)
      local px, pw = ffi.cast("float *", x:data_ptr()), ffi.cast("float *", W:data_ptr())
      local pc, pbp = ffi.cast("float *", c:data_ptr()), ffi.cast("float *", bp:data_ptr())
      C.ds_sgemm_pack_b(K, N, pw, 1, K, pbp)   -- W^T (K, N): element (k, n) at W[n * K + k]
      local pa, pcs = ffi.new("const float *[1]", px), ffi.new("float *[1]", pc)
      local held0 = ds.info().starved_regions
      local t = us_per_call {
        function() return frozen(x) end,
        function() return unfrozen(x) end,
        function() C.ds_sgemm_packed_batch(1, pa, pbp, pcs, M, N, K, K, 1, N, 0) end,
        function() C.ds_sgemm(M, N, K, px, K, 1, pw, 1, K, pc, N, 0) end,
        function() blas.cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, M, N, K, 1, px, K, pw, K, 0, pc, N) end,
      }
      local gf = {}
      for i, us in ipairs(t) do gf[i] = string.format("%.1f", 2 * M * K * N / us / 1e3) end
      print(string.format("%d\t%d\t%d\t%s\t%d", M, K, N, table.concat(gf, "\t"), ds.info().starved_regions - held0))
    end
  end
end
