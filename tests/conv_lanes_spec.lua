-- tests/conv_lanes_spec.lua: f32 conv2d of batches with 16 images along the lanes (src/conv_lanes.c; taken from 16
-- images with at most a quarter of the last block's lanes unused, kernels above 1x1, maps above 16 pixels; planes
-- split by rows among 2 threads when there are fewer than 4 blocks x channel tiles of 6) equals the same conv run
-- image by image (batch 1: the direct path) bit for bit -- with padding, strides, dilation, groups, no bias, NaN,
-- infinities and -0.0, on 1 and 2 threads, on every ISA path, under conv2d_ep's epilogues and conv2d_pool's pooling
-- -- and PyTorch within rounding.
local ds = require("ds")
local H = require("helpers")
local F = ds.nn.functional

-- { N, C, H, W, OC, K, stride, padding, dilation, groups, bias }: N = 16, 29, 32 and 48 take the lanes path (29: 3
-- unused lanes in its second block; 16 and 32 split by rows), 17 and 33 do not (15 unused lanes)
local CASES = {
  { 32, 1, 28, 28, 6, 5, 1, 2, 1, 1, true },     -- LeNet-5's conv1
  { 48, 6, 14, 14, 16, 5, 1, 0, 1, 1, true },    -- LeNet-5's conv2
  { 29, 3, 15, 14, 10, 3, 2, 1, 1, 1, true },    -- stride 2, odd width
  { 16, 4, 13, 11, 8, 3, 1, 2, 2, 1, true },     -- dilation 2, 8 channels (a 6 + 2 tile)
  { 48, 4, 10, 10, 6, 3, 1, 1, 1, 2, true },     -- 2 groups
  { 29, 5, 9, 12, 16, 3, 1, 0, 1, 1, false },    -- no bias
  { 16, 2, 12, 9, 7, 3, 2, 1, 2, 1, false },     -- stride and dilation, 7 channels (a 6 + 1 tile)
  { 17, 6, 14, 14, 16, 5, 1, 0, 1, 1, true },    -- not taken (17, 33): the per-image paths' bits all the same
  { 33, 1, 28, 28, 6, 5, 1, 2, 1, 1, true },
  { 16, 1, 28, 28, 6, 5, 1, 2, 1, 1, true },     -- one block, one channel tile: 4 row segments on 2 threads
}

local function opts(c) return { stride = c[7], padding = c[8], dilation = c[9], groups = c[10] } end

local function inputs(c)
  local N, C, Hh, W, OC, K, _, _, _, G, bias = unpack(c)
  return ds.randn(N, C, Hh, W), ds.randn(OC, C / G, K, K), bias and ds.randn(OC) or nil
end

-- the conv of each image alone (batch 1 never takes the lanes path), concatenated
local function per_image(x, w, b, o)
  local parts = {}
  for n = 1, x.shape[1] do parts[n] = ds.conv2d(x:narrow(1, n, 1), w, b, o) end
  return ds.cat(parts, 1)
end

