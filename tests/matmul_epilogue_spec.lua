-- tests/matmul_epilogue_spec.lua: a compiled x @ W^T + b, with or without a relu after it, runs the bias and the relu
-- inside the f32 GEMM (src/sgemm_ep.h: on each tile as the driver finishes it) for a frozen (prepacked) and an
-- unfrozen weight; the values are the unfused graph's and eager's bit for bit on every kernel path (row kernels,
-- rows in chunks, the micro-kernel split by rows or by columns), on one thread and two, NaN kept by the relu. Chains
-- the GEMM does not take (bias first, another activation, a bias per row) still run as their own pass, same bits.
local ds = require("ds")
local H = require("helpers")

-- { M, K, N }: 1-8 rows (row kernels), a narrow weight against many rows (chunks), the micro-kernel's tiles with
-- partial strips and panels, LeNet-5's classifier layers at batch 256
local SHAPES = { { 1, 7, 5 }, { 5, 84, 33 }, { 8, 300, 120 }, { 37, 84, 10 }, { 20, 130, 120 }, { 45, 70, 84 },
                 { 256, 400, 120 }, { 256, 120, 84 }, { 256, 84, 10 } }

local function bytes_equal(a, b, what)
  assert.same(a.shape, b.shape, what)
  assert.is_true(H.bitwise(a, b), what)
end

describe("matmul epilogue in the GEMM", function()
  local before
  setup(function() before = ds.get_num_threads() end)
  teardown(function() ds.set_num_threads(before) end)

  it("bias, and bias then relu, give the unfused graph's and eager's bits, frozen and not, on 1 and 2 threads", function()
    for _, s in ipairs(SHAPES) do
      local M, K, N = s[1], s[2], s[3]
      ds.manual_seed(M * 7 + N)
      local W, b, x = ds.randn(N, K), ds.randn(N), ds.randn(M, K)
      x[1][1] = 0 / 0   -- a NaN row: relu keeps NaN
      for _, relu in ipairs { false, true } do
        local function f(t)
          local y = ds.matmul(t, W:t()) + b
          return relu and ds.relu(y) or y
        end
        local spec = { ds.spec({ M, K }) }
        local eager = f(x)
        local unfused = ds.compile(f, spec, { epilogue = false })(x)
        bytes_equal(eager, unfused, "unfused " .. table.concat(s, "x"))
        for _, freeze in ipairs { false, true } do
          local g = ds.compile(f, spec, { freeze = freeze })
          assert.truthy(tostring(g):find(freeze and "matmul_packed_ep" or "matmul_ep", 1, true))
          for _, th in ipairs { 1, 2 } do
            ds.set_num_threads(th)
            local what = string.format("%s relu=%s freeze=%s threads=%d", table.concat(s, "x"), tostring(relu),
              tostring(freeze), th)
            bytes_equal(eager, g(x), what)
          end
          ds.set_num_threads(before)
        end
      end
    end
  end)

  it("relu keeps NaN and zeroes negatives; the bias is added once per column", function()
    local W = ds.tensor({ { 1, 0 }, { 0, 1 }, { -1, 0 } })   -- (3, 2): y = (x1, x2, -x1) + b
    local b = ds.tensor({ 0.5, -4, 0 })
    local g = ds.compile(function(t) return ds.relu(ds.matmul(t, W:t()) + b) end, { ds.spec({ 2, 2 }) },
      { freeze = true })
    local y = g(ds.tensor({ { 1, 2 }, { 0 / 0, 3 } }))
    assert.same({ 1.5, 0, 0 }, y[1]:totable())
    for _, v in ipairs(y[2]:totable()) do assert.is_true(v ~= v) end   -- a NaN in the row: NaN * 0 is NaN too
  end)

  it("chains the GEMM does not take run as their own pass with the unfused bits", function()
    ds.manual_seed(3)
    local M, K, N = 30, 50, 40
    local W, b, x, rb = ds.randn(N, K), ds.randn(N), ds.randn(M, K), ds.randn(M, 1)
    local chains = {
      ["bias first"] = function(t) return ds.relu(b + ds.matmul(t, W:t())) end,
      ["gelu"] = function(t) return ds.nn.functional.gelu(ds.matmul(t, W:t()) + b) end,
      ["bias per row"] = function(t) return ds.relu(ds.matmul(t, W:t()) + rb) end,
    }
    for name, f in pairs(chains) do
      local spec = { ds.spec({ M, K }) }
      local want = ds.compile(f, spec, { epilogue = false })(x)
      for _, freeze in ipairs { false, true } do
        bytes_equal(want, ds.compile(f, spec, { freeze = freeze })(x), name .. (freeze and " frozen" or ""))
      end
    end
  end)
end)
