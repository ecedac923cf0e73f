-- conv_depthwise_spec.lua: depthwise conv2d (groups = channels, one input channel per group) takes its own
-- forward path; its values equal, bit for bit, the same convolution run group by group through the general path.
local ds = require("ds")
local H = require("helpers")

describe("depthwise conv2d", function()
  -- { N, C, H, W, multiplier, KH, KW, stride, padding, dilation }
  local cases = {
    { 1, 8, 14, 14, 1, 3, 3, 1, 1, 1 }, { 2, 4, 15, 13, 1, 3, 3, 2, 1, 1 }, { 1, 3, 9, 17, 2, 5, 5, 2, 2, 1 },
    { 3, 5, 10, 10, 1, 3, 3, 1, 2, 2 }, { 1, 6, 7, 7, 3, 1, 1, 1, 0, 1 }, { 2, 2, 12, 11, 1, 5, 3, 3, { 2, 1 }, 1 },
    { 1, 16, 1, 1, 1, 3, 3, 1, 1, 1 }, { 0, 4, 6, 6, 1, 3, 3, 1, 1, 1 },
    -- 3x3 at stride 2, padding 1 (f32's own kernel): widths around its 8-wide steps, a multiplier, tiny planes
    { 1, 3, 48, 48, 1, 3, 3, 2, 1, 1 }, { 2, 2, 9, 33, 2, 3, 3, 2, 1, 1 }, { 1, 2, 16, 17, 1, 3, 3, 2, 1, 1 },
    { 1, 2, 2, 1, 1, 3, 3, 2, 1, 1 }, { 1, 1, 1, 2, 3, 3, 3, 2, 1, 1 }, { 1, 2, 5, 15, 1, 3, 3, 2, 1, 1 },
    -- stride 1 (f32: small planes from a zero-bordered copy, up to 8 output rows at once; planes whose copy
    -- would pass 4096 floats straight from the input plane, 4 rows at once): MobileNet's 6x6 maps, rows past a
    -- multiple of 4 and of 8, widths around 8, kernels wider than the plane, no padding, asymmetric padding
    { 1, 80, 6, 6, 1, 3, 3, 1, 1, 1 }, { 2, 3, 7, 9, 1, 3, 3, 1, 1, 1 }, { 1, 2, 13, 17, 2, 5, 5, 1, 2, 1 },
    { 1, 3, 5, 8, 1, 3, 3, 1, 0, 1 }, { 1, 2, 3, 2, 1, 5, 5, 1, 2, 1 }, { 1, 2, 10, 23, 1, 3, 5, 1, { 0, 2 }, 1 },
    { 1, 2, 9, 9, 1, 3, 3, 1, 3, 2 }, { 1, 4, 34, 41, 1, 7, 7, 1, 3, 1 }, { 1, 2, 70, 60, 1, 3, 3, 1, 1, 1 },
    { 1, 3, 17, 5, 1, 3, 3, 1, 1, 1 },
    -- stride 1 with at most 8 padded columns read (AVX-512: 4 planes at once, two rows a vector): planes of
    -- several images and a multiplier in one group of 4, 8 and 2 output rows, dilation with uneven padding
    { 2, 5, 5, 5, 2, 3, 3, 1, 1, 1 }, { 1, 9, 8, 6, 1, 3, 3, 1, 1, 1 }, { 1, 3, 2, 1, 1, 3, 3, 1, 1, 1 },
    { 1, 5, 4, 4, 1, 3, 3, 1, { 1, 2 }, 2 },
  }
  for _, dt in ipairs { "f32", "f64" } do
    it("equals the per-group convolutions bit for bit (" .. dt .. ")", function()
      ds.manual_seed(11)
      for _, c in ipairs(cases) do
        local N, C, Hh, W, mult, KH, KW, s, p, d = unpack(c)
        local x = ds.randn(N, C, Hh, W, { dtype = dt })
        local w, b = ds.randn(C * mult, 1, KH, KW, { dtype = dt }), ds.randn(C * mult, { dtype = dt })
        local o = { stride = s, padding = p, dilation = d }
        local y = ds.conv2d(x, w, b, { stride = s, padding = p, dilation = d, groups = C })
        local parts = {}
        for g = 1, C do
          parts[g] = ds.conv2d(x:narrow(2, g, 1), w:narrow(1, (g - 1) * mult + 1, mult),
            b:narrow(1, (g - 1) * mult + 1, mult), o)
        end
        local ref = ds.cat(parts, 2)
        assert.same(ref.shape, y.shape)
        assert.is_true(H.bitwise(y, ref), table.concat(c, ",", 1, 8))
      end
    end)
  end

  local torch = os.execute("env -u LD_PRELOAD /usr/bin/python3 -c 'import torch' 2>/dev/null") == 0;
  (torch and it or pending)("agrees with PyTorch's conv2d on odd shapes, strides and paddings (f32)", function()
    local ffi = require("ffi")
    local dir = H.tmp_dir()
    local function put(t, name) H.write_file(dir .. "/" .. name, ffi.string(t:data_ptr(), t:numel() * 4)) end
    ds.manual_seed(13)
    for i, c in ipairs({ { 1, 80, 6, 6, 3, 3, 1, 1 }, { 2, 5, 11, 19, 5, 5, 1, 2 }, { 1, 3, 17, 13, 3, 3, 2, 1 },
      { 1, 4, 10, 7, 3, 3, 1, 0 }, { 1, 2, 9, 30, 7, 7, 1, 3 }, { 1, 7, 5, 5, 3, 3, 1, 1 }, { 1, 9, 7, 7, 3, 3, 1, 1 },
      { 1, 2, 70, 60, 3, 3, 1, 1 } }) do
      local N, C, Hh, W, KH, KW, s, p = unpack(c)
      local x, w, b = ds.randn(N, C, Hh, W), ds.randn(C, 1, KH, KW), ds.randn(C)
      put(x, "x"); put(w, "w"); put(b, "b")
      local y = ds.conv2d(x, w, b, { stride = s, padding = p, groups = C })
      H.write_file(dir .. "/ref.py", string.format([[
import numpy as np, torch
d = "%s"
x = torch.from_numpy(np.fromfile(d + "/x", np.float32).reshape(%d, %d, %d, %d)).double()
w = torch.from_numpy(np.fromfile(d + "/w", np.float32).reshape(%d, 1, %d, %d)).double()
b = torch.from_numpy(np.fromfile(d + "/b", np.float32)).double()
torch.nn.functional.conv2d(x, w, b, stride=%d, padding=%d, groups=%d).numpy().tofile(d + "/y")
]], dir, N, C, Hh, W, C, KH, KW, s, p, C))
      assert(os.execute("env -u LD_PRELOAD /usr/bin/python3 " .. dir .. "/ref.py") == 0)
      local raw = H.read_file(dir .. "/y")
      local ref = ds.empty(y.shape, { dtype = "f64" })
      assert.equal(ref:numel() * 8, #raw, "case " .. i)
      ffi.copy(ref:data_ptr(), raw, #raw)
      H.close(y, ref, 1e-5, 1e-5)
    end
  end)

  it("gives the same bits on every ISA path and thread count (16- and 8-wide planes, 1 to 8 rows at once)", function()
    H.same_bits_on_every_path([[
      local ds = require("ds")
      local ffi = require("ffi")
      ds.manual_seed(14)
      local h = 0
      for _, c in ipairs({ { 2, 16, 33, 35, 2, 1 }, { 1, 24, 13, 7, 2, 1 }, { 1, 80, 6, 6, 1, 1 }, { 2, 6, 11, 19, 1, 2 },
        { 1, 7, 5, 5, 1, 1 }, { 1, 3, 17, 9, 1, 1 }, { 1, 2, 70, 60, 1, 1 }, { 3, 5, 7, 6, 1, 1 },
        { 1, 32, 48, 48, 1, 1 }, { 2, 24, 96, 64, 2, 1 } }) do   -- the last two over DW_PAR_MIN: planes on the threads
        local N, C, Hh, W, s, p = unpack(c)
        local x, w, b = ds.randn(N, C, Hh, W), ds.randn(C, 1, 2 * p + 1, 2 * p + 1), ds.randn(C)
        local y = ds.conv2d(x, w, b, { stride = s, padding = p, groups = C })
        local q = ffi.cast("uint8_t *", y:data_ptr())
        for i = 0, y:numel() * 4 - 1 do h = (h * 31 + q[i]) % 2147483647 end
      end
      io.write(ds.info().isa, " ", h)
    ]])
  end)

  it("keeps its gradients (the backward kernels are the general ones)", function()
    ds.manual_seed(12)
    local x = ds.randn(2, 3, 6, 6, { dtype = "f64" }):requires_grad_()
    local w = ds.randn(6, 1, 3, 3, { dtype = "f64" }):requires_grad_()
    local b = ds.randn(6, { dtype = "f64" }):requires_grad_()
    assert.is_true(ds.autograd.gradcheck(function(a, k, c) return ds.conv2d(a, k, c, { stride = 2, padding = 1, groups = 3 }) end,
      { x, w, b }))
  end)
end)
