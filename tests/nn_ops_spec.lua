-- tests/nn_ops_spec.lua: conv2d, max/avg_pool2d, layer_norm, batch_norm against PyTorch fixtures
-- (tests/gen_nn_fixtures.py), second-order conv grads by finite differences, threads, errors.
local ds = require("ds")
local H = require("helpers")


local function T(spec, dt)
  return ds.tensor(spec.data, { dtype = dt }):reshape(spec.shape)
end

-- f32 results are compared relative to the reference's scale
local TOL = { f64 = { 1e-9, 1e-9 }, f32 = { 1e-4, 2e-4 } }
local function close(a, spec, dt)
  return H.close(a, T(spec, "f64"), TOL[dt][1], TOL[dt][2])
end

-- Lua options from a fixture's torch kwargs
local function opts_of(o)
  local r = {}
  for k, v in pairs(o) do r[k] = v end
  return r
end

describe("conv2d against PyTorch", function()
  for _, c in ipairs(H.fixture("nn_conv.json")) do
    for _, dt in ipairs { "f64", "f32" } do
      it(c.name .. " (" .. dt .. ")", function()
        local x, w = T(c.x, dt):requires_grad_(), T(c.w, dt):requires_grad_()
        local b = c.b and T(c.b, dt):requires_grad_() or nil
        local y = ds.conv2d(x, w, b, opts_of(c.opts))
        assert.same(c.y.shape, y.shape)
        close(y, c.y, dt)
        y:backward(T(c.gy, dt))
        close(x.grad, c.gx, dt)
        close(w.grad, c.gw, dt)
        if b then close(b.grad, c.gb, dt) end
      end)
    end
  end

  it("accepts an unbatched (C,H,W) input, options in third place and padding 'same'", function()
    local c = H.fixture("nn_conv.json")[10] -- lenet conv1, padding 2, no... with bias
    local x, w = T(c.x, "f64"), T(c.w, "f64")
    local y = ds.conv2d(x[1], w, { padding = "same" })
    assert.same({ 6, 28, 28 }, y.shape)
    local ref = ds.conv2d(x, w, nil, { padding = 2 })
    assert.is_true(H.bitwise(y, ref[1]:contiguous()))
    assert.is_true(H.bitwise(x:conv2d(w, nil, { padding = 2 }), ref))
  end)
end)

