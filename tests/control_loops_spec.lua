-- tests/control_loops_spec.lua: ds.fori_loop, ds.scan and ds.while_loop: values, max_iter, state writes in bodies,
-- bad arguments; gradients that save per trip: the traced forward loop keeps each trip's starting loop variables, the
-- backward is one reverse graph loop over them (linear work, counted), the same bits eagerly, traced, compiled and
-- loaded; gradcheck on fori_loop, scan and while_loop (a tensor trip count, a converted loop with a break); the
-- saved trips are dropped after the backward; refusals.
local ds = require("ds")
local H = require("helpers")
local Graph = require("ds.graph")
local control = require("ds.control")

local same = H.bitwise
local f64 = { dtype = "f64" }
local function i64(v) return ds.tensor(v, { dtype = "i64" }) end
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)

-- step(x, w, ...) -> loss, d loss/dx, d loss/dw for a loss fn(x, w, ...)
local function grad_step(fn)
  return function(x, w, ...)
    local xr, wr = x:detach():requires_grad_(), w:detach():requires_grad_()
    local y = fn(xr, wr, ...)
    local g = ds.grad(y, { xr, wr })
    return y:detach(), g[1], g[2]
  end
end

-- the step's results eagerly, from the traced graph, compiled, and loaded from disk
local function four_ways(step, specs, args, name)
  local ways = { eager = { step(unpack(args)) } }
  local g = ds.trace(step, specs)
  ways.traced = { g(unpack(args)) }
  local cg = ds.compile(step, specs)
  ways.compiled = { cg(unpack(args)) }
  ds.save(cg, dir .. "/" .. name)
  ways.loaded = { ds.load(dir .. "/" .. name)(unpack(args)) }
  return ways, g
end

local function assert_same_ways(ways)
  for _, way in ipairs { "traced", "compiled", "loaded" } do
    for i = 1, 3 do
      assert.is_true(same(ways.eager[i], ways[way][i]), way .. " result " .. i .. ": " .. tostring(ways.eager[i])
        .. " vs " .. tostring(ways[way][i]))
    end
  end
end

local function gradcheck(fn, x, w, ...)
  local rest = { ... }
  return ds.autograd.gradcheck(function(a, b) return fn(a, b, unpack(rest)) end,
    { x:clone():requires_grad_(), w:clone():requires_grad_() })
end

-- ---- the loops under test ----
local function fori_tanh(x, w, n)
  return (ds.fori_loop(1, n, function(i, h) return (h * w + x * i:astype("f64")):tanh() end, { x * 0 })):sum()
end

local function scan_sin(x, w)
  local carry, ys = ds.scan(function(c, xt) local h = (c * w + xt):sin(); return h, h * 2 end, x[1] * 0, x)
  return carry:sum() + (ys * ys):sum()
end

