-- avg_pool_spec.lua: 2x2 avg_pool2d at stride 2 without padding (LeNet's, src/nn_pool_kernels.h's own loop) adds
-- each window's four values to zero in the general code's order and divides by 4: bit for bit the same as those
-- sums written with ds ops, for f32 and f64, signed zeros, infinities and NaN included.
local ds = require("ds")
local H = require("helpers")

-- x's rows (dim 3) or columns (dim 4) start, start + 2, ... (n of them)
local function every2(x, dim, start, n) return x:narrow(dim, start, 2 * n - 1):unfold(dim, 1, 2):squeeze(-1) end

describe("avg_pool2d 2x2 stride 2", function()
  for _, dt in ipairs { "f32", "f64" } do
    it("equals ((((0 + a) + b) + c) + d) / 4 over each window, bit for bit (" .. dt .. ")", function()
      ds.manual_seed(9)
      for _, s in ipairs { { 2, 3, 10, 10 }, { 1, 2, 7, 9 }, { 1, 1, 2, 2 }, { 3, 4, 28, 28 } } do
        local x = ds.randn(s, { dtype = dt })
        x[{ 1, 1, 1, 1 }] = -0.0; x[{ 1, 1, 1, 2 }] = -0.0; x[{ 1, 1, 2, 1 }] = -0.0; x[{ 1, 1, 2, 2 }] = -0.0
        if s[3] >= 4 then x[{ 1, 1, 3, 3 }] = 1 / 0; x[{ 1, 1, 4, 4 }] = 0 / 0 end
        local OH, OW = math.floor(s[3] / 2), math.floor(s[4] / 2)
        local function tap(r, c) return every2(every2(x, 3, r, OH), 4, c, OW) end
        local ref = ((((ds.zeros({ 1 }, { dtype = dt }) + tap(1, 1)) + tap(1, 2)) + tap(2, 1)) + tap(2, 2)) / 4
        local y = ds.avg_pool2d(x, 2)
        assert.same(ref.shape, y.shape)
        assert.is_true(H.bitwise(y, ref), table.concat(s, ","))
        assert.is_true(H.bitwise(ds.avg_pool2d(x, 2, { count_include_pad = false }), ref))
      end
    end)
  end
end)
