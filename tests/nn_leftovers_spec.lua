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
  it("keeps rejecting other momentum values", function()
    H.raises(function() nn.BatchNorm1d(3, { momentum = true }) end, "BatchNorm1d", "momentum")
    H.raises(function() nn.BatchNorm2d(3, { momentum = 2 }) end, "BatchNorm2d", "momentum")
    H.raises(function() nn.BatchNorm3d(3, { momentum = "none" }) end, "BatchNorm3d", "momentum")
  end)
end)
