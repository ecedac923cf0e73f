-- bench/sgemm_kernels.lua: libds's f32 GEMM entry points for the benchmarks that time the kernels alone (the
-- products a compiled plan runs, without its epilogue and call): returns the library handle with them declared.
local ffi = require("ffi")
local C = require("ds.ffi").C

ffi.cdef [[
void ds_sgemm_pack_b(int64_t K, int64_t N, const float *B, int64_t brs, int64_t bcs, float *bp);
int ds_sgemm_packed_batch(int64_t nbatch, const float *const *A, const float *bp, float *const *C, int64_t M,
                          int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t ldc, int accumulate);
int ds_sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
             int64_t bcs, float *C, int64_t ldc, int accumulate);
]]
return C
