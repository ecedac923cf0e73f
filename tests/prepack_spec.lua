-- tests/prepack_spec.lua: constant weights prepacked for the GEMM (passes/prepack.lua, matmul_packed and
-- matmul_packed_ep over ds_pack_weight_f32's strips): the products give the bits of the unpacked weight (and of
-- eager) for row counts on both sides of the kernels' row paths, K over one block and N over strip tails;
-- batched and strided left operands; 1 and 2 threads (captured tensors are state: frozen here to be constants);
-- the pass shows in the IR and can be turned off; ds.save's plan file keeps unpacked weights; the kernels refuse
-- operands that do not match.
local ds = require("ds")
local H = require("helpers")
local D = require("ds.dispatch")
local fused_ops = require("ds.ops.fused")
local nn = ds.nn

describe("prepack", function()
  it("a frozen linear layer reads its packed weight and gives eager's bits for any rows, K and N", function()
    ds.manual_seed(3)
    -- long K against narrow N: the row kernel's strip-by-strip tail (a masked load past a prepacked weight once
    -- cost milliseconds); K over one block; N over strip tails
    for _, kn in ipairs { { 7, 5 }, { 256, 32 }, { 300, 47 }, { 600, 100 }, { 33, 1 }, { 2400, 32 }, { 4096, 8 },
      { 1024, 40 }, { 2400, 64 }, { 1100, 300 } } do
      local K, N = kn[1], kn[2]
      local lin = nn.Linear(K, N)
      local cg = ds.compile(lin, { ds.spec({ "rows", K }) }, { freeze = true })
      local ir = tostring(cg)
      assert.truthy(ir:find("matmul_packed", 1, true), ir)
      assert.are.equal(1, cg.stats.prepack)
      for _, rows in ipairs { 1, 3, 8, 9, 14, 15, 19, 29, 64, 130 } do
        local x = ds.randn(rows, K)
        local want = ds.no_grad(function() return lin(x) end)
        assert(H.bitwise(cg(x), want), string.format("K %d N %d rows %d", K, N, rows))
      end
    end
  end)

  it("gives eager's bits for every row count of the row kernel against each kind of column tail", function()
    ds.manual_seed(6)
    -- N past the last whole block: one vector whole or masked, two whole or masked, a strip masked (AVX2: 8
    -- floats a vector; 3 rows take whole strips, 5-6 rows 16 columns, 7-8 rows 8)
    for _, N in ipairs { 8, 16, 20, 24, 40, 48, 56, 72 } do
      local w = ds.randn(N, 70)
      local cg = ds.compile(function(x) return x:matmul(w:t()) end, { ds.spec({ "rows", 70 }) }, { freeze = true })
      assert.truthy(tostring(cg):find("matmul_packed", 1, true))
      for rows = 1, 8 do
        local x = ds.randn(rows, 70)
        assert(H.bitwise(cg(x), x:matmul(w:t())), string.format("N %d rows %d", N, rows))
      end
    end
  end)

  it("few rows against a wide weight, and rows in chunks against a narrow one, give eager's bits on every path",
    function()
    -- a wide weight: the row kernel (AVX2: 7-8 rows in two groups); a narrow one (one strip): in 8-row chunks
    local script = [[
      local ds = require("ds")
      ds.manual_seed(5)
      local ffi = require("ffi")
      local h = 0
      for _, case in ipairs({ { 300, { 3, 4, 5, 6, 7, 8, 9 } }, { 24, { 9, 17, 130 } } }) do
        local w = ds.randn(1024, case[1])
        local cg = ds.compile(function(x) return x:matmul(w) end, { ds.spec({ "rows", 1024 }) },
          { freeze = true, convert = false })
        assert(tostring(cg):find("matmul_packed", 1, true), "not prepacked")
        for _, rows in ipairs(case[2]) do
          local x = ds.randn(rows, 1024)
          local y = cg(x)
          assert(ds.equal(y, x:matmul(w)), rows .. " rows: frozen differs from eager")
          local p = ffi.cast("uint8_t *", y:data_ptr())
          for i = 0, y:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
        end
      end
      io.write(ds.info().isa, " ", h)
    ]]
    H.same_bits_on_every_path(script)
  end)

  it("a weight past the caches against 1-8 rows (the row kernel by k blocks on AVX2) gives eager's bits on every path",
    function()
    -- K x N over sgemm.c's ROWS_GROUPS_MAX floats (AVX2's 7-8 rows in one group) and over SGEMM_ROWS_BIG in each
    -- thread's half on 2 (the columns split in 32-column strips), K not a multiple of the 256-k block, N with a
    -- strip tail; a 64-column weight (7-8 rows in two groups) split between 2 threads
    local script = [[
      local ds = require("ds")
      ds.manual_seed(8)
      local ffi = require("ffi")
      local h = 0
      for _, threads in ipairs({ 1, 2 }) do
        ds.set_num_threads(threads)
        for _, kn in ipairs({ { 4100, 1030 }, { 2400, 64 } }) do
          local w = ds.randn(kn[2], kn[1])
          local cg = ds.compile(function(x) return x:matmul(w:t()) end, { ds.spec({ "rows", kn[1] }) },
            { freeze = true, convert = false })
          assert(tostring(cg):find("matmul_packed", 1, true), "not prepacked")
          for rows = 1, 8 do
            local x = ds.randn(rows, kn[1])
            local y = cg(x)
            assert(ds.equal(y, x:matmul(w:t())), rows .. " rows: frozen differs from eager")
            local p = ffi.cast("uint8_t *", y:data_ptr())
            for i = 0, y:numel() * 4 - 1, 4 do h = (h * 31 + p[i] + p[i + 3] * 7) % 2147483647 end
          end
        end
      end
      io.write(ds.info().isa, " ", h)
    ]]
    H.same_bits_on_every_path(script)
  end)

  it("gives the unpacked bits with {prepack = false}, on 1 and 2 threads, with a plain matmul too", function()
    ds.manual_seed(4)
    local w = ds.randn(200, 70)
    local function f(x) return x:matmul(w) end
    local specs = { ds.spec({ "rows", 200 }) }
    local packed = ds.compile(f, specs, { freeze = true })
    local plain = ds.compile(f, specs, { freeze = true, prepack = false })
    assert.truthy(tostring(packed):find("matmul_packed", 1, true))
    assert.falsy(tostring(plain):find("matmul_packed", 1, true))
    local n0 = ds.get_num_threads()
    for _, rows in ipairs { 2, 17, 150 } do
      local x = ds.randn(rows, 200)
      local want = x:matmul(w)
      for _, nth in ipairs { 1, 2 } do
        ds.set_num_threads(nth)
        assert(H.bitwise(packed(x), want), rows .. " rows, " .. nth .. " threads")
        assert(H.bitwise(plain(x), want))
      end
      ds.set_num_threads(n0)
    end
  end)

  it("takes batched and strided left operands", function()
    ds.manual_seed(5)
    local w = ds.randn(40, 36)
    local cg = ds.compile(function(x) return x:transpose(2, 3):matmul(w) end, { ds.spec({ 3, 40, "t" }) },
      { freeze = true })
    assert.truthy(tostring(cg):find("matmul_packed", 1, true))
    for _, t in ipairs { 1, 12, 33 } do
      local x = ds.randn(3, 40, t)
      assert(H.bitwise(cg(x), x:transpose(2, 3):matmul(w)), t .. " rows")
    end
    local cb = ds.compile(function(x) return x:matmul(w) end, { ds.spec({ 2, "t", 40 }) }, { freeze = true })
    local x = ds.randn(2, 21, 40)
    assert(H.bitwise(cb(x), x:matmul(w)))
  end)

  it("shares one packed constant between products of the same weight", function()
    local w = ds.randn(30, 20)
    local cg = ds.compile(function(x, y) return x:matmul(w) + y:matmul(w) end,
      { ds.spec({ 4, 30 }), ds.spec({ 4, 30 }) }, { freeze = true })
    assert.are.equal(2, cg.stats.prepack)
    local _, n = tostring(cg):gsub("const %%%d+ = packed", "")
    assert.are.equal(1, n, tostring(cg))
    local x, y = ds.randn(4, 30), ds.randn(4, 30)
    assert(H.bitwise(cg(x, y), x:matmul(w) + y:matmul(w)))
  end)

  it("leaves empty weights unpacked (K or N of 0) with eager's results", function()
    for _, kn in ipairs { { 0, 5 }, { 5, 0 } } do
      local w = ds.randn(kn[1], kn[2])
      local cg = ds.compile(function(x) return x:matmul(w) end, { ds.spec({ 3, kn[1] }) }, { freeze = true })
      assert.falsy(tostring(cg):find("matmul_packed", 1, true))
      local x = ds.randn(3, kn[1])
      assert(H.bitwise(cg(x), x:matmul(w)))
    end
  end)

  it("leaves f64 products and weights that are state alone", function()
    local w = ds.randn(8, 8):astype("f64")
    local cg = ds.compile(function(x) return x:matmul(w) end, { ds.spec({ 2, 8 }, "f64") }, { freeze = true })
    assert.falsy(tostring(cg):find("matmul_packed", 1, true))
    local lin = nn.Linear(8, 3)
    local unfrozen = ds.compile(lin, { ds.spec({ 2, 8 }) })
    assert.falsy(tostring(unfrozen):find("matmul_packed", 1, true))
  end)

  it("saves: the graph keeps the unpacked weight, the plan file for C programs reads only what it names", function()
    ds.manual_seed(6)
    local lin = nn.Linear(40, 20)
    local cg = ds.compile(lin, { ds.spec({ 17, 40 }) }, { freeze = true })
    assert.truthy(tostring(cg):find("matmul_packed", 1, true))
    local dir = H.tmp_dir()
    ds.save(cg, dir .. "/lin")
    local f = assert(io.open(dir .. "/lin.plan", "rb"))
    local plan = f:read("*a")
    f:close()
    assert.truthy(plan:find("ds_matmul_ep_f32", 1, true))
    assert.falsy(plan:find("packed", 1, true))
    local loaded = ds.load(dir .. "/lin")
    assert.truthy(tostring(loaded):find("matmul_packed", 1, true))
    local x = ds.randn(17, 40)
    assert(H.bitwise(loaded(x), cg(x)))
    os.execute("rm -rf " .. dir)
  end)

  it("its kernels refuse operands that do not match", function()
    local w = ds.randn(10, 40)
    H.raises(function()
      D.run_kernel(fused_ops.pack_weight, { w }, {}, { { shape = { 1, 10, 32 }, dtype = "f32" } })
    end, "pack_weight")
    local bp = D.run_kernel(fused_ops.pack_weight, { w }, {}, { { shape = { 2, 10, 32 }, dtype = "f32" } })[1]
    H.raises(function()
      D.run_kernel(fused_ops.matmul_packed, { ds.randn(3, 11), bp }, {}, { { shape = { 3, 40 }, dtype = "f32" } })
    end, "matmul_packed")
    H.raises(function()
      D.run_kernel(fused_ops.matmul_packed, { ds.randn(3, 10), bp }, {}, { { shape = { 3, 70 }, dtype = "f32" } })
    end, "matmul_packed")
    local x = ds.randn(3, 10)
    local y = D.run_kernel(fused_ops.matmul_packed, { x, bp }, {}, { { shape = { 3, 40 }, dtype = "f32" } })[1]
    assert(H.bitwise(y, x:matmul(w)))
  end)
end)
