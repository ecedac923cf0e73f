-- conv_direct_spec.lua: the direct f32 conv2d forward path at any stride (src/nn_conv_direct.c over the stride-phase
-- planes of src/conv_phase.c) equals the weights times the column matrix plus the bias, bit for bit (the same FMA
-- chain per element as im2col + GEMM), on every ISA path and thread count (PyTorch's values: nn_ops_spec's fixtures).
local ds = require("ds")
local H = require("helpers")

-- x's padded rows start, start + step, ... (count of them) along dim
local function every(x, dim, start, count, step)
  return x:narrow(dim, start, (count - 1) * step + 1):unfold(dim, 1, step):squeeze(-1)
end

-- the column matrix of x (N, C, H, W): (N, C*KH*KW, OH*OW), rows (c, kh, kw); o: stride, padding, dilation
local function columns(x, KH, KW, o)
  local N, C = x.shape[1], x.shape[2]
  local sh, sw, ph, pw, dh, dw = o.stride[1], o.stride[2], o.padding[1], o.padding[2], o.dilation[1], o.dilation[2]
  local xp = ds.nn.functional.pad(x, { pw, pw, ph, ph })
  local OH = math.floor((xp.shape[3] - (KH - 1) * dh - 1) / sh) + 1
  local OW = math.floor((xp.shape[4] - (KW - 1) * dw - 1) / sw) + 1
  local rows = {}
  for c = 1, C do
    for kh = 0, KH - 1 do
      for kw = 0, KW - 1 do
        local win = every(every(xp:narrow(2, c, 1), 3, kh * dh + 1, OH, sh), 4, kw * dw + 1, OW, sw)
        rows[#rows + 1] = win:contiguous():reshape(N, 1, OH * OW)
      end
    end
  end
  return ds.cat(rows, 2), OH, OW
end

-- { N, C, H, W, OC, KH, KW, stride, padding, dilation, groups }: MobileNet's stem (3 channels, stride 2), odd sizes,
-- stride 3 and unequal strides, stride with dilation, grouped, 1x1 at stride 2, a 1x1 map, LeNet's stride 1
local cases = {
  { 1, 3, 24, 24, 16, 3, 3, { 2, 2 }, { 1, 1 }, { 1, 1 }, 1 }, { 2, 5, 17, 13, 7, 3, 3, { 2, 2 }, { 1, 0 }, { 1, 1 }, 1 },
  { 1, 4, 19, 20, 9, 5, 5, { 3, 3 }, { 2, 2 }, { 1, 1 }, 1 }, { 3, 2, 11, 16, 13, 3, 5, { 2, 1 }, { 1, 2 }, { 1, 1 }, 1 },
  { 1, 3, 15, 15, 6, 3, 3, { 2, 2 }, { 2, 2 }, { 2, 2 }, 1 }, { 2, 6, 10, 10, 8, 3, 3, { 2, 2 }, { 1, 1 }, { 1, 1 }, 2 },
  { 1, 24, 12, 12, 40, 1, 1, { 2, 2 }, { 0, 0 }, { 1, 1 }, 1 }, { 1, 80, 1, 1, 20, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 },
  { 1, 6, 14, 14, 16, 5, 5, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 },
  -- row stride 1 with few output columns a padded row: column planes (LeNet's c1 and c2), a column stride,
  -- dilation with one-sided padding, a map narrower than a vector
  { 2, 1, 28, 28, 6, 5, 5, { 1, 1 }, { 2, 2 }, { 1, 1 }, 1 }, { 2, 3, 12, 9, 10, 3, 5, { 1, 2 }, { 1, 2 }, { 1, 1 }, 1 },
  { 1, 2, 13, 11, 5, 3, 3, { 1, 1 }, { 0, 1 }, { 1, 2 }, 1 }, { 1, 4, 7, 5, 7, 3, 3, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 },
  -- 1x1 kernels on 1x1 planes (scalar chains): grouped, several images, channel counts off the 8-chain blocks
  { 3, 12, 1, 1, 9, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 3 }, { 2, 7, 1, 1, 13, 1, 1, { 2, 2 }, { 0, 0 }, { 1, 1 }, 1 },
  -- 1x1 at stride 1 over planes of whole vectors (read in place, no copy): grouped, one image split by threads
  { 2, 6, 4, 8, 10, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 2 }, { 1, 40, 8, 8, 48, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 },
  -- written straight into the output (whole-vector planes, no spare tile rows): 8-row tiles, grouped, several
  -- images; 5x5, 7x7 and 6x6 maps (not whole vectors: put out as before; 7x7's 49 and 6x6's 36 columns end in a
  -- half vector, of which the kernel computes 8 lanes)
  { 1, 16, 12, 12, 40, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 }, { 2, 12, 4, 4, 24, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 2 },
  { 1, 9, 5, 5, 11, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 }, { 1, 7, 7, 7, 13, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 },
  { 1, 80, 6, 6, 96, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 },
  -- column stride 2: widths past 32, odd and even, left padding 0, 1 and 2
  { 1, 2, 9, 67, 5, 3, 3, { 2, 2 }, { 1, 2 }, { 1, 1 }, 1 }, { 1, 3, 5, 40, 4, 3, 3, { 2, 2 }, { 0, 0 }, { 1, 1 }, 1 },
  { 1, 1, 7, 33, 3, 3, 3, { 1, 2 }, { 1, 1 }, { 1, 1 }, 1 },
  -- output rows of whole vectors from wider phase rows (written row by row): 8-row tiles grouped, 6-row tiles
  { 2, 4, 9, 64, 16, 3, 3, { 2, 2 }, { 1, 1 }, { 1, 1 }, 2 }, { 1, 3, 10, 96, 12, 3, 3, { 2, 2 }, { 1, 1 }, { 1, 1 }, 1 },
  -- one image over SPLIT_MIN (2e6 multiply-adds), shared by the threads: by output rows, written in place, by row
  -- tiles put out (columns ending in a half vector), by column blocks (the last one ending in a half vector)
  { 1, 3, 128, 192, 16, 3, 3, { 2, 2 }, { 1, 1 }, { 1, 1 }, 1 }, { 1, 64, 32, 32, 64, 1, 1, { 1, 1 }, { 0, 0 }, { 1, 1 }, 1 },
  { 1, 32, 29, 29, 48, 3, 3, { 1, 1 }, { 1, 1 }, { 1, 1 }, 1 }, { 1, 16, 65, 63, 6, 3, 3, { 1, 1 }, { 1, 1 }, { 1, 1 }, 1 },
}

describe("direct conv2d forward at any stride", function()
  it("equals the weights times the column matrix plus the bias, bit for bit", function()
    ds.manual_seed(21)
    for _, c in ipairs(cases) do
      local N, C, Hh, W, OC, KH, KW, s, p, d, G = unpack(c)
      local x, w, b = ds.randn(N, C, Hh, W), ds.randn(OC, C / G, KH, KW), ds.randn(OC)
      local o = { stride = s, padding = p, dilation = d, groups = G }
      local y = ds.conv2d(x, w, b, o)
      local parts = {}
      for g = 1, G do
        local xg, wg = x:narrow(2, (g - 1) * C / G + 1, C / G), w:narrow(1, (g - 1) * OC / G + 1, OC / G)
        local col, OH, OW = columns(xg, KH, KW, o)
        parts[g] = (wg:reshape(OC / G, C / G * KH * KW):matmul(col)
          + b:narrow(1, (g - 1) * OC / G + 1, OC / G):reshape(1, OC / G, 1)):reshape(N, OC / G, OH, OW)
      end
      local ref = ds.cat(parts, 2)
      assert.same(ref.shape, y.shape)
      assert.is_true(H.bitwise(y, ref), table.concat(c, ",", 1, 7))
    end
  end)

  it("without a bias: the products alone, bit for bit (written straight into the output or put out)", function()
    ds.manual_seed(22)
    for _, c in ipairs({ { 1, 16, 12, 12, 40 }, { 2, 5, 8, 8, 18 }, { 1, 7, 7, 7, 13 } }) do
      local N, C, Hh, W, OC = unpack(c)
      local x, w = ds.randn(N, C, Hh, W), ds.randn(OC, C, 1, 1)
      local col = columns(x, 1, 1, { stride = { 1, 1 }, padding = { 0, 0 }, dilation = { 1, 1 } })
      local ref = w:reshape(OC, C):matmul(col):reshape(N, OC, Hh, W)
      assert.is_true(H.bitwise(ds.conv2d(x, w), ref), table.concat(c, ","))
    end
  end)

  -- batch 1 over SPLIT_MIN splits the image among the threads (by output rows, row tiles or column blocks)
  it("gives the same bits on every ISA path and thread count, eager and compiled, batch 1 and more", function()
    local script = [[
      local ds = require("ds")
      ds.manual_seed(5)
      local x, w, b = ds.randn(3, 3, 33, 31), ds.randn(16, 3, 3, 3), ds.randn(16)
      local o = { stride = 2, padding = 1 }
      local y = ds.conv2d(x, w, b, o)
      local f = ds.compile(function(t) return ds.nn.functional.hardswish(ds.conv2d(t, w, b, o)) end,
        { ds.spec({ "n", 3, 33, 31 }) }, { freeze = true, convert = false })
      local y1 = f(x:narrow(1, 1, 1))
      local y3 = f(x)
      assert(ds.equal(y3, ds.nn.functional.hardswish(y)), "compiled differs from eager")
      assert(ds.equal(y1, y3:narrow(1, 1, 1)), "batch 1 differs from batch 3")
      local xp, wp, bp = ds.randn(1, 80, 6, 6), ds.randn(96, 80, 1, 1), ds.randn(96)   -- one image, half vectors
      local yp = ds.conv2d(xp, wp, bp)
      assert(ds.equal(yp, ds.conv2d(ds.cat({ xp, xp }, 1), wp, bp):narrow(1, 2, 1)), "batch 1 differs from batch 2")
      local ffi = require("ffi")
      local xc, wc, bc = ds.randn(3, 6, 14, 14), ds.randn(16, 6, 5, 5), ds.randn(16)   -- column planes
      local yc = ds.conv2d(xc, wc, bc)
      local xi, wi, bi = ds.randn(1, 40, 8, 8), ds.randn(48, 40, 1, 1), ds.randn(48)   -- read in place
      local yi = ds.conv2d(xi, wi, bi)
      local xq, wq, bq = ds.randn(1, 16, 24, 24), ds.randn(24, 16, 1, 1), ds.randn(24)   -- straight out
      local yq = ds.conv2d(xq, wq, bq)
      local xs, ws, bs = ds.randn(1, 3, 19, 71), ds.randn(8, 3, 3, 3), ds.randn(8)   -- stride 2, wide odd rows
      local ys = ds.conv2d(xs, ws, bs, { stride = 2, padding = 2 })
      local xr, wr, br = ds.randn(1, 3, 40, 64), ds.randn(16, 3, 3, 3), ds.randn(16)   -- stride 2, by output rows
      local orow = { stride = 2, padding = 1 }
      local yr = ds.conv2d(xr, wr, br, orow)
      local fr = ds.compile(function(t) return ds.nn.functional.hardswish(ds.conv2d(t, wr, br, orow)) end,
        { ds.spec({ 1, 3, 40, 64 }) }, { freeze = true, convert = false })
      assert(ds.equal(fr(xr), ds.nn.functional.hardswish(yr)), "compiled by rows differs from eager")
      -- one image shared by the threads: by output rows (compiled with hardswish too), in place, row tiles put
      -- out, column blocks
      local big = {}
      for i, c in ipairs({ { 3, 128, 192, 16, 3, 2 }, { 64, 32, 32, 64, 1, 1 }, { 32, 29, 29, 48, 3, 1 },
        { 16, 65, 63, 6, 3, 1 } }) do
        local C, Hh, W, OC, K, s = unpack(c)
        local xb, wb, bb = ds.randn(1, C, Hh, W), ds.randn(OC, C, K, K), ds.randn(OC)
        local ob = { stride = s, padding = (K - 1) / 2 }
        big[i] = ds.conv2d(xb, wb, bb, ob)
        local fb = ds.compile(function(t) return ds.nn.functional.hardswish(ds.conv2d(t, wb, bb, ob)) end,
          { ds.spec({ 1, C, Hh, W }) }, { freeze = true, convert = false })
        assert(ds.equal(fb(xb), ds.nn.functional.hardswish(big[i])), "compiled one-image split differs from eager")
      end
      local h = 0
      for _, t in ipairs({ y, y1, yp, yc, yi, yq, ys, yr, unpack(big) }) do
        local p = ffi.cast("uint8_t *", t:data_ptr())
        for i = 0, t:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      end
      io.write(ds.info().isa, " ", h)
    ]]
    H.same_bits_on_every_path(script)
  end)
end)
