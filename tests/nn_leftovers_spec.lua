-- tests/nn_leftovers_spec.lua: calls PyTorch ports hit first, against PyTorch 1.13 (fixtures from
-- gen_nn_leftovers_fixtures.py): x:unfold(dim, size, step), BatchNorm with momentum = false (PyTorch's
-- momentum=None), unbatched MultiheadAttention and LSTM proj_size; eager, traced / compiled and gradients.
local ds = require("ds")
local H = require("helpers")
local nn = ds.nn

local fixtures = H.fixture("nn_leftovers.json")

local function T(e) return ds.tensor(e.data, { dtype = e.dtype }):reshape(e.shape) end

local function close(a, b, what, rtol, atol)
  local ok, err = pcall(H.close, a, b, rtol or 1e-10, atol or 1e-12)
  assert(ok, what .. ": " .. tostring(err))
end

describe("x:unfold(dim, size, step)", function()
  for i, c in ipairs(fixtures.unfold) do
    it(string.format("case %d: dim %d, size %d, step %d, as PyTorch, with its gradient", i, c.dim, c.size, c.step),
      function()
        local x = T(c.input):requires_grad_()
        local y = x:unfold(c.dim, c.size, c.step)
        assert.same(c.output.shape, y.shape)
        close(y, T(c.output), "output")
        ds.sum(y * T(c.r)):backward()
        close(x.grad, T(c.grad), "grad")
        local f = function(t) return t:unfold(c.dim, c.size, c.step) end
        local specs = { ds.spec(c.input.shape, "f64", "x") }
        assert(H.bitwise(ds.trace(f, specs)(T(c.input)), y:detach()), "traced")
        assert(H.bitwise(ds.compile(f, specs)(T(c.input)), y:detach()), "compiled")
      end)
  end
  it("is a view sharing x's storage, as PyTorch's: a write through it reaches x", function()
    local x = ds.arange(10, { dtype = "f64" }):reshape(2, 5)
    local y = x:unfold(2, 2, 2)
    assert.same({ 2, 2, 2 }, y.shape)
    y:select(3, 2):fill_(-1)
    assert.same({ { 0, -1, 2, -1, 4 }, { 5, -1, 7, -1, 9 } }, x:totable())
    local t = x:t():unfold(1, 3, 1) -- a non-contiguous input: (3, 2, 3)
    assert.same({ 3, 2, 3 }, t.shape)
    assert.same({ { -1, 2, -1 }, { -1, 7, -1 } }, t:select(1, 2):totable())
  end)
  it("rejects bad arguments clearly", function()
    local x = ds.randn(3, 4)
    H.raises(function() x:unfold(2, 5, 1) end, "unfold", "size 5")
    H.raises(function() x:unfold(2, 2, 0) end, "unfold", "step")
    H.raises(function() x:unfold(3, 2, 1) end, "unfold")
    H.raises(function() ds.tensor(1):unfold(1, 1, 1) end, "unfold", "0-d")
  end)
end)

