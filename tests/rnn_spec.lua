-- tests/rnn_spec.lua: RNN, LSTM and GRU against PyTorch 1.13 on copied weights (fixtures from
-- gen_rnn_fixtures.py): outputs, final states, input/state/parameter gradients; PyTorch's names and
-- initialization; traced == compiled == eager with the time loop unrolled; clear errors.
local ds = require("ds")
local H = require("helpers")
local nn = ds.nn

local fixtures = H.fixture("rnn.json")

local function T(e) return ds.tensor(e.data, { dtype = e.dtype }):reshape(e.shape) end

-- f32 results differ from PyTorch's by summation order only (the same formulas, other GEMMs)
local function close(a, b, what, dt)
  local rtol, atol = 2e-4, 2e-5
  if dt == "f64" then rtol, atol = 1e-10, 1e-12 end
  local ok, err = pcall(H.close, a, b, rtol, atol)
  assert(ok, what .. ": " .. tostring(err))
end

local function build(case)
  local m = nn[case.ctor](case.sizes[1], case.sizes[2], case.opts)
  local sd = {}
  for k, e in pairs(case.state_dict) do sd[k] = T(e) end
  m:load_state_dict(sd)
  return m:eval()
end

describe("RNN / LSTM / GRU match PyTorch on the same weights", function()
  for _, case in ipairs(fixtures.cases) do
    it(case.name, function()
      local m = build(case)
      local x = T(case.input):requires_grad_()
      local leaves, hx = { x }, nil
      for i, e in ipairs(case.hx) do leaves[i + 1] = T(e):requires_grad_() end
      if #case.hx == 1 then hx = leaves[2] elseif #case.hx == 2 then hx = { leaves[2], leaves[3] } end
      local out, hn = m(x, hx)
      local finals = case.ctor == "LSTM" and hn or { hn }
      local dt = case.input.dtype
      close(out, T(case.output), "output", dt)
      assert.same(case.output.shape, out.shape)
      for i, e in ipairs(case.finals) do
        close(finals[i], T(e), "final state " .. i, dt)
        assert.same(e.shape, finals[i].shape)
      end
      local loss = (out * T(case.r[1])):sum()
      for i, f in ipairs(finals) do loss = loss + (f * T(case.r[i + 1])):sum() end
      loss:backward()
      for i, e in ipairs(case.input_grads) do close(leaves[i].grad, T(e), "grad of input " .. i, dt) end
      local n = 0
      for name, p in m:named_parameters() do
        n = n + 1
        assert(case.param_grads[name], "unexpected parameter " .. name)
        close(p.grad, T(case.param_grads[name]), "grad of " .. name, dt)
      end
      local expected = 0
      for _ in pairs(case.param_grads) do expected = expected + 1 end
      assert.equal(expected, n)
    end)
  end
end)

