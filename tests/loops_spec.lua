-- tests/loops_spec.lua: ds.fori_loop, ds.scan and bounded ds.while_loop: values and reverse-mode gradients
-- eagerly (plain Lua loops on the tape) and traced/compiled (graph loops whose backward is a graph loop), gradcheck,
-- state writes in loop bodies, and a converted RNN `for t = 1, T` with a tensor T that trains.
local ds = require("ds")
local H = require("helpers")

local same = H.bitwise
local f64 = { dtype = "f64" }
local function i64(v) return ds.tensor(v, { dtype = "i64" }) end

-- value and gradients (wrt x and the captured w) of fn(x, w, ...) -> scalar, eagerly and through a compiled graph
local function grads_both(fn, specs, x, w, ...)
  local function step(xx, ww, ...)
    local xr, wr = xx:detach():requires_grad_(), ww:detach():requires_grad_()
    local y = fn(xr, wr, ...)
    local g = ds.grad(y, { xr, wr })
    return y:detach(), g[1], g[2]
  end
  local e = { step(x, w, ...) }
  local cg = ds.compile(step, specs)
  local c = { cg(x, w, ...) }
  return e, c, step
end

local function poly_fori(x, w, n)
  return (ds.fori_loop(1, n, function(i, h) return (h * w + x * i:astype("f64")):tanh() end, { x * 0 })):sum()
end

local function scan_fn(x, w)
  local carry, ys = ds.scan(function(c, xt) local h = (c * w + xt):sin(); return h, h * 2 end, x[1] * 0, x)
  return carry:sum() + (ys * ys):sum()
end

local function bounded(x, w)
  local _, h = ds.while_loop(function(k, h) return h:sum():lt(100) end,
    function(k, h) return k + 1, h * w + 1 end, { i64(0), x }, { max_iter = 3 })
  return h:sum()
end

describe("loops: values and gradients", function()
  it("fori_loop with a Lua or a tensor trip count: eager == compiled, gradients bitwise, gradcheck", function()
    local x, w = ds.tensor({ 0.3, -0.2, 0.5 }, f64), ds.tensor({ 0.9, -0.4, 0.7 }, f64)
    for _, n in ipairs { 4, i64(4), i64(1) } do
      local e, c = grads_both(poly_fori, { ds.spec({ 3 }, "f64"), ds.spec({ 3 }, "f64"), type(n) == "number" and n or ds.spec({}, "i64") }, x, w, n)
      for i = 1, 3 do assert.is_true(same(e[i], c[i]), "output " .. i .. ": " .. tostring(e[i]) .. tostring(c[i])) end
    end
    assert.is_true(ds.autograd.gradcheck(function(a, b) return poly_fori(a, b, 4) end,
      { x:clone():requires_grad_(), w:clone():requires_grad_() }))
  end)

  it("scan stacks its outputs over the leading dim; eager == compiled, gradients bitwise, gradcheck", function()
    local x = ds.tensor({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, 0.6 }, { 0.7, -0.8 } }, f64)
    local w = ds.tensor({ 1.1, -0.9 }, f64)
    local carry, ys = ds.scan(function(c, xt) return c + xt, c * 10 end, ds.zeros({ 2 }, f64), x)
    assert.same({ 1.0, 0.4 }, { H.round and 0 or carry:totable()[1] and tonumber(string.format("%.6f", carry:totable()[1])),
      tonumber(string.format("%.6f", carry:totable()[2])) })
    assert.same({ 4, 2 }, ys.shape)
    assert.same({ 0, 0 }, ys[1]:totable())
    local e, c = grads_both(scan_fn, { ds.spec({ 4, 2 }, "f64"), ds.spec({ 2 }, "f64") }, x, w)
    for i = 1, 3 do assert.is_true(same(e[i], c[i]), "output " .. i) end
    assert.is_true(ds.autograd.gradcheck(scan_fn, { x:clone():requires_grad_(), w:clone():requires_grad_() }))
  end)

  it("while_loop with max_iter stops after N trips; eager == compiled, gradients bitwise, gradcheck", function()
    local x, w = ds.tensor({ 0.5, 1.5 }, f64), ds.tensor({ 1.2, 0.8 }, f64)
    local function trips(xx)
      local k = ds.while_loop(function(k) return k:lt(100) end, function(k) return k + 1 end, { i64(0) }, { max_iter = 7 })
      return k + xx:sum():astype("i64") * 0
    end
    assert.equal(7, trips(x):item())
    assert.equal(7, ds.compile(trips, { ds.spec({ 2 }, "f64") })(x):item())
    local e, c = grads_both(bounded, { ds.spec({ 2 }, "f64"), ds.spec({ 2 }, "f64") }, x, w)
    for i = 1, 3 do assert.is_true(same(e[i], c[i]), "output " .. i) end
    assert.is_true(ds.autograd.gradcheck(bounded, { x:clone():requires_grad_(), w:clone():requires_grad_() }))
  end)

  it("state written inside a loop body is written back when the graph runs", function()
    local hits = ds.tensor(0)
    local function f(x, n)
      return (ds.fori_loop(1, n, function(_, h) hits:add_(1); return h * 2 end, { x }))
    end
    local g = ds.compile(f, { ds.spec({ 2 }), ds.spec({}, "i64") })
    local out = g(ds.tensor { 1, 2 }, i64(3))
    assert.same({ 8, 16 }, out:totable())
    assert.equal(3, hits:item())
    f(ds.tensor { 1, 2 }, i64(2))
    assert.equal(5, hits:item())
  end)

  it("bad loop arguments are clear errors", function()
    H.raises(function() ds.while_loop(function() return true end, function() end, {}, { max_trips = 3 }) end,
      "while_loop", "unknown option 'max_trips'")
    H.raises(function() ds.while_loop(function() return true end, function() end, {}, { max_iter = -1 }) end, "max_iter")
    H.raises(function() ds.fori_loop(1, 2.5, function(i, h) return h end, { ds.zeros(1) }) end, "fori_loop", "integer")
    H.raises(function() ds.scan(function(c, x) return c, x end, ds.zeros(1), ds.zeros(0, 2)) end, "scan", "no rows")
    local function g(x, n)
      local xr = x:detach():requires_grad_()
      local y = ds.fori_loop(1, n, function(_, h) return h * ds.rand(2) end, { xr })
      return ds.grad(y:sum(), { xr })[1]
    end
    H.raises(function() ds.trace(g, { ds.spec({ 2 }), ds.spec({}, "i64") }) end, "while_loop", "update state")
  end)
