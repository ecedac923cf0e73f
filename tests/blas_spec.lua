-- tests/blas_spec.lua: matmul forward against naive loops and OpenBLAS (1-D, 2-D, batched, broadcast, strided,
-- f32/f64, K blocks), the same bits from ds's own GEMM whatever the rows, batch, strides and threads, shape errors.
local ds = require("ds")
local H = require("helpers")

-- naive (..., M, K) @ (..., K, N) in double over the operands' values; a, b >= 2-D with equal batch dims
local function naive(a, b)
  local A, B = a:astype("f64"):contiguous(), b:astype("f64"):contiguous()
  local M, K, N = a:size(-2), a:size(-1), b:size(-1)
  local batch = math.floor(a:numel() / (M * K))
  local av, bv = A:reshape(-1):totable(), B:reshape(-1):totable()
  local out = {}
  for t = 0, batch - 1 do
    for i = 0, M - 1 do
      for j = 0, N - 1 do
        local s = 0
        for k = 0, K - 1 do s = s + av[t * M * K + i * K + k + 1] * bv[t * K * N + k * N + j + 1] end
        out[#out + 1] = s
      end
    end
  end
  return out
end

-- |got - ref| <= tolerance for a K-term f32 (or f64) dot product of values in [-1, 1]
local function check(got, a, b, ref)
  local K = a:size(-1)
  local eps = got.dtype == "f64" and 2 ^ -52 or 2 ^ -23
  H.close(got, ref or naive(a, b), 0, 2 * K * eps + 1e-30)
end

local function rnd(...) return ds.rand(...) * 2 - 1 end

describe("matmul", function()
  before_each(function() ds.manual_seed(7) end)

  it("2-D products of many shapes (micro-tile tails, several K blocks) match a naive loop", function()
    for _, s in ipairs { { 1, 1, 1 }, { 3, 5, 7 }, { 7, 33, 17 }, { 13, 64, 40 }, { 6, 16, 16 }, { 14, 256, 70 },
                         { 100, 37, 129 }, { 5, 9, 1 }, { 1, 300, 33 }, { 15, 600, 33 }, { 29, 257, 65 } } do
      local M, K, N = s[1], s[2], s[3]
      local a, b = rnd(M, K), rnd(K, N)
      local y = a:matmul(b)
      assert.same({ M, N }, y.shape)
      check(y, a, b)
    end
  end)

  it("takes transposed, row-strided and expanded operands without copying them first", function()
    local w = rnd(40, 24)                       -- a weight (out, in) used as w^T
    local x = rnd(9, 30):narrow(2, 3, 24)       -- rows with stride 30
    check(x:matmul(w:t()), x, w:t())
    local at = rnd(24, 9):t()                   -- transposed a
    check(at:matmul(w:t()), at, w:t())
    local row = rnd(1, 24):expand(5, 24)        -- stride-0 rows
    check(row:matmul(w:t()), row, w:t())
    local bs = rnd(24, 80):narrow(2, 5, 40)     -- b with row stride 80
    check(x:matmul(bs), x, bs)
    local col = rnd(24, 3):narrow(2, 2, 1):t()  -- one row whose elements are 3 apart
    assert.same({ 1, 3 }, col:stride())
    check(col:matmul(w:t()), col, w:t())
    local cols = rnd(24, 5):t()                 -- rows with column stride 5
    check(cols:matmul(w:t()), cols, w:t())
  end)

  it("packs every operand layout right: k tails, partial row blocks and strips, both strides non-unit", function()
    for _, s in ipairs { { 13, 19, 33 }, { 17, 45, 47 }, { 29, 7, 9 }, { 3, 261, 70 }, { 15, 8, 31 } } do
      local M, K, N = s[1], s[2], s[3]
      local a, w = rnd(M, K), rnd(N, K)
      check(a:matmul(w:t()), a, w:t())                   -- both k-contiguous: transposed in registers
      local at, b = rnd(K, M):t(), rnd(K, N)
      check(at:matmul(b), at, b)                         -- both row-contiguous: copied k row by k row
      local as, bs = rnd(M, K, 2):select(3, 2), rnd(K, N, 3):select(3, 1)
      assert.same({ 2 * K, 2 }, as:stride())
      check(as:matmul(bs), as, bs)                       -- neither stride 1: element by element
    end
  end)

  it("batched with broadcasting, and 1-D operands, match the naive loop", function()
    local a, b = rnd(2, 1, 5, 6), rnd(3, 6, 4)
    local y = a:matmul(b)
    assert.same({ 2, 3, 5, 4 }, y.shape)
    check(y, a:expand(2, 3, 5, 6), b:reshape(1, 3, 6, 4):expand(2, 3, 6, 4))
    local shared = rnd(4, 7, 10):matmul(rnd(10, 3))   -- batch folded into M
    assert.same({ 4, 7, 3 }, shared.shape)
    local v, m = rnd(6), rnd(6, 5)
    check(v:matmul(m), v:reshape(1, 6), m)
    check(m:t():matmul(v), m:t(), v:reshape(6, 1))
    H.close(v:matmul(v), naive(v:reshape(1, 6), v:reshape(6, 1)), 0, 1e-6)
    assert.same({}, v:matmul(v).shape)
  end)

  it("f64 products match to double precision", function()
    local a, b = rnd(7, 19):astype("f64"), rnd(19, 11):astype("f64")
    check(a:matmul(b), a, b)
    check(a:matmul(b:t():contiguous():t()), a, b)
  end)

  it("long K and wide N (several K blocks and B panels) are still right", function()
    local a, b = rnd(2, 2100), rnd(2100, 2100)
    local y = a:matmul(b)
    local cols = b:narrow(2, 1000, 3):contiguous()
    check(y:narrow(2, 1000, 3), a, cols, naive(a, cols))
    local a2, b2 = rnd(3, 1500), rnd(1500, 20)
    check(a2:matmul(b2), a2, b2)
  end)

  it("agrees with OpenBLAS (the reference) on f32 and f64 products of many shapes and layouts", function()
    local ffi = require("ffi")
    ffi.cdef [[
    void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);
    void cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha, const double *a, int lda,
                     const double *b, int ldb, double beta, double *c, int ldc);
    ]]
    local blas = ffi.load("/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0")
    for _, s in ipairs { { 1, 1024, 1024 }, { 14, 256, 1024 }, { 128, 1024, 256 }, { 300, 1100, 40 }, { 33, 517, 95 } } do
      local M, K, N = s[1], s[2], s[3]
      for _, dt in ipairs { "f32", "f64" } do
        local a, w = rnd(M, K):astype(dt), rnd(N, K):astype(dt)   -- w used as w^T, as linear does
        local ref = ds.empty(M, N):astype(dt)
        local gemm, T = dt == "f32" and blas.cblas_sgemm or blas.cblas_dgemm, dt == "f32" and "float *" or "double *"
        gemm(101, 111, 112, M, N, K, 1, ffi.cast(T, a:data_ptr()), K, ffi.cast(T, w:data_ptr()), K, 0, ffi.cast(T, ref:data_ptr()), N)
        local eps = dt == "f64" and 2 ^ -52 or 2 ^ -23
        H.close(a:matmul(w:t()), ref, 0, 4 * K * eps)
      end
    end
  end)

  it("ds's sgemm: a row's result does not depend on M or on the other rows (bitwise)", function()
    for _, s in ipairs { { 37, 300, 70 }, { 14, 256, 1024 }, { 128, 64, 17 } } do
      local M, K, N = s[1], s[2], s[3]
      local a, w = rnd(M, K), rnd(N, K)
      local y = a:matmul(w:t())
      for _, i in ipairs { 1, 2, 7, M } do
        assert.is_true(H.bitwise(a:narrow(1, i, 1):matmul(w:t()), y:narrow(1, i, 1)), "row " .. i)
      end
      assert.is_true(H.bitwise(a:narrow(1, 3, 5):matmul(w:t()), y:narrow(1, 3, 5)))
      -- a frozen weight (W^T stored row-major): up to 8 rows take the row kernel, more the tiles
      local wt = w:t():contiguous()
      assert.is_true(H.bitwise(a:matmul(wt), y))
      for m = 1, 8 do
        assert.is_true(H.bitwise(a:narrow(1, 2, m):matmul(wt), y:narrow(1, 2, m)), m .. " rows, frozen weight")
      end
    end
  end)

  it("the same bits for a row alone and in a batch with K > 1024, and for strided and contiguous operands", function()
    local a, w = rnd(9, 1500), rnd(70, 1500)
    local y = a:matmul(w:t())
    assert.is_true(H.bitwise(a:narrow(1, 1, 1):matmul(w:t()), y:narrow(1, 1, 1)))
    assert.is_true(H.bitwise(a:narrow(1, 4, 6):matmul(w:t()), y:narrow(1, 4, 6)))
    assert.is_true(H.bitwise(a:matmul(w:t():contiguous()), y))
    assert.is_true(H.bitwise(a:t():contiguous():t():matmul(w:t()), y))
    local ad, wd = a:astype("f64"), w:astype("f64")
    assert.is_true(H.bitwise(ad:narrow(1, 2, 1):matmul(wd:t()), ad:matmul(wd:t()):narrow(1, 2, 1)))
  end)

  it("x @ W^T of up to 8 rows with W read in place (the transposed row kernel): tails of rows, columns and k", function()
    for _, s in ipairs { { 1, 1 }, { 3, 9 }, { 16, 8 }, { 5, 20 }, { 17, 33 }, { 35, 41 }, { 36, 49 }, { 64, 100 },
                         { 259, 77 }, { 1030, 130 } } do
      local K, N = s[1], s[2]
      local big, w = rnd(20, K), rnd(N, K)
      local tiles = big:matmul(w:t())   -- 20 rows: the micro-kernel's tiles
      check(tiles, big, w:t())
      local wt = w:t():contiguous()     -- W^T row-major: the row kernel reading it as a frozen weight
      for m = 1, 8 do
        local a, tag = big:narrow(1, 2, m), m .. " x " .. K .. " x " .. N
        local y = a:matmul(w:t())
        assert.is_true(H.bitwise(y, tiles:narrow(1, 2, m)), tag .. " against the tiles")
        assert.is_true(H.bitwise(y, a:matmul(wt)), tag .. " against W^T row-major")
      end
      local strided = big:narrow(1, 4, 5):t():contiguous():t()   -- a with unit row stride
      assert.is_true(H.bitwise(strided:matmul(w:t()), tiles:narrow(1, 4, 5)), "strided a, K " .. K .. " N " .. N)
    end
  end)

  it("1 and 2 threads agree bitwise for f32 and f64 products of every size", function()
    local before = ds.get_num_threads()
    for _, s in ipairs { { 300, 1100, 40 }, { 8, 1024, 2100 }, { 200, 256, 300 }, { 1, 1024, 1024 } } do
      for _, dt in ipairs { "f32", "f64" } do
        local a, w = rnd(s[1], s[2]):astype(dt), rnd(s[3], s[2]):astype(dt)
        ds.set_num_threads(1)
        local one = a:matmul(w:t())
        ds.set_num_threads(2)
        local two = a:matmul(w:t())
        ds.set_num_threads(before)
        assert.is_true(H.bitwise(one, two), dt .. " " .. table.concat(s, "x"))
      end
    end
  end)

  it("ds's sgemm: batched results equal per-matrix products, and 1 and 2 threads agree bitwise", function()
    local a, b = rnd(3, 50, 64), rnd(3, 64, 90)
    local y = a:matmul(b)
    for t = 1, 3 do assert.is_true(H.bitwise(y[t], a[t]:matmul(b[t]))) end
    local x, w = rnd(200, 256), rnd(300, 256)
    local before = ds.get_num_threads()
    ds.set_num_threads(1)
    local one = x:matmul(w:t())
    ds.set_num_threads(2)
    local two = x:matmul(w:t())
    ds.set_num_threads(before)
    assert.is_true(H.bitwise(one, two))
  end)

  it("one strip of B (N <= 32) against many rows, W^T packed once or W read in place: each matrix's bits in a batch, "
    .. "1 and 2 threads bitwise", function()
    local a, w, b = rnd(3, 300, 200), rnd(3, 20, 200), rnd(3, 200, 20)
    local before = ds.get_num_threads()
    for _, rhs in ipairs { w:transpose(2, 3), b } do
      ds.set_num_threads(1)
      local one = a:matmul(rhs)
      ds.set_num_threads(2)
      local two = a:matmul(rhs)
      ds.set_num_threads(before)
      assert.is_true(H.bitwise(one, two))
      for t = 1, 3 do
        assert.is_true(H.bitwise(one[t], a[t]:matmul(rhs[t])))
        check(one[t], a[t], rhs[t])
      end
    end
  end)

  it("eager x @ W without grad (dispatch's shortcut) gives the general path's bits, shape and dtype", function()
    local cases = { { { 5, 7 }, { 3, 7 } }, { { 2, 4, 9 }, { 33, 9 } }, { { 1, 1 }, { 1, 1 } }, { { 0, 3 }, { 2, 3 } } }
    for _, c in ipairs(cases) do   -- x (..., M, K) @ W^T, W (N, K)
      for _, dt in ipairs { "f32", "f64" } do
        local a, w = rnd(c[1]):astype(dt), rnd(c[2]):astype(dt)
        local fast = a:matmul(w:t())
        local ag = a:clone():requires_grad_()
        local general = ag:matmul(w:t())   -- a grad-tracked operand takes dispatch's general path
        assert.equal(dt, fast.dtype)
        assert.same(general.shape, fast.shape)
        assert.is_true(H.bitwise(general, fast))
        general:sum():backward()
        assert.is_true(H.bitwise(ds.ones(fast.shape):astype(dt):matmul(w), ag.grad))
      end
      local ai, wi = (rnd(c[1]) * 50):astype("i64"), (rnd(c[2]) * 50):astype("i64")
      local yi = ai:matmul(wi:t())
      assert.equal("i64", yi.dtype)
      assert.is_true(H.bitwise(ai:astype("f64"):matmul(wi:astype("f64"):t()):astype("i64"), yi))
    end
  end)

  it("empty dims give empty or zero results", function()
    assert.same({ 0, 4 }, rnd(0, 3):matmul(rnd(3, 4)).shape)
    local z = ds.empty(2, 0):matmul(ds.empty(0, 3))
    assert.same({ { 0, 0, 0 }, { 0, 0, 0 } }, z:totable())
  end)

  it("names the op and the shapes when they do not match", function()
    H.raises(function() return rnd(2, 3):matmul(rnd(4, 5)) end, "matmul", "(2,3)", "(4,5)")
    H.raises(function() return rnd(2, 2, 3):matmul(rnd(3, 3, 4)) end, "matmul", "broadcast")
    H.raises(function() return ds.tensor(1):matmul(rnd(2)) end, "matmul", "1 dim")
    H.raises(function() return rnd(3):matmul(rnd(4)) end, "matmul", "(3)", "(4)")
  end)
end)
