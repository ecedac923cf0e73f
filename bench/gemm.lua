-- bench/gemm.lua: f32 GEMM GFLOP/s (median) for square n x n: ds.matmul and cblas_sgemm called directly (FFI).
local ds = require("ds")
local stats = require("stats")
local ffi = require("ffi")

ffi.cdef [[
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);
]]
-- the very library libds.so is linked against (same path, so the same loaded instance and thread pool)
local blas = ffi.load("/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0")
local ROW_MAJOR, NO_TRANS = 101, 111
-- ds returns a new output per call; large outputs go back to its caching allocator when the Lua GC runs,
-- which it does once ~64 MiB of them are garbage. Until then each call writes fresh pages (page faults),
-- so both sides are timed in steady state: after at least this many bytes of outputs.
local WARM_BYTES = 256 * 2 ^ 20

local function sample(fn, flop, reps)
  local t0 = ds.clock()
  for _ = 1, reps do fn() end
  return flop * reps / (ds.clock() - t0) / 1e9
end

-- ds and OpenBLAS samples alternate, so a change in clock or load hits both alike
return function(opts)
  local samples = opts.samples or 7
  local out = {}
  for _, n in ipairs(opts.sizes) do
    ds.manual_seed(0)
    local a, b, c = ds.rand(n, n), ds.rand(n, n), ds.empty(n, n)
    local pa, pb, pc = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr()), ffi.cast("float *", c:data_ptr())
    local flop = 2 * n ^ 3
    local reps = math.max(1, math.floor(2e9 / flop))
    local fds = function() return a:matmul(b) end
    local fblas = function() blas.cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, n, n, n, 1, pa, n, pb, n, 0, pc, n) end
    local warm = math.max(3, math.ceil(WARM_BYTES / (4 * n * n)))
    for _ = 1, warm do fds(); fblas() end
    local rds, rblas = {}, {}
    for s = 1, samples do
      rds[s] = sample(fds, flop, reps)
      rblas[s] = sample(fblas, flop, reps)
    end
    out[n] = { ds = stats.median(rds), blas = stats.median(rblas) }
  end
  return out
end