describe("BatchNorm with momentum = false (PyTorch's momentum=None: a cumulative average)", function()
  for _, c in ipairs(fixtures.batchnorm) do
    local function build()
      local m = nn[c.ctor](3, { momentum = false })
      m:load_state_dict({ weight = T(c.weight), bias = T(c.bias), running_mean = ds.zeros(3), running_var = ds.ones(3),
        num_batches_tracked = ds.zeros({}, { dtype = "i64" }) })
      return m
    end
    local function check(m, what)
      close(m.running_mean, T(c.running_mean), what .. " running_mean", 1e-5, 1e-6)
      close(m.running_var, T(c.running_var), what .. " running_var", 1e-5, 1e-6)
      assert.equal(c.num_batches_tracked, m.num_batches_tracked:item())
    end
    it(c.ctor .. " " .. table.concat(c.inputs[1].shape, "x") .. ": running stats, output, gradient", function()
      local m = build():train()
      for i = 1, #c.inputs - 1 do m(T(c.inputs[i])) end
      local x = T(c.inputs[#c.inputs]):requires_grad_()
      local y = m(x)
      close(y, T(c.output), "output", 1e-5, 1e-5)
      ds.sum(y * T(c.r)):backward()
      close(x.grad, T(c.grad), "grad", 1e-4, 1e-5)
      check(m, "eager")
      m:eval()
      close(m(T(c.eval_input)), T(c.eval_output), "eval output", 1e-5, 1e-5)
      assert.truthy(tostring(m):find("momentum=None", 1, true))
    end)
    it(c.ctor .. ": a compiled training step reads num_batches_tracked at every call", function()
      local m = build():train()
      local step = ds.compile(function(x) return m(x) end, { ds.spec(c.inputs[1].shape, "f32", "x") })
      local y
      for i = 1, #c.inputs do y = step(T(c.inputs[i])) end
      close(y, T(c.output), "compiled output", 1e-5, 1e-5)
      check(m, "compiled")
    end)
  end
  it("keeps nil as the default 0.1 (as differences.md says) and rejects other momentum values", function()
    assert.equal(0.1, nn.BatchNorm2d(3, { momentum = nil }).momentum)
    assert.equal(false, nn.BatchNorm2d(3, { momentum = false }).momentum)
    H.raises(function() nn.BatchNorm1d(3, { momentum = true }) end, "BatchNorm1d", "momentum")
    H.raises(function() nn.BatchNorm2d(3, { momentum = 2 }) end, "BatchNorm2d", "momentum")
    H.raises(function() nn.BatchNorm3d(3, { momentum = "none" }) end, "BatchNorm3d", "momentum")
  end)
end)

describe("unbatched MultiheadAttention: query (L,E), key and value (S,E), key_padding_mask (S)", function()
  for _, c in ipairs(fixtures.mha) do
    local function build()
      local m = nn.MultiheadAttention(c.E, c.H, { kdim = c.opts.kdim, vdim = c.opts.vdim,
        batch_first = c.opts.batch_first, dtype = "f64" })
      local sd = {}
      for k, e in pairs(c.state_dict) do sd[k] = T(e) end
      m:load_state_dict(sd)
      return m
    end
    local function opts(mask)
      return { key_padding_mask = mask, average_attn_weights = c.fwd.average_attn_weights,
               attn_mask = type(c.attn_mask) == "table" and T(c.attn_mask) or nil }
    end
    it(c.name .. ": output (L,E), weights, gradients as PyTorch", function()
      local m = build()
      local leaves = {}
      for i, e in ipairs(c.inputs) do leaves[i] = T(e):requires_grad_() end
      local q = leaves[1]
      local k, v = leaves[2] or q, leaves[3] or q
      local mask = type(c.key_padding_mask) == "table" and T(c.key_padding_mask) or nil
      local out, w = m(q, k, v, opts(mask))
      assert.same(c.output.shape, out.shape)
      assert.same(c.weights.shape, w.shape)
      close(out, T(c.output), "output")
      close(w, T(c.weights), "weights")
      local loss = ds.sum(out * T(c.r)) + ds.sum(w * T(c.rw))
      loss:backward()
      for i, e in ipairs(c.input_grads) do close(leaves[i].grad, T(e), "grad of input " .. i) end
      local n = 0
      for name, p in m:named_parameters() do
        n = n + 1
        close(p.grad, T(c.param_grads[name]), "grad of " .. name)
      end
      local expected = 0
      for _ in pairs(c.param_grads) do expected = expected + 1 end
      assert.equal(expected, n)
    end)
    it(c.name .. ": traced and compiled equal eager", function()
      local m = build():eval()
      local xs = {}
      for i, e in ipairs(c.inputs) do xs[i] = T(e) end
      local mask = type(c.key_padding_mask) == "table" and T(c.key_padding_mask) or nil
      local function f(q, k, v)
        return m(q, k or q, v or q, opts(mask))
      end
      local specs = {}
      for i, e in ipairs(c.inputs) do specs[i] = ds.spec(e.shape, "f64", "x" .. i) end
      local e1, e2 = f(xs[1], xs[2], xs[3])
      for _, g in ipairs { ds.trace(f, specs), ds.compile(f, specs) } do
        local o1, o2 = g(xs[1], xs[2], xs[3])
        close(o1, e1, "output"); close(o2, e2, "weights")
      end
    end)
  end
  it("TransformerEncoderLayer on an unbatched (S,E) input as PyTorch (eval), with the input's gradient", function()
    local c = fixtures.transformer
    local m = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dtype = "f64" })
    local sd = {}
    for k, e in pairs(c.state_dict) do sd[k] = T(e) end
    m:load_state_dict(sd)
    m:eval()
    local x = T(c.input):requires_grad_()
    local y = m(x)
    assert.same(c.output.shape, y.shape)
    close(y, T(c.output), "output")
    ds.sum(y * T(c.r)):backward()
    close(x.grad, T(c.grad), "grad")
  end)
  it("need_weights = false gives the output alone; mixed ranks are refused", function()
    local m = nn.MultiheadAttention(4, 2, { dtype = "f64" })
    local q = ds.randn(3, 4, { dtype = "f64" })
    local out, w = m(q, q, q, { need_weights = false })
    assert.same({ 3, 4 }, out.shape)
    assert.is_nil(w)
    close(out, (m(q, q, q)), "same output")
    H.raises(function() m(q, ds.randn(1, 3, 4, { dtype = "f64" }), q) end, "MultiheadAttention", "key", "2-D")
    H.raises(function() m(q, q, q, { key_padding_mask = ds.zeros(1, 3, { dtype = "bool" }) }) end,
      "MultiheadAttention", "(S)")
  end)
end)

