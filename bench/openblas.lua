-- bench/openblas.lua: cblas_sgemm from the OpenBLAS libds.so links against (same path, so the same loaded
-- instance and thread pool), for benchmarks that time OpenBLAS beside ds.
local ffi = require("ffi")

ffi.cdef [[
void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);
]]

return {
  lib = ffi.load("/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0"),
  ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112,
}