-- no max_iter: the trip count comes from the values (3 trips for the inputs below, kept under gradcheck's steps)
local function while_grow(x, w)
  local _, h = ds.while_loop(function(k, h) return k:lt(3) end,
    function(k, h) return k + 1, (h * w):sin() + x end, { i64(0), x })
  return (h * h):sum()
end

-- a plain Lua loop, converted: a tensor trip count and a break on a running total
local function walk(x, w, n)
  local h, total = x, x:sum() * 0
  for t = 1, n do
    h = (h * w + x):sin()
    total = total + h:sum()
    if total:gt(1.5) then break end
  end
  return (h * h):sum() + total
end

-- max_iter: at most 3 trips, whatever the condition says
local function bounded(x, w)
  local _, h = ds.while_loop(function(k, h) return h:sum():lt(100) end,
    function(k, h) return k + 1, h * w + 1 end, { i64(0), x }, { max_iter = 3 })
  return h:sum()
end

local X = ds.tensor({ 0.3, -0.2, 0.5 }, f64)
local W = ds.tensor({ 0.9, -0.4, 0.7 }, f64)
local V = { ds.spec({ 3 }, "f64"), ds.spec({ 3 }, "f64") }
local VN = { ds.spec({ 3 }, "f64"), ds.spec({ 3 }, "f64"), ds.spec({}, "i64") }

describe("loops: values", function()
  it("scan stacks its outputs over the leading dim", function()
    local x = ds.tensor({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, 0.6 }, { 0.7, -0.8 } }, f64)
    local carry, ys = ds.scan(function(c, xt) return c + xt, c * 10 end, ds.zeros({ 2 }, f64), x)
    assert.is_true(H.close(carry, ds.tensor({ 1.0, 0.4 }, f64), 1e-12, 1e-12))
    assert.same({ 4, 2 }, ys.shape)
    assert.is_true(H.close(ys, ds.tensor({ { 0, 0 }, { 1, 2 }, { -2, 6 }, { 3, 12 } }, f64), 1e-12, 1e-12))
  end)

  it("while_loop with max_iter stops after N trips, eagerly and compiled", function()
    local function trips(xx)
      local k = ds.while_loop(function(k) return k:lt(100) end, function(k) return k + 1 end, { i64(0) }, { max_iter = 7 })
      return k + xx:sum():astype("i64") * 0
    end
    assert.equal(7, trips(X):item())
    assert.equal(7, ds.compile(trips, { ds.spec({ 3 }, "f64") })(X):item())
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

  it("compiled loops are C loop steps: nested, state updated in place, scan; eager bits, saved and run by the C loader",
    function()
      local ffi, C = require("ffi"), require("ds.ffi").C
      local acc = ds.zeros(3, 4)
      local function f(x, n)
        -- an outer fori_loop whose body runs an inner while_loop and writes row i of acc in place
        local y = ds.fori_loop(1, n, function(i, h)
          local _, h2 = ds.while_loop(function(k) return k:lt(2) end, function(k, v) return k + 1, v * 0.5 + 1 end,
            { i64(0), h })
          acc:index_copy_(1, i:reshape(1), h2:reshape(1, 4))
          return h2
        end, { x })
        local _, ys = ds.scan(function(c, r) return c + r, c * r end, y, acc)
        return y, ys
      end
      local x = ds.tensor({ 1, -2, 3.5, 0.25 })
      local want_y, want_ys = f(x, i64(3))
      local want_acc = acc:clone()
      acc:zero_()
      local cg = ds.compile(f, { ds.spec({ 4 }), ds.spec({}, "i64") })
      local y, ys = cg(x, i64(3))
      assert(same(want_y, y) and same(want_ys, ys) and same(want_acc, acc))
      local loops = 0
      for _, seg in ipairs(cg._last_plan.segments) do assert.is_nil(seg.lua) end
      for _, st in ipairs(cg._last_plan.log.steps) do
        if st.cond then
          loops = loops + 1
          for _, inner in ipairs(st.body.log.steps) do if inner.cond then loops = loops + 1 end end
        end
      end
      assert.equal(3, loops)   -- fori_loop, the while_loop inside it, scan
      acc:zero_()
      ds.save(cg, dir .. "/nested")
      local m = C.ds_model_load(dir .. "/nested")
      assert.truthy(m ~= nil, ffi.string(C.ds_last_error()))
      local oy, oys = ds.empty(4), ds.empty(3, 4)
      assert.equal(0, C.ds_model_run(m, ffi.new("const ds_tensor*[2]", { x._c, i64(3)._c }),
        ffi.new("ds_tensor*[2]", { oy._c, oys._c })))
      C.ds_model_free(m)
      assert(same(want_y, oy) and same(want_ys, oys))
    end)

  it("bad loop arguments are clear errors", function()
    H.raises(function() ds.while_loop(function() return true end, function() end, {}, { max_trips = 3 }) end,
      "while_loop", "unknown option 'max_trips'")
    H.raises(function() ds.while_loop(function() return true end, function() end, {}, { max_iter = -1 }) end, "max_iter")
    H.raises(function() ds.fori_loop(1, 2.5, function(i, h) return h end, { ds.zeros(1) }) end, "fori_loop", "integer")
    H.raises(function() ds.scan(function(c, x) return c, x end, ds.zeros(1), ds.zeros(0, 2)) end, "scan", "no rows")
  end)
end)

describe("loop gradients saved per trip", function()
  it("fori_loop (Lua and tensor trip counts): eager == traced == compiled == loaded bitwise, gradcheck", function()
    for _, n in ipairs { 4, i64(4), i64(1) } do
      local specs = type(n) == "number" and V or VN
      local step = type(n) == "number" and grad_step(function(x, w) return fori_tanh(x, w, n) end) or grad_step(fori_tanh)
      local args = type(n) == "number" and { X, W } or { X, W, n }
      assert_same_ways((four_ways(step, specs, args, "fori")))
    end
    assert.is_true(gradcheck(fori_tanh, X, W, i64(5)))
  end)

  it("scan: eager == traced == compiled == loaded bitwise, gradcheck", function()
    local x = ds.tensor({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, 0.6 }, { 0.7, -0.8 } }, f64)
    local w = ds.tensor({ 1.1, -0.9 }, f64)
    assert_same_ways((four_ways(grad_step(scan_sin), { ds.spec({ 4, 2 }, "f64"), ds.spec({ 2 }, "f64") }, { x, w }, "scan")))
    assert.is_true(gradcheck(scan_sin, x, w))
  end)

  it("while_loop with and without max_iter: eager == traced == compiled == loaded bitwise, gradcheck", function()
    assert_same_ways((four_ways(grad_step(while_grow), V, { X, W }, "while")))
    assert.is_true(gradcheck(while_grow, X, W))
    assert_same_ways((four_ways(grad_step(bounded), V, { X, W }, "bounded")))
    assert.is_true(gradcheck(bounded, X, W))
  end)

  it("a converted for over a tensor trip count with a break: the same bits four ways, gradcheck", function()
    local walk_c = ds.convert(walk)
    -- the break ends the loop after 2 trips for n = 8 (totals 1.17, 2.58), the bound ends it for n = 1
    for _, n in ipairs { 8, 1 } do
      local ways, g = four_ways(grad_step(walk_c), VN, { X, W, i64(n) }, "walk")
      assert_same_ways(ways)
      local loops = 0
      for _, node in ipairs(g.nodes) do if node.op == "while_loop" then loops = loops + 1 end end
      assert.equal(2, loops) -- the forward loop and its reverse loop
      assert.is_true(gradcheck(walk_c, X, W, i64(n)))
    end
  end)
end)

