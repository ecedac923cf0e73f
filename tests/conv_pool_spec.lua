-- tests/conv_pool_spec.lua: compiled graphs run a conv2d, its activation (none, relu, hardswish) and the max or
-- average pooling after it as one `conv2d_pool` step (passes/conv_pool.lua, src/conv_pool.c): the printed IR shows
-- it, `epilogue = false` turns it off, and the values are the unfused graph's and eager's bit for bit, at batch
-- sizes on both sides of the images-along-lanes path (16 images a block), with NaN, infinities and -0.0 in the
-- windows, and in PyTorch's LeNet-5 export.
local ds = require("ds")
local H = require("helpers")
local F = ds.nn.functional

local function count(cg) return select(2, tostring(cg):gsub("conv2d_pool%(", "")) end

-- compiled with and without the pass and eagerly: all three bit for bit; the fused step visible in the IR
local function check(f, args, what, fused)
  local cg, plain = ds.compile(f, args), ds.compile(f, args, { epilogue = false })
  assert.equal(fused or 1, count(cg), what .. ": conv2d_pool steps in\n" .. tostring(cg))
  assert.equal(0, count(plain), what .. ": epilogue = false still fuses")
  local y, y0, ye = cg(unpack(args)), plain(unpack(args)), f(unpack(args))
  assert(H.bitwise(y, y0), what .. ": compiled with conv2d_pool differs from without")
  assert(H.bitwise(y, ye), what .. ": compiled differs from eager")
end

-- { name, C, H, W, OC, K, stride, padding, dilation, groups }
local CONVS = {
  { "LeNet conv1: 1 -> 6, 5x5 pad 2 on 28x28", 1, 28, 28, 6, 5, 1, 2, 1, 1 },
  { "LeNet conv2: 6 -> 16, 5x5 on 14x14", 6, 14, 14, 16, 5, 1, 0, 1, 1 },
  { "3x3 pad 1, 8 -> 10 on 9x11", 8, 9, 11, 10, 3, 1, 1, 1, 1 },
  { "3x3 stride 2 pad 1 on 15x14", 3, 15, 14, 6, 3, 2, 1, 1, 1 },
  { "3x3 dilation 2 on 13x13", 4, 13, 13, 5, 3, 1, 2, 2, 1 },
  { "grouped 3x3, 2 groups", 4, 10, 10, 6, 3, 1, 1, 1, 2 },
  { "depthwise 3x3", 4, 10, 10, 4, 3, 1, 1, 1, 4 },
}

-- { name, pool(y) }
local POOLS = {
  { "max 2x2", function(y) return F.max_pool2d(y, 2) end },
  { "avg 2x2", function(y) return F.avg_pool2d(y, 2) end },
  { "max 3x3 stride 2 pad 1", function(y) return F.max_pool2d(y, 3, { stride = 2, padding = 1 }) end },
  { "avg 3x3 stride 1 pad 1", function(y) return F.avg_pool2d(y, 3, { stride = 1, padding = 1 }) end },
  { "avg 3x3 pad 1 without the padding counted", function(y)
      return F.avg_pool2d(y, 3, { stride = 2, padding = 1, count_include_pad = false })
    end },
  { "max 2x2 stride 1", function(y) return F.max_pool2d(y, 2, { stride = 1 }) end },
}

local ACTS = {
  { "no activation", function(y) return y end },
  { "relu", F.relu },
  { "hardswish", F.hardswish },
}