describe("RNN modules", function()
  it("name and initialize parameters as PyTorch (U(-1/sqrt(H), 1/sqrt(H)), gates stacked)", function()
    ds.manual_seed(3)
    local m = nn.GRU(5, 16, { num_layers = 2, bidirectional = true })
    local names = {}
    for name, p in m:named_parameters() do
      names[#names + 1] = name
      assert(p:abs():max():item() <= 0.25)
      assert(p:abs():max():item() > 0.2) -- spread over the range
    end
    assert.same({ "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                  "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
                  "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
                  "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse" }, names)
    assert.same({ 48, 5 }, m.weight_ih_l0.shape)
    assert.same({ 48, 32 }, m.weight_ih_l1.shape)
    assert.same({ 64, 3 }, nn.LSTM(3, 16).weight_ih_l0.shape)
  end)

  it("apply dropout between layers in training mode only", function()
    ds.manual_seed(1)
    local m = nn.LSTM(3, 8, { num_layers = 2, dropout = 0.5 })
    local x = ds.randn(4, 2, 3)
    local eval_out = m:eval()(x)
    local train_out = m:train()(x)
    assert.is_false(H.bitwise(eval_out, train_out))
    local single = nn.LSTM(3, 8, { dropout = 0.5 }):train()
    assert(H.bitwise(single(x), single:eval()(x))) -- one layer: no layer to drop between
  end)

  it("trace and compile with the time loop unrolled, equal to eager bitwise", function()
    ds.manual_seed(2)
    local m = nn.LSTM(4, 6, { num_layers = 2, batch_first = true, bidirectional = true }):eval()
    local function f(x, h0, c0)
      local out, st = m(x, { h0, c0 })
      return out, st[1], st[2]
    end
    local x, h0, c0 = ds.randn(3, 5, 4), ds.randn(4, 3, 6), ds.randn(4, 3, 6)
    local specs = { ds.spec({ 3, 5, 4 }, "f32", "x"), ds.spec({ 4, 3, 6 }, "f32", "h0"), ds.spec({ 4, 3, 6 }, "f32", "c0") }
    local g = ds.trace(f, specs)
    local cg = ds.compile(f, specs)
    local e = { f(x, h0, c0) }
    local t = { g(x, h0, c0) }
    local c = { cg(x, h0, c0) }
    for i = 1, 3 do
      assert(H.bitwise(e[i], t[i]), "traced output " .. i)
      assert(H.bitwise(e[i], c[i]), "compiled output " .. i)
    end
    local gru = nn.GRU(4, 6)
    H.raises(function() ds.trace(function(x) return (gru(x)) end, { ds.spec({ "T", 2, 4 }, "f32", "x") }) end,
      "GRU", "sequence length must be fixed")
  end)

  it("take PyTorch's positional constructor arguments as the options table", function()
    ds.manual_seed(5)
    local a = nn.RNN(3, 4, 2, "relu", false, true, 0, true)
    ds.manual_seed(5)
    local b = nn.RNN(3, 4, { num_layers = 2, nonlinearity = "relu", bias = false, batch_first = true, bidirectional = true })
    assert.equal(tostring(b), tostring(a))
    local x = ds.randn(2, 5, 3)
    assert(H.bitwise(b(x), a(x)))
    assert.is_nil(a.bias_ih_l0)
    local lstm = nn.LSTM(3, 4, 3, true, true, 0.5)
    assert.are.same({ 3, true, 0.5 }, { lstm.num_layers, lstm.batch_first, lstm.dropout })
  end)

  it("reject bad input, states and options clearly", function()
    local m = nn.LSTM(3, 4)
    H.raises(function() m(ds.randn(5, 2, 4)) end, "LSTM", "(T,N,3)", "(5,2,4)")
    H.raises(function() m(ds.randn(5, 2, 3), ds.zeros(1, 2, 4)) end, "LSTM", "{h0, c0}")
    H.raises(function() m(ds.randn(5, 2, 3), { ds.zeros(1, 3, 4), ds.zeros(1, 2, 4) }) end, "LSTM", "h0", "(1,2,4)", "(1,3,4)")
    H.raises(function() m(ds.randn(5, 2, 3, { dtype = "f64" })) end, "LSTM", "f64")
    H.raises(function() nn.GRU(3, 4)(ds.randn(5, 2, 3), ds.zeros(2, 2, 4)) end, "GRU", "h0")
    H.raises(function() nn.LSTM(3, 4, { proj_size = 4 }) end, "LSTM", "proj_size") -- must be < hidden_size
    H.raises(function() nn.GRU(3, 4, { nonlinearity = "relu" }) end, "GRU", "unknown option 'nonlinearity'")
    H.raises(function() nn.RNN(3, 4, { nonlinearity = "gelu" }) end, "RNN", "nonlinearity")
    H.raises(function() nn.RNN(3, 4, { hidden = 2 }) end, "RNN", "unknown option 'hidden'")
    H.raises(function() nn.LSTM(3) end, "LSTM", "input_size, hidden_size")
    H.raises(function() nn.LSTM(3, 4, { num_layers = 0 }) end, "num_layers")
    H.raises(function() nn.LSTM(3, 4, 2, { num_layers = 2 }) end, "LSTM", "num_layers given twice")
    H.raises(function() nn.GRU(3, 4, 1, true, "yes") end, "GRU", "batch_first", "boolean")
    H.raises(function() nn.GRU(3, 4, 1, true, false, 0, false, 0) end, "GRU", "at most 5 positional")
  end)
end)
