-- tests/index_copy_kernel_spec.lua: ds.index_copy_ (src/index_copy.c) against an element-by-element reference over
-- dims first, middle and last, src contiguous (rows copied as runs) and strided (element by element), repeated
-- indices (the last wins) and several dtypes.
local ds = require("ds")

-- x (shape) with the slices of src (x's shape with #idx in dim) written at idx (1-based) -> flat values
local function reference(x, dim, idx, src)
  local shape, ss = x:size(), src:size()
  local out, sv = x:contiguous():reshape(-1):totable(), src:contiguous():reshape(-1):totable()
  local xs, st = {}, {}
  local a, b = 1, 1
  for d = #shape, 1, -1 do xs[d] = a; a = a * shape[d]; st[d] = b; b = b * ss[d] end
  for e = 0, #sv - 1 do   -- src elements in row order: a repeated index's later slice wins
    local rem, xo = e, 0
    for d = 1, #ss do
      local p = math.floor(rem / st[d]); rem = rem % st[d]
      xo = xo + (d == dim and idx[p + 1] - 1 or p) * xs[d]
    end
    out[xo + 1] = sv[e + 1]
  end
  return out
end

describe("index_copy_ kernel", function()
  for _, dt in ipairs { "f32", "i64", "u8" } do
    it(dt .. ": every dim, contiguous and strided src, repeated indices", function()
      ds.manual_seed(5)
      for _, c in ipairs { { { 6, 5 }, 1 }, { { 6, 5 }, 2 }, { { 4, 6, 3 }, 1 }, { { 4, 6, 3 }, 2 }, { { 4, 6, 3 }, 3 },
                           { { 3, 4, 5, 2 }, 2 } } do
        local shape, dim = c[1], c[2]
        for _, idx in ipairs { { 3, 1, 2 }, { 2, 1, 2 } } do
          for _, strided in ipairs { false, true } do
            local ss = {}
            for i, s in ipairs(shape) do ss[i] = s end
            ss[dim] = #idx
            local x = (ds.randn(unpack(shape)) * 50):abs():astype(dt)
            local src = (ds.randn(unpack(ss)) * 50):abs():astype(dt)
            if strided then   -- the same values through a view whose last dim has stride > 1
              local n = #ss
              src = src:transpose(n - 1, n):contiguous():transpose(n - 1, n)
              assert.is_true(src:stride(n) > 1)
            end
            local want = reference(x, dim, idx, src)
            ds.index_copy_(x, dim, ds.tensor(idx, { dtype = "i64" }), src)
            assert.same(want, x:reshape(-1):totable(), string.format("%s dim %d idx %s%s", table.concat(shape, "x"),
              dim, table.concat(idx, ","), strided and " strided" or ""))
          end
        end
      end
    end)
  end
end)