describe("conv2d_pool", function()
  for _, c in ipairs(CONVS) do
    local name, C, Hh, W, OC, K, s, p, d, G = unpack(c)
    for _, pool in ipairs(POOLS) do
      it(name .. ", " .. pool[1] .. ": bitwise equal to the unfused graph and eager at batch 1, 5, 16, 37", function()
        ds.manual_seed(11)
        local w, b = ds.randn(OC, C / G, K, K), ds.randn(OC)
        for _, act in ipairs(ACTS) do
          for _, N in ipairs({ 1, 5, 16, 37 }) do
            local f = function(x_)
              return pool[2](act[2](F.conv2d(x_, w, b, { stride = s, padding = p, dilation = d, groups = G })))
            end
            check(f, { ds.randn(N, C, Hh, W) }, string.format("%s, %s, %s, batch %d", name, pool[1], act[1], N))
          end
        end
      end)
    end
  end

  it("NaN, infinities and -0.0 in the windows: the pool kernels' answers (max: the window's last NaN)", function()
    local vals = { 0 / 0, 1 / 0, -1 / 0, -0.0, 0, 1e38, -1e38, 1e-40, 3, -3, 0.5 }
    for _, N in ipairs({ 2, 32 }) do
      ds.manual_seed(3)
      local data = (ds.randn(N * 2 * 12 * 12) * 4):totable()
      for i = 1, #data, 7 do data[i] = vals[(i - 1) / 7 % #vals + 1] end
      local x = ds.tensor(data):reshape(N, 2, 12, 12)
      -- a 1x1 conv with weights 1 and bias 0 passes the values through; a 3x3 mixes them
      for _, wb in ipairs({ { ds.ones(2, 1, 1, 1), ds.zeros(2), 2 }, { ds.randn(4, 2, 3, 3), ds.randn(4), 1 } }) do
        for _, pool in ipairs(POOLS) do
          for _, act in ipairs(ACTS) do
            check(function(x_) return pool[2](act[2](F.conv2d(x_, wb[1], wb[2], { groups = wb[3] }))) end, { x },
              string.format("special values, batch %d, %s, %s", N, pool[1], act[1]))
          end
        end
      end
    end
  end)

  it("on several threads: the same bits as on one", function()
    ds.manual_seed(12)
    local x, w, b = ds.randn(64, 6, 14, 14), ds.randn(16, 6, 5, 5), ds.randn(16)
    local f = function(x_) return F.avg_pool2d(F.relu(F.conv2d(x_, w, b)), 2) end
    local cg = ds.compile(f, { x })
    local threads = ds.get_num_threads()
    ds.set_num_threads(1)
    local one = cg(x)
    ds.set_num_threads(math.max(2, threads))
    local many = cg(x)
    ds.set_num_threads(threads)
    assert(H.bitwise(one, many))
  end)

  it("not fused: a conv output read elsewhere, max_pool2d's indices read, a chain of more than an activation, f64",
    function()
      ds.manual_seed(13)
      local x, w, b = ds.randn(3, 2, 8, 8), ds.randn(4, 2, 3, 3), ds.randn(4)
      check(function(x_) local y = F.conv2d(x_, w, b); return F.max_pool2d(y, 2), y end, { x }, "output read", 0)
      check(function(x_) return F.max_pool2d(F.conv2d(x_, w, b), 2, { return_indices = true }) end, { x },
        "indices", 0)
      check(function(x_) return F.max_pool2d(F.relu(F.conv2d(x_, w, b)) * 2, 2) end, { x }, "relu then scale", 0)
      local x64, w64, b64 = x:to("f64"), w:to("f64"), b:to("f64")
      check(function(x_) return F.max_pool2d(F.relu(F.conv2d(x_, w64, b64)), 2) end, { x64 }, "f64", 0)
    end)

  it("a saved plan (ds.save) runs conv2d_pool in C (src/model.c) with the compiled graph's bits", function()
    local ffi = require("ffi")
    local C = require("ds.ffi").C
    ds.manual_seed(14)
    local x, w, b = ds.randn(20, 3, 12, 12), ds.randn(8, 3, 3, 3), ds.randn(8)
    local cg = ds.compile(function(x_) return F.max_pool2d(F.relu(F.conv2d(x_, w, b, { padding = 1 })), 2) end, { x })
    assert.equal(1, count(cg))
    local path = H.tmp_dir() .. "/conv_pool"
    ds.save(cg, path)
    local m = C.ds_model_load(path)
    assert.truthy(m ~= nil, ffi.string(C.ds_last_error()))
    local y = ds.empty(20, 8, 6, 6)
    local rc = C.ds_model_run(m, ffi.new("const ds_tensor*[1]", { x._c }), ffi.new("ds_tensor*[1]", { y._c }))
    C.ds_model_free(m)
    assert.equal(0, rc)
    assert(H.bitwise(y, cg(x)))
  end)

  it("bad attributes or shapes reach the kernel as an error naming conv2d_pool, not a crash", function()
    local ffi = require("ffi")
    local C = require("ds.ffi").C
    local fn = ffi.cast("int (*)(ds_tensor *const *, const double *)", C.ds_kernel_find("ds_conv2d_pool_f32"))
    local x, w, b = ds.randn(2, 1, 8, 8), ds.randn(3, 1, 3, 3), ds.randn(3)
    local good = { 1, 1, 0, 0, 1, 1, 1, 2, 1, 2, 2, 2, 2, 0, 0, 0 }
    local function run(out, attrs)
      local t = ffi.new("ds_tensor *[4]", { out._c, x._c, w._c, b._c })
      local rc = fn(t, ffi.new("double[16]", attrs))
      return rc, ffi.string(C.ds_last_error())
    end
    assert.equal(0, (run(ds.empty(2, 3, 3, 3), good)))
    local bad = {
      { 8, 3, "attribute 8" }, { 9, 0, "attribute 9" }, { 1, 0, "attribute 1" }, { 10, 9, "larger than the padded" },
      { 14, 2, "padding at most half" }, { 16, 0.5, "attribute 16" },
    }
    for _, case in ipairs(bad) do
      local attrs = { unpack(good) }
      attrs[case[1]] = case[2]
      local rc, msg = run(ds.empty(2, 3, 3, 3), attrs)
      assert.are_not.equal(0, rc)
      assert.truthy(msg:find("conv2d_pool", 1, true) and msg:find(case[3], 1, true), msg)
    end
    local rc, msg = run(ds.empty(2, 3, 4, 4), good)
    assert.are_not.equal(0, rc)
    assert.truthy(msg:find("conv2d_pool: output has shape", 1, true), msg)
  end)

  local torch = os.execute("env -u LD_PRELOAD /usr/bin/python3 -c 'import torch' 2>/dev/null") == 0
  local lenet = torch and it or pending
  lenet("PyTorch's LeNet-5 export (bench/torch_exports.py), frozen: two conv2d_pool steps, the unfused bits", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("env -u LD_PRELOAD /usr/bin/python3 bench/torch_exports.py " .. dir .. " >/dev/null 2>&1") == 0)
    local g = ds.onnx.load(dir .. "/lenet.onnx")
    local cg = ds.compile(g, { freeze = true })
    local plain = ds.compile(g, { freeze = true, epilogue = false })
    assert.equal(2, count(cg), tostring(cg))
    for _, N in ipairs({ 1, 16, 50 }) do
      local x = ds.rand(N, 1, 28, 28)
      assert(H.bitwise(cg(x), plain(x)), "batch " .. N)
    end
    os.execute("rm -rf " .. dir)
  end)
end)