-- body sub-graph runs per call, by graph name
local function count_runs(fn)
  local counts, run = {}, Graph.run
  Graph.run = function(self, ...)
    counts[self.name] = (counts[self.name] or 0) + 1
    return run(self, ...)
  end
  local ok, err = pcall(fn)
  Graph.run = run
  assert(ok, err)
  return counts
end

describe("loop gradients: linear work and honest memory", function()
  it("the backward runs the body once per trip (compiled and loaded: 2T body runs for T trips, not T^2)", function()
    local step = grad_step(fori_tanh)
    local cg = ds.compile(step, VN)
    ds.save(cg, dir .. "/linear")
    local loaded = ds.load(dir .. "/linear")
    for _, T in ipairs { 3, 7, 12 } do
      for name, f in pairs { compiled = cg, loaded = loaded } do
        local counts = count_runs(function() f(X, W, i64(T)) end)
        assert.equal(2 * T, counts.while_body, name .. " T = " .. T) -- T forward trips, T reverse trips
      end
    end
  end)

  it("eagerly the body runs once per trip forward and once per trip in the backward", function()
    local calls = 0
    local function f(x, w, n)
      return (ds.fori_loop(1, n, function(_, h) calls = calls + 1; return (h * w + x):tanh() end, { x * 0 })):sum()
    end
    for _, T in ipairs { 3, 9 } do
      calls = 0
      grad_step(f)(X, W, i64(T))
      assert.equal(2 * T, calls)
    end
  end)

  it("saves only when differentiated, and drops the saved trips once the reverse loop has read them", function()
    local forward_only = ds.trace(fori_tanh, VN)
    for _, node in ipairs(forward_only.nodes) do
      if node.op == "while_loop" then assert.same({}, node.attrs.saves or {}) end
    end
    local g = ds.trace(grad_step(fori_tanh), VN)
    local saves, reads = {}, {}
    for _, node in ipairs(g.nodes) do
      if node.op == "while_loop" then
        for _, k in ipairs(node.attrs.saves or {}) do saves[#saves + 1] = k end
        reads[#reads + 1] = node.attrs.reads
      end
    end
    assert.equal(1, #saves)
    assert.same({ saves[1] }, reads)
    g(X, W, i64(5))
    assert.is_nil(control.saved_trips[saves[1]])
  end)

  it("saves only the loop variables the reverse trip reads: scan keeps its counter and carry, not the stacked ys", function()
    local g = ds.trace(grad_step(scan_sin), { ds.spec({ 4, 2 }, "f64"), ds.spec({ 2 }, "f64") })
    local forward, reverse
    for _, node in ipairs(g.nodes) do
      if node.op == "while_loop" then
        if node.attrs.reads then reverse = node else forward = node end
      end
    end
    assert.same({ 1, 2 }, forward.attrs.saved_vars) -- loop vars: counter, carry, ys (T, 2)
    assert.same({ 1, 2 }, reverse.attrs.reads_vars)
    local body = reverse.attrs.body_graph
    assert.same({ "saved1", "saved2" }, { body.specs[#body.specs - 1].name, body.specs[#body.specs].name })
  end)

  it("nested loops: the inner loop's gradient inside the outer reverse loop, the same bits compiled", function()
    local function nested(x, w, n)
      local h = ds.fori_loop(1, n, function(_, a)
        return (ds.fori_loop(1, 2, function(_, b) return (b * w + a):sin() end, { a }))
      end, { x })
      return (h * h):sum()
    end
    local step = grad_step(nested)
    local e = { step(X, W, i64(3)) }
    local c = { ds.compile(step, VN)(X, W, i64(3)) }
    for i = 1, 3 do assert.is_true(same(e[i], c[i]), "result " .. i) end
    assert.is_true(gradcheck(nested, X, W, i64(3)))
  end)
end)

describe("loop gradients: refusals", function()
  it("a reverse loop whose forward did not save (crafted graph files) is an error naming the key", function()
    ds.save(ds.compile(grad_step(fori_tanh), VN), dir .. "/crafted")
    local path = dir .. "/crafted.json"
    local text = H.read_file(path)
    local edited, k = text:gsub('"saves":%[(%d+)%]', '"saves":[]')
    assert.equal(1, k)
    local f = assert(io.open(path, "wb"))
    f:write(edited)
    f:close()
    H.raises(function() ds.load(dir .. "/crafted")(X, W, i64(3)) end, "while_loop", "no loop saved them")
    edited, k = text:gsub('"saved_vars":%[[%d,]+%]', '"saved_vars":[]')
    assert.equal(1, k)
    f = assert(io.open(path, "wb"))
    f:write(edited)
    f:close()
    H.raises(function() ds.load(dir .. "/crafted")(X, W, i64(3)) end, "while_loop", "reads loop variable",
      "did not save")
  end)

  it("ONNX export of a loop's reverse loop is refused by name (the forward alone exports)", function()
    H.raises(function() ds.onnx.export(ds.compile(grad_step(fori_tanh), VN), dir .. "/g.onnx") end,
      "while_loop", "reverse loop", "no ONNX form")
  end)

  it("differentiating a loop body that updates state (draws random numbers) is refused", function()
    local function g(x, n)
      local xr = x:detach():requires_grad_()
      local y = ds.fori_loop(1, n, function(_, h) return h * ds.rand(2) end, { xr })
      return ds.grad(y:sum(), { xr })[1]
    end
    H.raises(function() ds.trace(g, { ds.spec({ 2 }), ds.spec({}, "i64") }) end, "while_loop", "update state")
  end)

  it("second-order gradients through a loop are refused by name", function()
    local function second(x, w, n)
      local xr = x:detach():requires_grad_()
      local y = fori_tanh(xr, w, n)
      local g = ds.grad(y, { xr }, { create_graph = true })[1]
      return ds.grad(g:sum(), { xr })[1]
    end
    H.raises(function() ds.trace(second, VN) end, "while_loop", "second order")
  end)
end)

teardown(function() os.execute("rm -rf " .. dir) end)