describe("conv2d with 16 images along the lanes", function()
  it("equals the conv run image by image, bit for bit", function()
    ds.manual_seed(41)
    for _, c in ipairs(CASES) do
      local x, w, b = inputs(c)
      local y = ds.conv2d(x, w, b, opts(c))
      assert.is_true(H.bitwise(y, per_image(x, w, b, opts(c))), table.concat(c, ",", 1, 10))
    end
  end)

  it("carries NaN, infinities and -0.0 as the per-image path does", function()
    ds.manual_seed(42)
    local x, w, b = ds.randn(32, 3, 12, 12), ds.randn(8, 3, 3, 3), ds.randn(8)
    local flat = x:reshape(-1)
    for i, v in ipairs({ 0 / 0, 1 / 0, -1 / 0, -0.0, 0 / 0, -0.0 }) do flat[i * 701] = v end
    x = flat:reshape(32, 3, 12, 12)
    local zb = ds.zeros(8) * -1   -- -0.0 biases: -0.0 + -0.0 stays -0.0
    for _, bias in ipairs({ b, zb }) do
      local y = ds.conv2d(x, w, bias, { padding = 1 })
      assert.is_true(H.bitwise(y, per_image(x, w, bias, { padding = 1 })))
      assert.is_true(ds.isnan(y):any():item(), "a NaN reaches the output")
    end
    -- all -0.0 inputs and weights, no bias: the chains end at +0 (from +0), as on the per-image path
    local xz, wz = ds.zeros(16, 2, 8, 8) * -1, ds.zeros(4, 2, 3, 3) * -1
    assert.is_true(H.bitwise(ds.conv2d(xz, wz), per_image(xz, wz, nil, {})))
  end)

  it("gives the same bits on 1 and 2 threads", function()
    ds.manual_seed(43)
    local n0 = ds.get_num_threads()
    for _, c in ipairs({ CASES[1], CASES[2], CASES[5] }) do
      local x, w, b = inputs(c)
      ds.set_num_threads(1)
      local one = ds.conv2d(x, w, b, opts(c))
      ds.set_num_threads(2)
      local two = ds.conv2d(x, w, b, opts(c))
      ds.set_num_threads(n0)
      assert.is_true(H.bitwise(one, two), table.concat(c, ",", 1, 10))
    end
  end)

  it("runs conv2d_ep's epilogues (relu, hardswish, relu then a residual add) as eager does", function()
    ds.manual_seed(44)
    local x, w, b, r = ds.randn(32, 6, 14, 14), ds.randn(16, 6, 5, 5), ds.randn(16), ds.randn(32, 16, 10, 10)
    local fs = {
      function(t) return F.relu(ds.conv2d(t, w, b)) end,
      function(t) return F.hardswish(ds.conv2d(t, w, b)) end,
      function(t, e) return F.relu(ds.conv2d(t, w, b)) + e end,
    }
    for i, f in ipairs(fs) do
      local cg = ds.compile(f, { x, r })
      assert.truthy(tostring(cg):find("conv2d_ep%("), "case " .. i .. ": no conv2d_ep in\n" .. tostring(cg))
      assert.is_true(H.bitwise(cg(x, r), f(x, r)), "case " .. i)
    end
  end)

  it("pools in conv2d_pool as eager's conv, relu and pooling do, NaN included", function()
    ds.manual_seed(45)
    local x, w, b = ds.randn(32, 6, 14, 14), ds.randn(16, 6, 5, 5), ds.randn(16)
    -- 48 images of 6 channels: 3 items in 2 row segments each, a thread starting at a second segment
    local x1, w1, b1 = ds.randn(48, 1, 28, 28), ds.randn(6, 1, 5, 5), ds.randn(6)
    -- NaN and infinities in some windows (max: the window's last NaN, as the pool kernel)
    for _, t in ipairs({ x, x1 }) do
      local flat = t:reshape(-1)
      for i, v in ipairs({ 0 / 0, 1 / 0, -1 / 0, 0 / 0, -0.0 }) do flat[i * 997] = v end
    end
    for i, f in ipairs({
      function(t) return F.max_pool2d(F.relu(ds.conv2d(t, w, b)), 2) end,
      function(t) return F.avg_pool2d(F.relu(ds.conv2d(t, w, b)), 2) end,
      function(t)
        return F.max_pool2d(F.relu(ds.conv2d(t, w1, b1, { padding = 2 })), 3, { stride = 2, padding = 1 })
      end,
      function(t) return F.avg_pool2d(ds.conv2d(t, w1, b1, { padding = 2 }), 3,
        { stride = 2, padding = 1, count_include_pad = false }) end,
    }) do
      local t = i <= 2 and x or x1
      local cg = ds.compile(f, { t })
      assert.truthy(tostring(cg):find("conv2d_pool%("), "case " .. i .. ": no conv2d_pool in\n" .. tostring(cg))
      assert.is_true(H.bitwise(cg(t), f(t)), "case " .. i)
    end
  end)

  local torch = os.execute("env -u LD_PRELOAD /usr/bin/python3 -c 'import torch' 2>/dev/null") == 0;
  (torch and it or pending)("agrees with PyTorch's conv2d (f32 within rounding of its f64 values)", function()
    local ffi = require("ffi")
    local dir = H.tmp_dir()
    local function put(t, name) H.write_file(dir .. "/" .. name, ffi.string(t:data_ptr(), t:numel() * 4)) end
    ds.manual_seed(46)
    for i, c in ipairs({ CASES[2], CASES[3], CASES[5] }) do
      local N, C, Hh, W, OC, K, s, p, d, G = unpack(c)
      local x, w, b = inputs(c)
      put(x, "x"); put(w, "w"); put(b, "b")
      local y = ds.conv2d(x, w, b, opts(c))
      H.write_file(dir .. "/ref.py", string.format([[
import numpy as np, torch
d = "%s"
x = torch.from_numpy(np.fromfile(d + "/x", np.float32).reshape(%d, %d, %d, %d)).double()
w = torch.from_numpy(np.fromfile(d + "/w", np.float32).reshape(%d, %d, %d, %d)).double()
b = torch.from_numpy(np.fromfile(d + "/b", np.float32)).double()
torch.nn.functional.conv2d(x, w, b, stride=%d, padding=%d, dilation=%d, groups=%d).numpy().tofile(d + "/y")
]], dir, N, C, Hh, W, OC, C / G, K, K, s, p, d, G))
      assert(os.execute("env -u LD_PRELOAD /usr/bin/python3 " .. dir .. "/ref.py") == 0)
      local raw = H.read_file(dir .. "/y")
      local ref = ds.empty(y.shape, { dtype = "f64" })
      assert.equal(ref:numel() * 8, #raw, "case " .. i)
      ffi.copy(ref:data_ptr(), raw, #raw)
      H.close(y, ref, 1e-5, 1e-5)
    end
  end)

  it("gives the same bits on every ISA path and thread count", function()
    H.same_bits_on_every_path([[
      local ds = require("ds")
      local ffi = require("ffi")
      local F = ds.nn.functional
      ds.manual_seed(47)
      local h = 0
      local function hash(t)
        local q = ffi.cast("uint8_t *", t:data_ptr())
        for i = 0, t:numel() * 4 - 1 do h = (h * 31 + q[i]) % 2147483647 end
      end
      for _, c in ipairs({ { 32, 1, 28, 6, 5, 1, 2, 1 }, { 48, 6, 14, 16, 5, 1, 0, 1 }, { 29, 3, 15, 10, 3, 2, 1, 1 },
        { 16, 4, 10, 6, 3, 1, 1, 2 } }) do
        local N, C, Hh, OC, K, s, p, G = unpack(c)
        local x, w, b = ds.randn(N, C, Hh, Hh), ds.randn(OC, C / G, K, K), ds.randn(OC)
        local o = { stride = s, padding = p, groups = G }
        hash(ds.conv2d(x, w, b, o))
        for _, act in ipairs({ F.hardswish, F.relu }) do   -- applied in the kernel registers
          local f = ds.compile(function(t) return F.max_pool2d(act(ds.conv2d(t, w, b, o)), 2) end, { x },
            { convert = false })
          hash(f(x))
        end
      end
      io.write(ds.info().isa, " ", h)
    ]])
  end)
end)
