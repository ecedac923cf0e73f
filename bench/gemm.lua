-- bench/gemm.lua: f32 GEMM GFLOP/s (median) of ds.matmul, of ds's matmul kernel into a preallocated output and
-- of cblas_sgemm called directly (FFI), on the ISA path this process loaded: square n x n (a @ b) and the BERT
-- linear shapes (x (M,K) @ W^T, W (N,K)).
-- usage (from the repo root): luajit bench/gemm.lua THREADS [SAMPLES] -> one JSON line
--   {"isa": ..., "threads": N, "rows": [{"label", "M", "K", "N", "ds", "ds_out", "blas"}, ...]}
-- bench/run.lua runs it on 1 and on THREADS threads, as it is and with DS_ISA=avx2.
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local D = require("ds.dispatch")
local stats = require("stats")
local ffi = require("ffi")
local cjson = require("cjson")

local openblas = require("openblas")
local blas, ROW_MAJOR, NO_TRANS, TRANS = openblas.lib, openblas.ROW_MAJOR, openblas.NO_TRANS, openblas.TRANS

-- { label, M, K, N, weight }: weight = b is W^T for a W (N, K), as a linear layer multiplies
local SHAPES = {}
for _, n in ipairs { 64, 128, 256, 512, 1024, 2048 } do SHAPES[#SHAPES + 1] = { "n = " .. n, n, n, n, false } end
for _, M in ipairs { 1, 14, 128 } do
  for _, KN in ipairs { { 256, 1024 }, { 1024, 256 }, { 1024, 1024 }, { 256, 256 } } do
    local K, N = KN[1], KN[2]
    SHAPES[#SHAPES + 1] = { string.format("BERT %dx%d @ (%dx%d)^T", M, K, N, K), M, K, N, true }
  end
end

-- ds returns a new output per call; large outputs go back to its caching allocator when the Lua GC runs,
-- which it does once ~64 MiB of them are garbage. Until then each call writes fresh pages (page faults),
-- so both sides are timed in steady state: after at least this many bytes of outputs (or 20000 calls).
local WARM_BYTES = 256 * 2 ^ 20
local SAMPLE_SECONDS = 0.05

local function sample(fn, flop, reps)
  local t0 = ds.clock()
  for _ = 1, reps do fn() end
  return flop * reps / (ds.clock() - t0) / 1e9
end

-- ds's matmul kernel (what ds.matmul runs) writing into a preallocated output, as cblas_sgemm does below: the
-- product without ds.matmul's per-call output, which is fresh memory (outputs return to the allocator only when
-- the Lua GC collects them, a full collection per ~64 MiB of them)
local matmul_kernel = D.kernel(D.by_name.matmul, "f32")
local kernel_args, no_attrs = ffi.new("ds_tensor*[3]"), ffi.new("double[1]")

-- ds, ds into a preallocated output and OpenBLAS samples alternate, so a change in clock or load hits all alike
local function measure(shape, samples)
  local M, K, N, weight = shape[2], shape[3], shape[4], shape[5]
  ds.manual_seed(0)
  local a, c = ds.rand(M, K), ds.empty(M, N)
  local w = weight and ds.rand(N, K) or ds.rand(K, N)
  local b = weight and w:t() or w
  local pa, pw, pc = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", w:data_ptr()), ffi.cast("float *", c:data_ptr())
  local flop = 2 * M * N * K
  local fds = function() return a:matmul(b) end
  local out = ds.empty(M, N)
  local fds_out = function()
    kernel_args[0], kernel_args[1], kernel_args[2] = out._c, a._c, b._c
    if matmul_kernel(kernel_args, no_attrs) ~= 0 then error("bench/gemm.lua: the matmul kernel failed") end
  end
  local fblas = weight
    and function() blas.cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, M, N, K, 1, pa, K, pw, K, 0, pc, N) end
    or function() blas.cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, M, N, K, 1, pa, K, pw, N, 0, pc, N) end
  local warm = math.min(20000, math.max(3, math.ceil(WARM_BYTES / (4 * M * N))))
  for _ = 1, warm do fds(); fds_out(); fblas() end
  local t0 = ds.clock()
  fds()
  local reps = math.max(1, math.floor(SAMPLE_SECONDS / math.max(ds.clock() - t0, 1e-7)))
  local rds, rout, rblas = {}, {}, {}
  for s = 1, samples do
    rds[s] = sample(fds, flop, reps)
    rout[s] = sample(fds_out, flop, reps)
    rblas[s] = sample(fblas, flop, reps)
  end
  return { label = shape[1], M = M, K = K, N = N, ds = stats.median(rds), ds_out = stats.median(rout),
           blas = stats.median(rblas) }
end

local threads, samples = tonumber(arg[1]) or 1, tonumber(arg[2]) or 7
ds.set_num_threads(threads)
local rows = {}
for i, shape in ipairs(SHAPES) do rows[i] = measure(shape, samples) end
print(cjson.encode({ isa = ds.info().isa, threads = threads, rows = rows }))