describe("stride-1 conv2d (the direct path)", function()
  -- the column matrix of x (N, C, H, W) for a stride-1 kernel KH x KW: (N, C*KH*KW, OH*OW), rows (c, kh, kw)
  local function columns(x, KH, KW, ph, pw, dh, dw)
    local N, C = x.shape[1], x.shape[2]
    local xp = ds.nn.functional.pad(x, { pw, pw, ph, ph })
    local OH, OW = xp.shape[3] - (KH - 1) * dh, xp.shape[4] - (KW - 1) * dw
    local rows = {}
    for c = 1, C do
      for kh = 0, KH - 1 do
        for kw = 0, KW - 1 do
          rows[#rows + 1] = xp:narrow(2, c, 1):narrow(3, kh * dh + 1, OH):narrow(4, kw * dw + 1, OW)
            :reshape(N, 1, OH * OW)
        end
      end
    end
    return ds.cat(rows, 2), OH, OW
  end
  -- { N, C, H, W, OC, KH, KW, ph, pw, dh, dw }: LeNet's two convolutions, dilation, a 1x1 and a wide kernel
  local cases = { { 3, 1, 28, 28, 6, 5, 5, 2, 2, 1, 1 }, { 4, 6, 14, 14, 16, 5, 5, 0, 0, 1, 1 },
                  { 2, 4, 9, 11, 7, 3, 2, 1, 0, 2, 1 }, { 2, 3, 6, 6, 20, 1, 1, 0, 0, 1, 1 },
                  { 1, 2, 7, 40, 9, 3, 7, 1, 3, 1, 1 } }
  it("forward equals the weights times the column matrix plus the bias, bit for bit", function()
    ds.manual_seed(4)
    for _, c in ipairs(cases) do
      local N, C, Hh, W, OC, KH, KW, ph, pw, dh, dw = unpack(c)
      local x, w, b = ds.randn(N, C, Hh, W), ds.randn(OC, C, KH, KW), ds.randn(OC)
      local y = ds.conv2d(x, w, b, { padding = { ph, pw }, dilation = { dh, dw } })
      local col, OH, OW = columns(x, KH, KW, ph, pw, dh, dw)
      local ref = (w:reshape(OC, C * KH * KW):matmul(col) + b:reshape(1, OC, 1)):reshape(N, OC, OH, OW)
      assert.is_true(H.bitwise(y, ref), table.concat(c, ","))
    end
  end)
end)

describe("pooling against PyTorch", function()
  for _, c in ipairs(H.fixture("nn_pool.json")) do
    for _, dt in ipairs { "f64", "f32" } do
      it(c.name .. " (" .. dt .. ")", function()
        local x = T(c.x, dt):requires_grad_()
        local o = opts_of(c.opts)
        local y, idx
        if c.op == "max" then
          o.return_indices = true
          y, idx = ds.max_pool2d(x, c.kernel, o)
          assert.equal("i64", idx.dtype)
          assert.same(c.idx.data, idx:reshape(-1):totable())
        else
          y = ds.avg_pool2d(x, c.kernel, o)
        end
        assert.same(c.y.shape, y.shape)
        close(y, c.y, dt)
        y:backward(T(c.gy, dt))
        close(x.grad, c.gx, dt)
      end)
    end
  end

  it("2x2 max_pool2d: f32's vector path picks the general code's value and index (ties, row tails, NaN)", function()
    ds.manual_seed(8)
    for _, hw in ipairs { { 2, 2 }, { 4, 10 }, { 6, 18 }, { 28, 28 }, { 5, 33 }, { 3, 40 } } do
      -- few distinct values: many ties, which the first of a, b, c, d in window order wins
      local x = (ds.rand(3, 2, hw[1], hw[2]) * 4):floor()
      if hw[1] == 28 then x[{ 2, 1, 5, 7 }] = 0 / 0 end   -- a plane with NaN takes the general code
      local y32, i32 = ds.max_pool2d(x, 2, { return_indices = true })
      local y64, i64 = ds.max_pool2d(x:astype("f64"), 2, { return_indices = true })   -- f64: the general code
      assert(H.bitwise(y32, y64:astype("f32")), table.concat(hw, "x"))
      assert(H.bitwise(i32, i64), table.concat(hw, "x"))
    end
  end)

  it("max_pool2d propagates NaN like PyTorch", function()
    local x = ds.tensor({ 1, 0 / 0, 3, 2 }):reshape(1, 1, 2, 2)
    local y = ds.max_pool2d(x, 2)
    assert.is_true(y:item() ~= y:item())
  end)
end)

describe("layer_norm against PyTorch", function()
  for _, c in ipairs(H.fixture("nn_norm.json").layer_norm) do
    for _, dt in ipairs { "f64", "f32" } do
      it(c.name .. " (" .. dt .. ")", function()
        local x = T(c.x, dt):requires_grad_()
        local w = c.w and T(c.w, dt):requires_grad_() or nil
        local b = c.b and T(c.b, dt):requires_grad_() or nil
        local y = ds.layer_norm(x, c.ns, w, b, c.eps)
        close(y, c.y, dt)
        y:backward(T(c.gy, dt))
        close(x.grad, c.gx, dt)
        if w then close(w.grad, c.gw, dt); close(b.grad, c.gb, dt) end
      end)
    end
  end
end)

describe("batch_norm (functional) against PyTorch", function()
  for _, c in ipairs(H.fixture("nn_norm.json").batch_norm) do
    it(c.name, function()
      if not ds.Tensor.mean then pending("needs reductions (x:mean)") return end
      local x, w, b = T(c.x, "f64"):requires_grad_(), T(c.w, "f64"):requires_grad_(), T(c.b, "f64"):requires_grad_()
      local rm, rv = T(c.rm, "f64"), T(c.rv, "f64")
      local y = ds.batch_norm(x, rm, rv, w, b, c.training, c.momentum, c.eps)
      close(y, c.y, "f64")
      close(rm, c.rm_after, "f64")
      close(rv, c.rv_after, "f64")
      y:backward(T(c.gy, "f64"))
      close(x.grad, c.gx, "f64")
      close(w.grad, c.gw, "f64")
      close(b.grad, c.gb, "f64")
    end)
  end
end)

-- <a, b> of two tensors as a Lua number
local function dot(a, b)
  local ta, tb = a:reshape(-1):totable(), b:reshape(-1):totable()
  local s = 0
  for i = 1, #ta do s = s + ta[i] * tb[i] end
  return s
end

describe("second-order gradients", function()
  -- d/dw <v, dL/dx> where L = <gy, conv(x, w)>, checked by central differences on w
  local function check(opts, xs, ws)
    ds.manual_seed(3)
    local x = ds.randn(xs, { dtype = "f64" }):requires_grad_()
    local w = ds.randn(ws, { dtype = "f64" }):requires_grad_()
    local y = ds.conv2d(x, w, nil, opts)
    local gy = ds.randn(y.shape, { dtype = "f64" })
    local v = ds.randn(xs, { dtype = "f64" })
    local gx = ds.grad(y, { x }, { grad_outputs = { gy }, create_graph = true })[1]
    local gw = ds.grad(gx, { w }, { grad_outputs = { v } })[1]
    local function f(wt) return dot(ds.grad(ds.conv2d(x, wt:requires_grad_(), nil, opts), { x }, { grad_outputs = { gy } })[1], v) end
    local flat, eps = w:detach():reshape(-1):totable(), 1e-6
    local g = gw:reshape(-1):totable()
    for i = 1, #flat, math.max(1, math.floor(#flat / 7)) do
      local p, m = {}, {}
      for j = 1, #flat do p[j], m[j] = flat[j], flat[j] end
      p[i], m[i] = flat[i] + eps, flat[i] - eps
      local num = (f(ds.tensor(p, { dtype = "f64" }):reshape(ws)) - f(ds.tensor(m, { dtype = "f64" }):reshape(ws))) / (2 * eps)
      assert(math.abs(num - g[i]) < 1e-5 * (1 + math.abs(num)), string.format("w[%d]: %g vs %g", i, g[i], num))
    end
  end
  it("conv2d grad input differentiated w.r.t. the weight", function()
    check({ stride = 2, padding = 1 }, { 2, 2, 6, 5 }, { 3, 2, 3, 3 })
    check({ groups = 2, dilation = 2, padding = 2 }, { 1, 4, 7, 7 }, { 2, 2, 3, 3 })
  end)
  it("layer_norm grad input differentiated w.r.t. the weight (create_graph uses ds ops)", function()
    ds.manual_seed(4)
    local x = ds.randn({ 3, 2, 4 }, { dtype = "f64" }):requires_grad_()
    local w = ds.randn({ 2, 4 }, { dtype = "f64" }):requires_grad_()
    local gy, v = ds.randn({ 3, 2, 4 }, { dtype = "f64" }), ds.randn({ 3, 2, 4 }, { dtype = "f64" })
    local function gx_of(wt) return ds.grad(ds.layer_norm(x, { 2, 4 }, wt), { x }, { grad_outputs = { gy }, create_graph = true })[1] end
    local gx = gx_of(w)
    local fast = ds.grad(ds.layer_norm(x, { 2, 4 }, w), { x }, { grad_outputs = { gy } })[1]
    H.close(gx, fast, 1e-10, 1e-10)
    local gw = ds.grad(gx, { w }, { grad_outputs = { v } })[1]:reshape(-1):totable()
    local flat, eps = w:detach():reshape(-1):totable(), 1e-6
    for i = 1, #flat, 3 do
      local p, m = {}, {}
      for j = 1, #flat do p[j], m[j] = flat[j], flat[j] end
      p[i], m[i] = flat[i] + eps, flat[i] - eps
      local fp = dot(gx_of(ds.tensor(p, { dtype = "f64" }):reshape(2, 4)), v)
      local fm = dot(gx_of(ds.tensor(m, { dtype = "f64" }):reshape(2, 4)), v)
      local num = (fp - fm) / (2 * eps)
      assert(math.abs(num - gw[i]) < 1e-5 * (1 + math.abs(num)), string.format("w[%d]: %g vs %g", i, gw[i], num))
    end
  end)
  it("avg_pool2d twice differentiable; max_pool2d says it is not", function()
    local x = ds.randn({ 1, 1, 4, 4 }, { dtype = "f64" }):requires_grad_()
    local y = ds.avg_pool2d(x, 2)
    local gx = ds.grad(y, { x }, { grad_outputs = { ds.ones_like(y) }, create_graph = true })[1]
    H.close(gx, ds.full({ 1, 1, 4, 4 }, 0.25))
    local m = ds.max_pool2d(x, 2)
    local v = ds.ones_like(m):requires_grad_()
    local gm = ds.grad(m, { x }, { grad_outputs = { v }, create_graph = true })[1]
    H.raises(function() gm:backward(ds.ones_like(gm)) end, "max_pool2d", "second-order")
  end)
end)

describe("threads and batching", function()
  -- each op on a batch large enough for the parallel path equals the op image by image, and
  -- 1 thread equals 2 threads bit for bit (forward and every grad)
  local function run(f, x, extra)
    local xr = x:detach():requires_grad_()
    local er = extra and extra:detach():requires_grad_() or nil
    local y = f(xr, er)
    ds.manual_seed(9)
    y:backward(ds.randn(y.shape))
    return y, xr.grad, er and er.grad
  end
  local cases = {
    { "conv2d", function(x, w) return ds.conv2d(x, w, nil, { padding = 2 }) end, { 64, 3, 28, 28 }, { 6, 3, 5, 5 } },
    { "conv2d 6 -> 16", function(x, w) return ds.conv2d(x, w) end, { 64, 6, 14, 14 }, { 16, 6, 5, 5 } },
    { "conv2d dilated, grouped",
      function(x, w) return ds.conv2d(x, w, nil, { padding = { 2, 1 }, dilation = 2, groups = 2 }) end,
      { 64, 4, 15, 13 }, { 6, 2, 3, 3 } },
    { "max_pool2d", function(x) return ds.max_pool2d(x, 2) end, { 64, 6, 28, 28 } },
    { "avg_pool2d", function(x) return ds.avg_pool2d(x, 3, { stride = 2, padding = 1 }) end, { 64, 6, 28, 28 } },
    { "layer_norm", function(x, w) return ds.layer_norm(x, { 64 }, w) end, { 64, 16, 64 }, { 64 } },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      ds.manual_seed(1)
      local x = ds.randn(c[3])
      local e = c[4] and ds.randn(c[4]) or nil
      local prev = ds.get_num_threads()
      ds.set_num_threads(1)
      local y1, gx1, ge1 = run(c[2], x, e)
      ds.set_num_threads(2)
      local y2, gx2, ge2 = run(c[2], x, e)
      ds.set_num_threads(prev)
      assert.is_true(H.bitwise(y1, y2))
      assert.is_true(H.bitwise(gx1, gx2))
      if e then assert.is_true(H.bitwise(ge1, ge2)) end
      local one = c[2](x:narrow(1, 5, 1), e)
      assert.is_true(H.bitwise(one, y2:narrow(1, 5, 1):contiguous()))
    end)
  end
end)

describe("nn op errors", function()
  local x = ds.randn(2, 4, 8, 8)
  it("conv2d: channel mismatch, kernel larger than input, groups not dividing", function()
    H.raises(function() ds.conv2d(x, ds.randn(3, 3, 3, 3)) end, "conv2d", "4 channels", "(3,3,3,3)")
    H.raises(function() ds.conv2d(x, ds.randn(3, 4, 9, 9)) end, "conv2d", "larger than the padded input", "(2,4,8,8)")
    H.raises(function() ds.conv2d(x, ds.randn(3, 4, 3, 3), nil, { groups = 3 }) end, "conv2d", "groups 3")
    H.raises(function() ds.conv2d(x, ds.randn(6, 1, 3, 3), nil, { groups = 3 }) end, "conv2d", "groups 3")
    H.raises(function() ds.conv2d(x, ds.randn(3, 4, 3, 3), ds.randn(2)) end, "conv2d", "bias")
    H.raises(function() ds.conv2d(x, ds.randn(3, 4, 3, 3), nil, { stride = 0 }) end, "conv2d", "stride")
    H.raises(function() ds.conv2d(x, ds.randn(3, 4, 3, 3), nil, { padding = { 1, 2, 3 } }) end, "conv2d", "padding")
    H.raises(function() ds.conv2d(x, ds.randn(3, 4, 3, 3), nil, { strides = 2 }) end, "conv2d", "unknown option 'strides'")
    H.raises(function() ds.conv2d(ds.randn(8, 8), ds.randn(3, 4, 3, 3)) end, "conv2d", "(8,8)")
    H.raises(function() ds.conv2d(x, ds.randn(3, 4, 4, 4), nil, { padding = "same" }) end, "conv2d", "same")
  end)
  it("pools: kernel larger than input, padding over half the kernel", function()
    H.raises(function() ds.max_pool2d(x, 9) end, "max_pool2d", "larger than the padded input")
    H.raises(function() ds.avg_pool2d(x, 2, { padding = 2 }) end, "avg_pool2d", "at most half")
    H.raises(function() ds.max_pool2d(ds.randn(4), 2) end, "max_pool2d", "(4)")
  end)
  it("layer_norm: shape mismatches", function()
    H.raises(function() ds.layer_norm(x, { 7 }) end, "layer_norm", "(7)", "(2,4,8,8)")
    H.raises(function() ds.layer_norm(x, { 8 }, ds.ones(7)) end, "layer_norm", "weight")
  end)
  it("batch_norm: wrong stat sizes, eval without stats", function()
    H.raises(function() ds.batch_norm(x, ds.zeros(3), ds.ones(3), nil, nil, false) end, "batch_norm", "must be a (4) tensor")
    H.raises(function() ds.batch_norm(x, nil, nil, nil, nil, false) end, "batch_norm", "running")
  end)
  it("C kernels reject inconsistent shapes with an error, not a crash", function()
    local ffi = require("ffi")
    local C = require("ds.ffi").C
    local function call(name, tensors, attrs)
      local k = C.ds_kernel_find(name)
      local tb = ffi.new("ds_tensor*[?]", #tensors)
      for i, t in ipairs(tensors) do tb[i - 1] = t._c end
      local ab = ffi.new("double[?]", #attrs + 1, attrs)
      local rc = k(tb, ab)
      return rc, ffi.string(C.ds_last_error())
    end
    local out = ds.empty(2, 3, 5, 5)
    local rc, msg = call("ds_conv2d_f32", { out, x, ds.randn(3, 4, 3, 3), ds.randn(3) }, { 1, 1, 0, 0, 1, 1, 1 })
    assert.is_true(rc ~= 0 and msg:find("output", 1, true) ~= nil, msg)
    rc, msg = call("ds_conv2d_f32", { ds.empty(2, 3, 6, 6), x, ds.randn(3, 4, 3, 3), ds.randn(3) }, { 1, 1, 0, 0, 1, 1, 0 })
    assert.is_true(rc ~= 0 and msg:find("groups", 1, true) ~= nil, msg)
    rc, msg = call("ds_conv2d_backward_weight_f32", { ds.empty(3, 4, 3, 3), ds.randn(2, 3, 6, 6), x }, { 1, 1, 0, 0, 1, 1, 1, 3, -1 })
    assert.is_true(rc ~= 0, msg)
    rc, msg = call("ds_max_pool2d_backward_f32", { ds.empty(1, 1, 4, 4), ds.randn(1, 1, 2, 2), ds.full({ 1, 1, 2, 2 }, 99, { dtype = "i64" }) },
      { 2, 2, 2, 2, 0, 0 })
    assert.is_true(rc ~= 0 and msg:find("outside", 1, true) ~= nil, msg)
    rc, msg = call("ds_layer_norm_f32", { ds.empty(2, 5), ds.empty(2), ds.empty(2), ds.randn(2, 5), ds.ones(4), ds.zeros(5) }, { 5, 1e-5 })
    assert.is_true(rc ~= 0 and msg:find("weight", 1, true) ~= nil, msg)
    rc, msg = call("ds_avg_pool2d_f64", { ds.empty(1, 1, 1, 1), ds.randn(1, 1, 2, 2) }, { 2, 2, 1, 1, 0, 0, 1 })
    assert.is_true(rc ~= 0 and msg:find("f64", 1, true) ~= nil, msg)
  end)
  it("C kernels survive near-miss shapes and attrs (each call succeeds or reports an error)", function()
    local ffi = require("ffi")
    local C = require("ds.ffi").C
    local seed = 12345
    local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return math.floor(seed / 65536) % n end
    -- consistent operands for one kernel from a random conv geometry; then maybe one size or attr is off
    local function case()
      local G = 1 + rnd(2)
      local N, Cg, OCg, H, W = rnd(3), 1 + rnd(2), 1 + rnd(2), 1 + rnd(6), 1 + rnd(6)
      local K, s, p, d = 1 + rnd(3), 1 + rnd(2), rnd(2), 1 + rnd(2)
      local C_, OC = Cg * G, OCg * G
      local OH = math.floor((H + 2 * p - (K - 1) * d - 1) / s) + 1
      local OW = math.floor((W + 2 * p - (K - 1) * d - 1) / s) + 1
      local PK, PS, PP = 1 + rnd(3), 1 + rnd(2), rnd(2)
      local POH = math.floor((H + 2 * PP - PK) / PS) + 1
      local POW = math.floor((W + 2 * PP - PK) / PS) + 1
      local conv = { s, s, p, p, d, d, G }
      local x, gy, w = { N, C_, H, W }, { N, OC, OH, OW }, { OC, Cg, K, K }
      local pool, py = { PK, PK, PS, PS, PP, PP, 1 }, { N, C_, POH, POW }
      local R, D = 1 + rnd(4), 1 + rnd(5)
      local list = {
        { "ds_conv2d_f32", { gy, x, w, { OC } }, conv },
        { "ds_conv2d_backward_input_f32", { x, gy, w }, { s, s, p, p, d, d, G, H, W } },
        { "ds_conv2d_backward_weight_f32", { w, gy, x }, { s, s, p, p, d, d, G, K, K } },
        { "ds_conv2d_backward_bias_f32", { { OC }, gy }, {} },
        { "ds_max_pool2d_f32", { py, py, x }, pool, 2 },
        { "ds_max_pool2d_backward_f32", { x, py, py }, pool, 3 },
        { "ds_avg_pool2d_f32", { py, x }, pool },
        { "ds_avg_pool2d_backward_f32", { x, py }, pool },
        { "ds_layer_norm_f32", { { R, D }, { R }, { R }, { R, D }, { D }, { D } }, { D, 1e-5 } },
        { "ds_layer_norm_backward_f32", { { R, D }, { D }, { D }, { R, D }, { R, D }, { R }, { R }, { D } }, { D } },
      }
      local k = list[rnd(#list) + 1]
      local shapes, attrs = k[2], k[3]
      if rnd(2) == 0 and #attrs > 0 then attrs[rnd(#attrs) + 1] = rnd(5) - 1 end
      if rnd(2) == 0 then local sh = shapes[rnd(#shapes) + 1]; sh[rnd(#sh) + 1] = rnd(5) end
      local ts = {}
      for i, sh in ipairs(shapes) do
        local ok = true
        for _, v in ipairs(sh) do if v < 0 then ok = false end end
        if not ok then return nil end
        ts[i] = i == k[4] and ds.ones(sh, { dtype = "i64" }) or ds.randn(sh)
      end
      return k[1], ts, attrs
    end
    local ran, failed = 0, 0
    for _ = 1, 600 do
      local name, ts, attrs = case()
      if name then
        local tb = ffi.new("ds_tensor*[?]", #ts)
        for i, t in ipairs(ts) do tb[i - 1] = t._c end
        local rc = C.ds_kernel_find(name)(tb, ffi.new("double[?]", #attrs + 1, attrs))
        if rc == 0 then ran = ran + 1 else failed = failed + 1 end
      end
    end
    assert.is_true(ran > 100 and failed > 100, ran .. " ran, " .. failed .. " refused")
  end)
end)
