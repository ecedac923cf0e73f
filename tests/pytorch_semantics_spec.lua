-- tests/pytorch_semantics_spec.lua: the calls a PyTorch port writes without thinking give PyTorch's answers
-- (tests/fixtures/semantics.json from tests/gen_semantics_fixtures.py) or an error, never a silent difference.
local ds = require("ds")
local H = require("helpers")

local fx = H.fixture("semantics.json")

-- a fixture tensor {shape, dtype, data (flat)} as a ds tensor
local function T(e)
  local flat = ds.tensor(#e.data > 0 and e.data or { 0 }, { dtype = e.dtype })
  if #e.data == 0 then flat = flat:narrow(1, 1, 0) end
  return flat:reshape(e.shape)
end

local function check(got, e, tol, what)
  assert.equal(e.dtype, got.dtype, what)
  assert.same(e.shape, got.shape, what)
  H.close(got, e.data, tol or 0, tol or 0)
end

-- a fixture key {{number =} | {index =}, ...} as a ds key
local function key_of(k)
  local key = {}
  for i, e in ipairs(k) do key[i] = e.number or T(e.index) end
  return key
end

local i64 = function(t) return ds.tensor(t, { dtype = "i64" }) end

describe("assignment through tensor keys", function()
  it("y[y:lt(0)] = 0 writes through the mask", function()
    local y = ds.tensor(fx.mask_scalar.x)
    y[y:lt(0)] = 0
    check(y, fx.mask_scalar.want)
  end)
  it("a mask over the leading dims takes a row value or one value per selected element", function()
    local c = fx.mask_tensor
    local x = T(c.x)
    x[T(c.rows)] = T(c.row_value)
    check(x, c.want_rows)
    x = T(c.x)
    x[x:gt(0)] = T(c.value_per_element)
    check(x, c.want_elements)
  end)
  it("x[idx] = v and x[{i, j}] = v write where PyTorch's x[key] = v writes, and x[{i, j}] reads the same", function()
    for n, c in ipairs(fx.keys.cases) do
      local x = T(fx.keys.x)
      check(x[key_of(c.key)], c.read, 0, "read " .. n)
      x[key_of(c.key)] = T(c.value)
      check(x, c.want, 0, "write " .. n)
    end
  end)
  it("a write is seen by the views of the tensor written", function()
    local base = ds.zeros(2, 3)
    local row = base:select(1, 2)
    row[i64({ -1 })] = 5
    base[{ 1, 1 }] = 4
    assert.same({ { 4, 0, 0 }, { 0, 0, 5 } }, base:totable())
  end)
  it("index_put_ sets or accumulates at repeated indices", function()
    local c = fx.index_put
    local x = T(c.x)
    x:index_put_({ T(c.index) }, T(c.value), { accumulate = true })
    check(x, c.accumulate)
    local idx = T(c.index):narrow(1, 2, 3)
    check(T(c.x):index_put({ idx }, T(c.value):narrow(1, 2, 3)), c.put_unique)
    H.raises(function() T(c.x):index_put_({ idx }, T(c.value), { bogus = true }) end, "index_put_", "bogus")
    H.raises(function() T(c.x):index_put_({ idx }, T(c.value):astype("f32")) end, "index_put_", "f32")
  end)
  it("an unsupported key is an error naming it", function()
    local x = ds.zeros(3)
    H.raises(function() x[true] = 1 end, "x[key] = v", "boolean")
    H.raises(function() x[{ { 1, 2 } }] = 1 end, "x[key] = v", "range")
    H.raises(function() x[ds.ones(2)] = 1 end, "x[key] = v", "integer")
    H.raises(function() x[i64({ 4 })] = 1 end, "x[key] = v", "index 4", "size 3")
    H.raises(function() return x[{ 1, 1 }] end, "x[key]", "too many indices")
    H.raises(function() x[ds.tensor({ true, false })] = 1 end, "x[key] = v", "mask")
  end)
end)

describe("assignment with autograd, traced and compiled", function()
  it("gradients flow to the assigned values and the kept ones", function()
    local c = fx.grad
    local x, w, v = T(c.x):requires_grad_(), T(c.w):requires_grad_(), T(c.v):requires_grad_()
    local y = x * 2
    y[y:lt(0)] = w
    y[T(c.index)] = v * 3
    check(y, c.y, 1e-12)
    ;(y * y * T(c.c)):sum():backward()
    check(x.grad, c.gx, 1e-12, "x")
    check(w.grad, c.gw, 1e-12, "w")
    check(v.grad, c.gv, 1e-12, "v")
  end)
  it("index_put_ with accumulate is differentiable", function()
    local c = fx.grad_accumulate
    local a, b = T(c.a):requires_grad_(), T(c.b):requires_grad_()
    local z = a * 1
    z:index_put_({ T(c.index) }, b, { accumulate = true })
    check(z, c.z, 1e-12)
    ;(z * T(c.c)):sum():backward()
    check(a.grad, c.ga, 1e-12, "a")
    check(b.grad, c.gb, 1e-12, "b")
  end)
  it("a leaf that requires grad is refused, as is a write after an op that reads the value", function()
    H.raises(function() local p = ds.ones(3):requires_grad_(); p[1] = 0 end, "leaf", "no_grad")
    H.raises(function()
      local y = ds.ones(3):requires_grad_() * 2
      local z = y * y
      y[1] = 0
      z:sum():backward()
    end, "backward", "written in place", "mul")
  end)
  it("traced and compiled functions assign as eager ones (functional form)", function()
    local c = fx.grad
    local function f(a, v)
      local b = a * 1
      b[b:lt(0)] = 0
      b[{ 1, 2 }] = 7
      b[T(c.index)] = v
      return b
    end
    local specs = { ds.spec({ 4, 3 }, "f64", "a"), ds.spec({ 3 }, "f64", "v") }
    local g, cf = ds.trace(f, specs), ds.compile(f, specs)
    local a, v = T(c.x), T(c.v)
    local want = f(a, v)
    assert.is_true(H.bitwise(g(a, v), want), "traced")
    assert.is_true(H.bitwise(cf(a, v), want), "compiled")
    assert.equal(1, want[{ 2, 1 }]:eq(v[1]):astype("i64"):item())
  end)
end)

describe("indexing reads", function()
  it("a one-element 1-D index tensor keeps the dim; a 0-d one drops it", function()
    local c = fx.one_element
    local x = T(c.x)
    check(x[i64({ 2 })], c.keep)
    check(x[i64(2)], c.drop)
  end)
end)

describe("options", function()
  it("index_add applies alpha and refuses unknown options", function()
    local c = fx.index_add_alpha
    check(T(c.x):index_add(1, T(c.index), T(c.src), { alpha = 2.5 }), c.want, 1e-12)
    local x = T(c.x)
    x:index_add_(1, T(c.index), T(c.src), { alpha = 2.5 })
    check(x, c.want, 1e-12)
    H.raises(function() T(c.x):index_add(1, T(c.index), T(c.src), { bogus = 1 }) end, "index_add", "bogus")
  end)
  it("argsort takes its options by name and refuses unknown ones", function()
    local x = ds.tensor({ 3, 1, 2 })
    assert.same({ 1, 3, 2 }, ds.argsort(x, { descending = true }):totable())
    H.raises(function() ds.argsort(x, 1, true, { bogus = 1 }) end, "argsort", "bogus")
  end)
end)

describe("type promotion with 0-d tensors", function()
  it("a 0-d tensor widens a tensor with dims only from a higher category (torch.result_type)", function()
    for _, r in ipairs(fx.promotion) do
      local a, b = ds.ones(2, { dtype = r.dims }), ds.ones({}, { dtype = r.zero })
      local what = r.dims .. " (2) with " .. r.zero .. " 0-d"
      assert.equal(r.out, ds.where(ds.tensor({ true, false }), a, b).dtype, what)
      if r.out ~= "bool" then assert.equal(r.out, (a + b).dtype, what) end -- bool + bool computes in i64
    end
  end)
end)

describe("creation and products", function()
  it("full infers bool from a boolean value and fills NaN and infinities", function()
    assert.equal(fx.full.bool, ds.full({ 3 }, true).dtype)
    assert.is_true(ds.full({ 2 }, 0 / 0):isnan():all():item())
    assert.same({ math.huge, math.huge }, ds.full({ 2 }, math.huge):totable())
    assert.is_true(ds.full_like(ds.ones(2), 0 / 0):isnan():all():item())
  end)
  it("bmm refuses a batch dim that would broadcast", function()
    H.raises(function() ds.bmm(ds.ones(1, 2, 3), ds.ones(4, 3, 2)) end, "bmm", "(1,2,3)", "(4,3,2)")
    H.raises(function() ds.bmm(ds.ones(2, 3), ds.ones(3, 2)) end, "bmm", "3-D")
    assert.same({ 4, 2, 2 }, ds.bmm(ds.ones(4, 2, 3), ds.ones(4, 3, 2)).shape)
  end)
end)

describe("backward", function()
  it("a second backward through a graph is an error unless the first retained it", function()
    local y = ds.ones(3):requires_grad_()
    local l = (y * y):sum()
    l:backward()
    H.raises(function() l:backward() end, "backward", "second time", "retain_graph")
    y.grad = nil
    l = (y * y):sum()
    l:backward({ retain_graph = true })
    l:backward()
    assert.same({ 4, 4, 4 }, y.grad:totable())
  end)
  it("backward{inputs} accumulates only into the given tensors", function()
    local a, b = ds.ones(3):requires_grad_(), ds.ones(3):requires_grad_()
    ;(a * b * 2):sum():backward({ inputs = { a } })
    assert.same({ 2, 2, 2 }, a.grad:totable())
    assert.is_nil(b.grad)
  end)
  it("ds.grad gives nil for an unused input with allow_unused, and refuses it without", function()
    local a, c = ds.ones(3):requires_grad_(), ds.ones(2):requires_grad_()
    local gs = ds.grad((a * 2):sum(), { a, c }, { allow_unused = true })
    assert.same({ 2, 2, 2 }, gs[1]:totable())
    assert.is_nil(gs[2])
    H.raises(function() ds.grad((a * 2):sum(), { a, c }) end, "grad", "input 2", "allow_unused")
  end)
end)