end)

-- ---- a converted RNN: a plain Lua for over a tensor-length sequence ----
local RNN = ds.nn.Module:extend("RNN")
function RNN:init()
  self.wx = ds.nn.Linear(3, 4)
  self.wh = ds.nn.Linear(4, 4, { bias = false })
  self.out = ds.nn.Linear(4, 1)
end
function RNN:cell(x, h) return (self.wx(x) + self.wh(h)):tanh() end
function RNN:forward(x, T)
  local h = ds.zeros({ 4 })
  for t = 1, T do
    h = self:cell(x[t], h)
  end
  return self.out(h)
end

describe("loops: a converted RNN trains", function()
  it("for t = 1, T with a tensor T: eager (ds.convert) and compiled train steps agree bitwise and the loss falls", function()
    local function make()
      ds.manual_seed(7)
      local net = RNN()
      local opt = ds.optim.SGD(net:parameters(), { lr = 0.1 })
      local forward = ds.convert(RNN.forward)
      local function step(x, T, y)
        opt:zero_grad()
        local loss = ((forward(net, x, T) - y) ^ 2):sum()
        loss:backward()
        opt:step()
        return loss
      end
      return net, step
    end
    local x = ds.tensor({ { 0.1, 0.2, 0.3 }, { -0.5, 0.4, 0.1 }, { 0.3, 0.3, -0.2 }, { 0.9, -0.1, 0.0 }, { 0, 0, 1 } })
    local y = ds.tensor({ 0.5 })
    local net_e, step_e = make()
    local net_c, step_c = make()
    local compiled = ds.compile(step_c, { ds.spec({ 5, 3 }), ds.spec({}, "i64"), ds.spec({ 1 }) })
    local first, last
    for it = 1, 6 do
      local T = i64(it % 2 == 0 and 5 or 3)
      local le = step_e(x, T, y)
      local lc = compiled(x, T, y)
      assert.is_true(same(le, lc), "loss at step " .. it)
      first = first or le:item()
      last = le:item()
    end
    for name, p in pairs(net_e:state_dict()) do assert.is_true(same(p, net_c:state_dict()[name]), name) end
    assert.is_true(last < first)
    local g = ds.trace(net_e, { ds.spec({ 5, 3 }), ds.spec({}, "i64") })
    local ops = {}
    for _, n in ipairs(g.nodes) do ops[n.op] = true end
    assert.is_true(ops.while_loop)
  end)
end)
