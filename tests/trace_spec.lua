-- tests/trace_spec.lua: ds.trace/ds.spec, symbolic dims, state and state writes, autograd and randomness in traces,
-- honest errors, cond/while_loop/print, the lazy ds.compile cache, graph printing, and the examples' outputs.
local ds = require("ds")
local H = require("helpers")
local lazy = require("ds.lazy")

local function same(a, b) return H.bitwise(a, b) end
local function quiet(f, ...)
  local write, lines = io.write, {}
  io.write = function(...) lines[#lines + 1] = table.concat({ ... }) end
  local res = { pcall(f, ...) }
  io.write = write
  if not res[1] then error(res[2], 0) end
  return table.concat(lines), unpack(res, 2, table.maxn(res))
end

describe("ds.spec", function()
  it("accepts numbers, -1 and names, and rejects the rest", function()
    local s = ds.spec({ "batch", -1, 10 }, "f64", "x")
    assert.same({ "batch", -1, 10 }, s.shape)
    assert.equal("f64", s.dtype)
    assert.equal('spec(x: (batch,?,10), f64)', tostring(s))
    H.raises(function() ds.spec({ 2.5 }) end, "spec", "dim 1")
    H.raises(function() ds.spec({ -2 }) end, "spec")
    H.raises(function() ds.spec({ 2 }, "f8") end, "unknown dtype")
  end)
end)

describe("symbolic dims", function()
  local specs = { ds.spec({ "batch", 4 }, "f32", "x"), ds.spec({ "batch", 4 }, "f32", "y") }
  it("are attr values where ints are only while tracing or when asked ({symbolic = true}, a loaded graph)", function()
    local reshape = ds.ops.by_name.reshape
    local n = ds.sym.named("batch")
    assert.has_error(function() ds.ops.attrs(reshape, { shape = { n, 4 } }) end,
      "reshape: option 'shape' element 1 must be an integer, got batch")
    local attrs = ds.ops.attrs(reshape, { shape = { n, 4 } }, { symbolic = true })
    assert.equal(n, attrs.shape[1])
    assert.is_nil(ds.ops.attrs(reshape, { shape = { 2, 4 } }).symbolic)
  end)
  it("flow through broadcasting, reductions, matmul, reshape, flatten, -1 and cat", function()
    local w = ds.randn(4, 3)
    local function f(x, y)
      local z = (x * y + 1):matmul(w)                -- (batch,3)
      local n = x:size(1)                            -- symbolic
      local r = z:reshape(n, 3, 1):flatten(1)        -- (3*batch)
      local back = r:reshape(-1, 3)                  -- (batch,3) from (3*batch)
      local c = ds.cat({ back, z }, 1)               -- (2*batch,3)
      return c:sum(2), c:mean(1), x:flatten():reshape(n, -1) / n, n * y
    end
    local g = ds.trace(f, specs)
    local text = tostring(g)
    assert.truthy(text:find("(batch,4)", 1, true))
    assert.truthy(text:find("3*batch", 1, true) or text:find("batch*3", 1, true))
    for _, b in ipairs { 1, 5, 9 } do
      local x, y = ds.randn(b, 4), ds.randn(b, 4)
      local e = { f(x, y) }
      local t = { g(x, y) }
      for i = 1, #e do assert.is_true(same(e[i], t[i]), "batch " .. b .. " output " .. i) end
    end
  end)
  it("named dims must agree at run time", function()
    local g = ds.trace(function(x, y) return x + y end, specs)
    H.raises(function() g(ds.zeros(3, 4), ds.zeros(2, 4)) end, "input 2 (y) dim 1 is 2", "'batch' is 3")
    H.raises(function() g(ds.zeros(3, 5), ds.zeros(3, 5)) end, "input 1 (x)", "dim 2 must be 4")
    H.raises(function() g(ds.zeros(3, 4, { dtype = "f64" }), ds.zeros(3, 4)) end, "must be f32 (batch,4)")
  end)
  it("-1 dims get fresh names, so they do not have to agree", function()
    local g = ds.trace(function(x, y) return x:sum() + y:sum() end, { ds.spec({ -1 }, "f32", "x"), ds.spec({ -1 }, "f32", "y") })
    assert.truthy(tostring(g):find("x#1", 1, true))
    H.close(g(ds.ones(3), ds.ones(5)), 8)
  end)
  it("what cannot be expressed is an error naming the op and the line", function()
    local err = H.raises(function()
      ds.trace(function(x) return x + ds.zeros(5, 4) end, { ds.spec({ "batch", 4 }) })
    end, "add", "do not broadcast", "batch vs 5")
    assert.truthy(err:find("trace_spec.lua", 1, true))
    H.raises(function()
      ds.trace(function(x) return x:reshape(7, -1) end, { ds.spec({ "batch", 4 }) })
    end, "reshape", "cannot divide")
    H.raises(function()
      ds.trace(function(x) if x:size(1) > 3 then return x end return x end, { ds.spec({ "batch" }) })
    end, "trace_spec.lua", "symbolic", "ds.cond")
  end)
end)

describe("graph state", function()
  it("reads outside tensors by reference at every run", function()
    local w = ds.tensor({ 1, 2, 3 })
    local g = ds.trace(function(x) return x * w end, { ds.spec({ 3 }) })
    assert.equal(1, #g.state)
    assert.equal("w", g.state[1].name)
    H.close(g(ds.ones(3)), { 1, 2, 3 })
    w:fill_(2)
    H.close(g(ds.ones(3)), { 2, 2, 2 })
  end)
  it("records in-place updates of state as state writes, applied when the graph runs", function()
    local counter = ds.tensor(0)
    local g = ds.trace(function(x) counter:add_(1); return x + counter end, { ds.spec({}) })
    assert.equal(1, #g.state_writes)
    assert.equal(0, counter:item(), "tracing has no side effects")
    H.close(g(ds.tensor(10)), 11)
    H.close(g(ds.tensor(10)), 12)
    assert.equal(2, counter:item())
  end)
  it("writes in-place updates of inputs back into the caller's tensors, as eager does", function()
    local function f(x) x:mul_(2); return x + 1 end
    local g = ds.trace(f, { ds.spec({ 2 }) })
    assert.equal(1, #g.input_writes)
    local a, b = ds.tensor({ 1, 2 }), ds.tensor({ 1, 2 })
    assert.is_true(same(f(a), g(b)))
    assert.same({ 2, 4 }, b:totable())
  end)
  it("turns in-place ops on intermediates into functional nodes", function()
    local function f(x) local y = x * 2; y:add_(1); y:mul_(y); return y end
    local g = ds.trace(f, { ds.spec({ 3 }) })
    local x = ds.tensor({ 1, 2, 3 })
    assert.is_true(same(f(x), g(x)))
    assert.same({ 1, 2, 3 }, x:totable())
  end)
  it("refuses in-place updates through views (but a narrow) and stale views, with the line", function()
    H.raises(function() ds.trace(function(x) local v = x:t(); v:fill_(0); return x end, { ds.spec({ 2, 2 }) }) end,
      "in-place update of a view", "trace_spec.lua")
    -- a narrow of the base is the one view written through (an index_copy_ of the base: a cache update)
    local g = ds.trace(function(x) x:narrow(1, 2, 2):fill_(0); return x * 1 end, { ds.spec({ 3 }) })
    assert.same({ 1, 0, 0 }, g(ds.tensor({ 1, 2, 3 })):totable())
    H.raises(function() ds.trace(function(x) local y = x * 1; local v = y:t(); y:add_(1); return v + 1 end, { ds.spec({ 2, 2 }) }) end,
      "view", "updated in place")
  end)
  it("traces a module's forward with named state and its train/eval mode", function()
    local net = ds.nn.Sequential(ds.nn.Linear(4, 3), ds.nn.ReLU())
    net:eval()
    local g = ds.trace(net, { ds.spec({ "batch", 4 }, "f32", "x") })
    assert.is_false(g.training)
    local names = {}
    for _, s in ipairs(g.state) do names[#names + 1] = s.name end
    table.sort(names)
    assert.same({ "1.bias", "1.weight" }, names)
    assert.truthy(tostring(g):find("[eval]", 1, true))
    local x = ds.randn(6, 4)
    assert.is_true(same(net(x), g(x)))
  end)
  it("lifts optimizer state created inside the trace into graph state", function()
    local w = ds.randn(3, 2):requires_grad_()
    local opt = ds.optim.Adam({ w }, { lr = 0.1 })
    local g = ds.trace(function(x) opt:zero_grad(); local l = x:matmul(w):pow(2):sum(); l:backward(); opt:step(); return l end,
      { ds.spec({ 4, 3 }) })
    local st = opt.state[w]
    assert.truthy(st and rawget(st.exp_avg, "_c"), "state is concrete after tracing")
    assert.equal(0, st.step:item())
    assert.truthy(tostring(g):find("exp_avg", 1, true))
  end)
end)

describe("autograd inside traces", function()
  it("a whole training step (forward, backward, SGD/Adam) traces and matches eager bitwise over steps", function()
    for _, make_opt in ipairs { function(p) return ds.optim.SGD(p, { lr = 0.05, momentum = 0.9 }) end,
                                function(p) return ds.optim.Adam(p, { lr = 0.01 }) end } do
      local function setup()
        ds.manual_seed(7)
        local net = ds.nn.Sequential(ds.nn.Linear(5, 8), ds.nn.Tanh(), ds.nn.Linear(8, 2))
        local opt = make_opt(net:parameters())
        local function step(x, y)
          opt:zero_grad()
          local loss = ds.nn.functional.mse_loss(net(x), y)
          loss:backward()
          opt:step()
          return loss
        end
        return net, step
      end
      local net_e, step_e = setup()
      local net_t, step_t = setup()
      local g = ds.trace(step_t, { ds.spec({ "batch", 5 }), ds.spec({ "batch", 2 }) })
      assert.truthy(#g.state_writes >= 4)
      ds.manual_seed(3)
      for i = 1, 4 do
        local x, y = ds.randn(3 + i, 5), ds.randn(3 + i, 2)
        local le, lt = step_e(x, y), g(x, y)
        assert.is_true(same(le, lt), "loss at step " .. i)
      end
      local pe, pt = net_e:parameters(), net_t:parameters()
      for i = 1, #pe do
        assert.is_true(same(pe[i], pt[i]), "parameter " .. i)
        assert.is_true(same(pe[i].grad, pt[i].grad), "grad " .. i)
      end
    end
  end)
  it("ds.grad inside a trace (second order too)", function()
    local function f(x)
      local xr = x:detach():requires_grad_()
      local y = (xr * xr * xr):sum()
      local g1 = ds.grad(y, { xr }, { create_graph = true })[1]
      local g2 = ds.grad(g1:sum(), { xr })[1]
      return g1, g2
    end
    local g = ds.trace(f, { ds.spec({ "n" }) })
    local x = ds.tensor({ 1, 2, 3 })
    local e1, e2 = f(x)
    local t1, t2 = g(x)
    assert.is_true(same(e1:detach(), t1) and same(e2, t2))
    H.close(t2, { 6, 12, 18 })
  end)
end)

describe("random ops in graphs", function()
  if not ds.rand then
    pending("ds.rand is not available")
    return
  end
  it("rand, randn and dropout follow the eager stream for the same seed", function()
    local function f(x) return ds.rand(2, 3), ds.randn(4), ds.dropout(x, 0.5, true) end
    local g = ds.trace(f, { ds.spec({ 8 }) })
    assert.equal("rng_state", g.state[1].name)
    local x = ds.ones(8)
    ds.manual_seed(42)
    local e = { f(x) }
    local e2 = { f(x) }
    ds.manual_seed(42)
    local t = { g(x) }
    local t2 = { g(x) }
    for i = 1, 3 do
      assert.is_true(same(e[i], t[i]), "first call, output " .. i)
      assert.is_true(same(e2[i], t2[i]), "second call, output " .. i)
    end
    assert.is_false(same(t[1], t2[1]), "the generator advances between runs")
  end)
  it("random ops inside a loop body advance the same stream (the generator is loop-carried)", function()
    local function f(n)
      local _, acc = ds.while_loop(function(i) return i:lt(n) end,
        function(i, acc) ds.print("iteration", i); return i + 1, acc + ds.rand(2) end, { ds.tensor(0), ds.zeros(2) })
      return acc, ds.randn(3)
    end
    local g = ds.trace(f, { ds.spec({}) })
    ds.manual_seed(5)
    local out_e, ea, eb = quiet(f, ds.tensor(3))
    ds.manual_seed(5)
    local out_t, ta, tb = quiet(g, ds.tensor(3))
    assert.is_true(same(ea, ta) and same(eb, tb))
    assert.equal(out_e, out_t)
    assert.truthy(out_t:find("iteration tensor(2.)", 1, true))
  end)
end)

describe("abstract tensors", function()
  it("have a metatable of their own: the class's methods and operators, comparisons pointing at ds.cond", function()
    local Tensor = require("ds.tensor")
    local seen
    local g = ds.trace(function(x)
      seen = x
      assert.is_true(debug.getmetatable(x) == Tensor._abstract_mt and ds.is_tensor(x))
      local y = (x + 1):relu()   -- operators and methods as on a concrete tensor
      assert.is_true(debug.getmetatable(y) == Tensor._abstract_mt)
      return y
    end, { ds.spec({ 3 }) })
    assert.is_true(debug.getmetatable(ds.zeros(3)) == Tensor._mt)
    assert.is_false(Tensor._mt == Tensor._abstract_mt)
    for name, f in pairs(Tensor._mt) do
      if name ~= "__lt" and name ~= "__le" then assert(Tensor._abstract_mt[name] == f, name .. " differs") end
    end
    H.raises(function() return seen < seen end, "x:lt(y)", "ds.cond")
    H.raises(function() return ds.zeros(2) <= ds.zeros(2) end, "x:le(y)")
    assert.same({ 1, 2, 1 }, g(ds.tensor({ 0, 1, 0 })):totable())
  end)
end)

describe("honest errors", function()
  it("item, totable, tonumber and comparisons name the line and point to ds.cond", function()
    local err = H.raises(function() ds.trace(function(x) return x:sum():item() end, { ds.spec({ 2 }) }) end,
      "item", "abstract", "ds.cond", "ds.while_loop")
    assert.truthy(err:find("trace_spec.lua:%d+"))
    H.raises(function() ds.trace(function(x) return x:totable() end, { ds.spec({ 2 }) }) end, "totable", "ds.cond")
    H.raises(function() ds.trace(function(x) return tonumber(x) end, { ds.spec({}) }) end, "tonumber", "ds.cond", "trace_spec.lua")
    H.raises(function() ds.trace(function(x, y) if x < y then return x end return y end, { ds.spec({}), ds.spec({}) }) end,
      "x:lt(y)", "ds.cond", "trace_spec.lua")
  end)
  it("storage queries (strides, data_ptr, ...) on abstract tensors are errors, not crashes", function()
    for _, m in ipairs { "strides", "is_contiguous", "data_ptr", "storage_offset" } do
      H.raises(function() ds.trace(function(x) return x[m](x) end, { ds.spec({ 2 }) }) end, m, "abstract", "trace_spec.lua")
    end
    assert.same({ 1 }, ds.zeros(2):strides())
  end)
  it("tostring of an abstract tensor shows name, shape and dtype", function()
    local seen
    ds.trace(function(x) seen = tostring(x); return x end, { ds.spec({ "batch", 3 }, "f64", "images") })
    assert.equal("tensor(<abstract images (batch,3), dtype=f64>)", seen)
  end)
  it("tensors leaking out of a trace are refused when used in another", function()
    local leaked
    ds.trace(function(x) leaked = x * 2; return x end, { ds.spec({ 2 }) })
    H.raises(function() ds.trace(function(x) return x + leaked end, { ds.spec({ 2 }) }) end, "another trace")
  end)
end)

describe("control flow", function()
  local function counters(a, b)
    return ds.while_loop(function(x, y) return x:lt(y) end, function(x, y) return x + 2, y + 1 end, { a, b })
  end
  it("the counters from (0, 10) give (20, 20) eagerly and traced", function()
    local a, b = counters(ds.tensor(0), ds.tensor(10))
    assert.same({ 20, 20 }, { a:item(), b:item() })
    local g = ds.trace(counters, { ds.spec({}), ds.spec({}) })
    assert.equal("while_loop", g.nodes[1].op)
    a, b = g(ds.tensor(0), ds.tensor(10))
    assert.same({ 20, 20 }, { a:item(), b:item() })
    a, b = g(ds.tensor(5), ds.tensor(3))
    assert.same({ 5, 3 }, { a:item(), b:item() })
  end)
  it("cond keeps both branches in the graph", function()
    local scale = ds.tensor(3)
    local function f(x)
      return ds.cond(x:sum():gt(0), function(v) return v * scale end, function(v) return -v end, x)
    end
    local g = ds.trace(f, { ds.spec({ "n" }) })
    for _, v in ipairs { { 1, 2 }, { -1, -2, -3 } } do
      local x = ds.tensor(v)
      assert.is_true(same(f(x), g(x)))
    end
    assert.equal(2, #g.nodes[#g.nodes].attrs.then_graph.inputs, "the captured tensor is a sub-graph input")
  end)
  it("cond is differentiable when traced", function()
    local function f(x, w)
      local xr = x:detach():requires_grad_()
      local y = ds.cond(w:gt(0), function(v) return (v * v * w):sum() end, function(v) return v:sin():sum() end, xr)
      return ds.grad(y, { xr })[1]
    end
    local g = ds.trace(f, { ds.spec({ 3 }), ds.spec({}) })
    local x = ds.tensor({ 0.5, -1, 2 })
    for _, w in ipairs { 2, -1 } do
      assert.is_true(same(f(x, ds.tensor(w)), g(x, ds.tensor(w))), "w = " .. w)
    end
  end)
  it("updates of outside tensors inside branches become graph state writes", function()
    local hits = ds.tensor(0)
    local function f(x)
      return ds.cond(x:gt(0), function(v) hits:add_(1); return v end, function(v) return -v end, x)
    end
    local g = ds.trace(f, { ds.spec({}) })
    g(ds.tensor(1)); g(ds.tensor(-1)); g(ds.tensor(2))
    assert.equal(2, hits:item())
  end)
  it("says what is wrong with branches and loop bodies", function()
    H.raises(function()
      ds.trace(function(x) return ds.cond(x:sum():gt(0), function(v) v:add_(1); return v end, function(v) return v end, x) end, { ds.spec({ 2 }) })
    end, "cond_then", "operand 1 is updated in place")
    H.raises(function()
      ds.trace(function(x) return ds.cond(x:sum():gt(0), function(v) return v end, function(v) return v:sum() end, x) end, { ds.spec({ 2 }) })
    end, "cond", "result 1")
    H.raises(function()
      ds.trace(function(x) return ds.while_loop(function(v) return v:sum():lt(9) end, function(v) return ds.cat({ v, v }, 1) end, { x }) end,
        { ds.spec({ 2 }) })
    end, "while_loop", "loop variable 1")
  end)
  it("ds.print runs at every call while print runs once, when tracing", function()
    local prints = 0
    local real_print = print
    local f = ds.compile(function(x)
      prints = prints + 1
      ds.print("value", x)
      assert.is_false(ds.executing_eagerly())
      return x + 1
    end)
    local out = quiet(function() for _ = 1, 3 do f(ds.tensor(1)) end end)
    assert.equal(1, prints)
    local n = 0
    for _ in out:gmatch("value tensor%(1%.%)") do n = n + 1 end
    assert.equal(3, n)
    assert.is_true(ds.executing_eagerly())
    assert.equal(real_print, print)
  end)
end)

describe("lazy ds.compile", function()
  it("traces once per signature: dtype, shape, Lua values, module mode", function()
    local f = ds.compile(function(x, k) return x * k end)
    f(ds.ones(2), 2); f(ds.ones(2), 2); f(ds.zeros(2), 2)
    assert.equal(1, f:trace_count())
    f(ds.ones(3), 2)
    assert.equal(2, f:trace_count())
    f(ds.ones(3, { dtype = "f64" }), 2)
    f(ds.ones(3), 5)
    assert.equal(4, f:trace_count())
    H.close(f(ds.ones(3), 5), { 5, 5, 5 })
    local net = ds.nn.Dropout(0.5)
    local m = ds.compile(function(x) return net(x) end)
    m(ds.ones(4)); net:eval(); m(ds.ones(4)); net:train(); m(ds.ones(4))
    assert.equal(2, m:trace_count())
  end)
  it("warns once when retracing is frequent, naming the argument that changed", function()
    local warnings = {}
    local prev = lazy.warn
    lazy.warn = function(msg) warnings[#warnings + 1] = msg end
    local f = ds.compile(function(x, scale) return x * scale end)
    for i = 1, 8 do f(ds.ones(2), i) end
    lazy.warn = prev
    assert.equal(8, f:trace_count())
    assert.equal(1, #warnings)
    assert.truthy(warnings[1]:find("argument 2 (scale) changed from number 4 to number 5", 1, true), warnings[1])
  end)
  it("strict mode makes a retrace an error", function()
    local f = ds.compile(function(x) return x + 1 end, { strict = true })
    f(ds.ones(2))
    H.raises(function() f(ds.ones(3)) end, "strict", "argument 1 (x) changed from tensor f32 (2) to tensor f32 (3)")
  end)
  it("with dynamic specs, batch size changes never retrace", function()
    local w = ds.randn(4, 2)
    local runs = 0
    local f = ds.compile(function(x) runs = runs + 1; return x:matmul(w):relu() end, { ds.spec({ "batch", 4 }) })
    for _, b in ipairs { 1, 3, 17 } do
      local x = ds.randn(b, 4)
      assert.is_true(same(x:matmul(w):relu(), f(x)))
    end
    assert.equal(1, runs)
  end)
end)

describe("graphs", function()
  local function f(x, y) return (x:matmul(y) + 1):relu() end
  local g = ds.trace(f, { ds.spec({ "batch", 3 }, "f32", "x"), ds.spec({ 3, 2 }, "f32", "y") })
  it("print as readable IR with shapes and source lines", function()
    local text = tostring(g)
    assert.truthy(text:find("graph trace_spec:%d+%(x %%1: f32%(batch,3%), y %%2: f32%(3,2%)%)"))
    assert.truthy(text:find("%3 = matmul(%1, %2)  f32(batch,2)", 1, true))
    assert.truthy(text:find("-- tests/trace_spec.lua:%d+"))
    assert.truthy(text:find("return %", 1, true))
  end)
  it("render to Graphviz", function()
    local dot = g:to_dot()
    assert.truthy(dot:find("^digraph"))
    assert.truthy(dot:find("matmul", 1, true) and dot:find("output 1", 1, true))
  end)
  it("run bitwise equal to eager, and inline when called inside another trace", function()
    local x, y = ds.randn(5, 3), ds.randn(3, 2)
    assert.is_true(same(f(x, y), g(x, y)))
    local outer = ds.trace(function(a, b) return g(a, b) * 2 end, { ds.spec({ "batch", 3 }), ds.spec({ 3, 2 }) })
    assert.equal(4, #outer.nodes)
    assert.is_true(same(f(x, y) * 2, outer(x, y)))
  end)
  it("inline their state, input and grad writes too", function()
    local w = ds.tensor({ 1, 2 }):requires_grad_()
    local step = ds.trace(function(x)
      w.grad = nil
      local l = (x * w):sum()
      l:backward()
      x:add_(1)
      ds.no_grad(function() w:sub_(w.grad * 0.5) end)
      return l
    end, { ds.spec({ 2 }) })
    local twice = ds.trace(function(x) step(x); return step(x) end, { ds.spec({ 2 }) })
    local x = ds.tensor({ 3, 4 })
    -- step 1: l = 11, grad (3,4), x -> (4,5), w -> (-0.5,0); step 2: l = -2, grad (4,5), x -> (5,6), w -> (-2.5,-2.5)
    H.close(twice(x), -2)
    assert.same({ 5, 6 }, x:totable())
    H.close(w.grad, { 4, 5 })
    H.close(w, { -2.5, -2.5 })
  end)
  it("check their inputs", function()
    H.raises(function() g(ds.zeros(2, 3)) end, "expects 2 tensor inputs, got 1")
  end)
end)

describe("examples", function()
  local function run(name)
    local cmd = string.format('LUA_PATH="./lua/?.lua;./lua/?/init.lua;;" luajit examples/%s.lua 2>&1', name)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out
  end
  it("trace_basics: print once, ds.print per call, one graph per signature", function()
    local out = run("trace_basics")
    local function count(s) local n = 0; for _ in out:gmatch(s) do n = n + 1 end; return n end
    assert.equal(1 + 4, count("\nprint in static graph") + (out:find("^print in static graph") and 1 or 0))
    assert.equal(3 + 7, count("ds%.print in static graph"))
    assert.equal(3, count("ds%.print in dynamic code"))
    assert.truthy(out:find("tensor(<abstract x (), dtype=i32>)", 1, true))
    assert.truthy(out:find("traces: 4", 1, true))
    assert.truthy(out:find("false\nfalse\nfalse\nfalse\n%*+\ntrue\ntrue\ntrue\ntrue\ntrue\ntrue"))
  end)
  it("counters: (20, 20) eagerly and traced", function()
    local out = run("counters")
    assert.truthy(out:find("eager:  20 20", 1, true))
    assert.truthy(out:find("traced: 20 20", 1, true))
    assert.truthy(out:find("while_loop", 1, true))
  end)
  it("simple_net: one graph with a batch dim, run at 1, 7 and 64", function()
    local out = run("simple_net")
    assert.truthy(out:find("graph SimpleNet(x %1: f32(batch,10), y %2: f32(3)) [eval]", 1, true), out)
    assert.truthy(out:find("state %%%d+ = linear.weight f32%(3,10%)"), out)
    for _, b in ipairs { 1, 7, 64 } do
      assert.truthy(out:find(string.format("batch %2d: output (%d,3), equal to eager: true", b, b), 1, true), out)
    end
  end)
  it("select and narrow from the end of a dynamic dim (negative index or start) view the right elements", function()
    for _, f in ipairs({ function(x) return x:select(2, -1) end, function(x) return x:narrow(2, -2, 2) end }) do
      local g = ds.trace(f, { ds.spec({ 2, "s", 3 }) })
      local cg = ds.compile(g)
      for _, n in ipairs({ 5, 2 }) do
        local x = ds.randn(2, n, 3)
        assert.is_true(ds.equal(g(x), f(x)))
        assert.is_true(ds.equal(cg(x), f(x)))
      end
    end
  end)
  it("strided conv and pooling over a dynamic dim: a floor symbol, eager bits, saved and loaded elsewhere", function()
    local F = ds.nn.functional
    local w = ds.randn(4, 3, 3, 3)
    local f = function(x)
      return ds.max_pool2d(F.conv2d(x, w, nil, { stride = 2, padding = 1 }):relu(), { 2, 2 }, { stride = 2 })
    end
    local g = ds.trace(f, { ds.spec({ 1, 3, 8, "w" }) })
    local cg = ds.compile(g)
    for _, n in ipairs({ 16, 17, 23 }) do
      local x = ds.randn(1, 3, 8, n)
      assert.is_true(ds.equal(cg(x), f(x)))
      assert.is_true(ds.equal(g(x), f(x)))
    end
    local dir = H.tmp_dir()
    ds.save(cg, dir .. "/m")
    local x = ds.randn(1, 3, 8, 19)
    ds.save_state({ x = x, y = f(x) }, dir .. "/xy.safetensors")
    local script = dir .. "/load.lua"
    H.write_file(script, string.format([[
      local ds = require("ds")
      local xy = ds.load_state(%q)
      assert(ds.equal(ds.load(%q)(xy.x), xy.y), "loaded graph differs")
    ]], dir .. "/xy.safetensors", dir .. "/m"))
    assert.is_true(os.execute("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit " .. script) == 0)
  end)
end)