describe("LSTM proj_size (h_t = W_hr (o_t tanh(c_t)))", function()
  for _, c in ipairs(fixtures.lstm) do
    local function build()
      local o = c.opts
      local m = nn.LSTM(c.sizes[1], c.sizes[2], { proj_size = o.proj_size, num_layers = o.num_layers,
        bidirectional = o.bidirectional, batch_first = o.batch_first, bias = o.bias, dtype = "f64" })
      local names = {}
      for name in m:named_parameters() do names[#names + 1] = name end
      assert.same(c.state_names, names) -- PyTorch's names, in its order
      local sd = {}
      for k, e in pairs(c.state_dict) do sd[k] = T(e) end
      m:load_state_dict(sd)
      return m
    end
    it(c.name .. ": output, final states and gradients as PyTorch on its weights", function()
      local m = build()
      local x = T(c.input):requires_grad_()
      local leaves, hx = { x }, nil
      for i, e in ipairs(c.hx) do leaves[i + 1] = T(e):requires_grad_() end
      if #c.hx == 2 then hx = { leaves[2], leaves[3] } end
      local out, st = m(x, hx)
      assert.same(c.output.shape, out.shape)
      close(out, T(c.output), "output")
      for i = 1, 2 do
        assert.same(c.finals[i].shape, st[i].shape)
        close(st[i], T(c.finals[i]), "final state " .. i)
      end
      local loss = ds.sum(out * T(c.r[1])) + ds.sum(st[1] * T(c.r[2])) + ds.sum(st[2] * T(c.r[3]))
      loss:backward()
      for i, e in ipairs(c.input_grads) do close(leaves[i].grad, T(e), "grad of input " .. i) end
      for name, p in m:named_parameters() do close(p.grad, T(c.param_grads[name]), "grad of " .. name) end
    end)
    it(c.name .. ": traced and compiled equal eager", function()
      local m = build():eval()
      local function f(x) local out, st = m(x); return out, st[1], st[2] end
      local specs = { ds.spec(c.input.shape, "f64", "x") }
      local e = { f(T(c.input)) }
      for _, g in ipairs { ds.trace(f, specs), ds.compile(f, specs) } do
        local r = { g(T(c.input)) }
        for i = 1, 3 do close(r[i], e[i], "result " .. i) end
      end
    end)
  end
  it("initializes weight_hr as the others, names proj_size in its repr, refuses proj_size >= hidden_size", function()
    ds.manual_seed(4)
    local m = nn.LSTM(3, 8, { proj_size = 2, num_layers = 2 })
    assert.same({ 2, 8 }, m.weight_hr_l1.shape)
    assert.same({ 32, 2 }, m.weight_hh_l0.shape)
    assert.same({ 32, 2 }, m.weight_ih_l1.shape)
    assert(m.weight_hr_l0:abs():max():item() <= 1 / math.sqrt(8))
    assert.truthy(tostring(m):find("proj_size=2", 1, true))
    H.raises(function() nn.LSTM(3, 4, { proj_size = 4 }) end, "LSTM", "proj_size")
    H.raises(function() m(ds.randn(5, 2, 3), { ds.zeros(2, 2, 8), ds.zeros(2, 2, 8) }) end, "LSTM", "h0", "(2,2,2)")
  end)
end)

describe("in-place functional activations F.relu_, F.elu_, F.leaky_relu_, F.hardtanh_", function()
  for _, c in ipairs(fixtures.inplace) do
    it(c.name .. "(" .. table.concat(c.args, ", ") .. ") on a non-leaf: values and gradient as PyTorch", function()
      local x = T(c.input):requires_grad_()
      local h = x * 2
      local v = h._version
      local y = ds.F[c.name](h, unpack(c.args))
      assert.equal(h, y)
      assert(h._version > v, "the version counter advances")
      close(h, T(c.output), "output")
      ds.sum(h * T(c.r)):backward()
      close(x.grad, T(c.grad), "grad")
      local f = function(t) local u = t * 2; ds.F[c.name](u, unpack(c.args)); return u end
      local specs = { ds.spec(c.input.shape, "f64", "x") }
      assert(H.bitwise(ds.compile(f, specs)(T(c.input)), h:detach()), "compiled")
    end)
  end
  it("a value saved for backward and then overwritten in place is caught", function()
    local x = ds.randn(4, { dtype = "f64" }):requires_grad_()
    local h = x * 2
    local s = h:sigmoid() -- sigmoid's backward needs its result, not h
    local p = h * h -- needs h
    ds.F.elu_(h)
    H.raises(function() ds.sum(p + s):backward() end, "modified by an inplace operation")
    H.raises(function() ds.F.hardtanh_(x * 1, 2, 1) end, "hardtanh", "min_val")
    H.raises(function() ds.F.elu_(3) end, "elu_", "tensor")
  end)
end)
