-- compile_spec.lua: ds.compile: compiled == eager bit for bit for every op in the op table and for
-- fusion patterns; dynamic dims (one plan per shape); memory plan; state writes; errors.
local ds = require("ds")
local H = require("helpers")
local D = require("ds.dispatch")
local compile = require("ds.compile")

local function t(shape, dt, lo, hi)
  local x = ds.rand(shape, { dtype = dt == "f64" and "f64" or "f32" })
  x = x * ((hi or 2) - (lo or -2)) + (lo or -2)
  if dt and dt ~= "f32" and dt ~= "f64" then x = x:astype(dt) end
  return x
end
local function ids(shape, n) return (ds.rand(shape) * n):astype("i64") + 1 end

-- run fn eagerly and compiled (traced with its arguments as specs); every output bitwise equal
-- (eager runs on clones: update ops write into their arguments)
local function parity(fn, args, opts)
  local copies = {}
  for i, a in ipairs(args) do copies[i] = a:clone() end
  ds.manual_seed(7)
  local eager = { fn(unpack(copies)) }
  local cg = ds.compile(fn, args, opts)
  ds.manual_seed(7)
  local got = { cg(unpack(args)) }
  assert.are.equal(#eager, #got)
  for i = 1, #eager do
    assert(H.bitwise(got[i], eager[i]), "output " .. i .. " differs")
  end
  return cg
end

-- one row per op of the op table: a function using it and its arguments
local x34, x234 = function() return t({ 3, 4 }) end, function() return t({ 2, 3, 4 }) end
local cases = {
  full = { function(x) return x + ds.full({ 3, 4 }, 2.5) end, x34 },
  arange = { function(x) return x + ds.arange(1, 5) end, x34 },
  reshape = { function(x) return x:t():reshape(2, 6) * 2 end, x34 },
  transpose = { function(x) return x:transpose(1, 3) + 1 end, x234 },
  permute = { function(x) return x:permute(3, 1, 2) * 3 end, x234 },
  narrow = { function(x) return x:narrow(2, 2, 2) - 1 end, x34 },
  select = { function(x) return x:select(2, 3) / 2 end, x234 },
  unfold = { function(x) return x:unfold(3, 2, 1) * 2 end, x234 },
  expand = { function(x) return x:reshape(3, 1, 4):expand(3, 2, 4) + 0 end, x34 },
  matmul = { function(a, b) return a:matmul(b) end, function() return t({ 2, 3, 4 }), t({ 4, 5 }) end },
  cat = { function(a, b) return ds.cat({ a, b }, 2) end, function() return t({ 3, 4 }), t({ 3, 2 }) end },
  gather = { function(x, i) return ds.gather(x, 2, i) end, function() return t({ 3, 4 }), ids({ 3, 2 }, 4) end },
  scatter_add = { function(x, i, s) return ds.scatter_add(x, 2, i, s) end,
                  function() return t({ 3, 4 }), ids({ 3, 2 }, 4), t({ 3, 2 }) end },
  scatter_reduce = { function(x, i, s) return ds.scatter_reduce(x, 2, i, s, "amax") end,
                     function() return t({ 3, 4 }), ids({ 3, 2 }, 4), t({ 3, 2 }) end },
  index_select = { function(x, i) return ds.index_select(x, 1, i) end, function() return t({ 3, 4 }), ids({ 5 }, 3) end },
  index_add = { function(x, i, s) return ds.index_add(x, 1, i, s) end,
                function() return t({ 3, 4 }), ids({ 5 }, 3), t({ 5, 4 }) end },
  one_hot = { function(i) return ds.one_hot(i, 5) end, function() return ids({ 4 }, 5) end },
  embedding = { function(i, w) return ds.embedding(i, w) end, function() return ids({ 2, 3 }, 6), t({ 6, 4 }) end },
  conv2d = { function(x, w, b) return ds.conv2d(x, w, b, { padding = 1 }) end,
             function() return t({ 2, 3, 6, 6 }), t({ 4, 3, 3, 3 }), t({ 4 }) end },
  max_pool2d = { function(x) return ds.max_pool2d(x, 2) end, function() return t({ 2, 3, 6, 6 }) end },
  avg_pool2d = { function(x) return ds.avg_pool2d(x, 2) end, function() return t({ 2, 3, 6, 6 }) end },
  layer_norm = { function(x, w, b) return ds.layer_norm(x, { 4 }, w, b) end, function() return x234(), t({ 4 }), t({ 4 }) end },
  rand = { function(x) return x + ds.rand(3, 4) end, x34 },
  randn = { function(x) return x + ds.randn(3, 4) end, x34 },
  randint = { function(x) return x + ds.randint(0, 10, { 3, 4 }):astype("f32") end, x34 },
  sgd_update = { function(p, g) ds.sgd_update(p, g, { lr = 0.1 }); return p end, function() return t({ 3, 4 }), t({ 3, 4 }) end },
  sgd_momentum_update = { function(p, g, m, s) ds.sgd_momentum_update(p, g, m, s, { lr = 0.1, momentum = 0.9 }); return p, m, s end,
    function() return t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }), ds.tensor({ 1 }) end },
  adam_update = { function(p, g, m, v, s) ds.adam_update(p, g, m, v, s, { lr = 1e-3 }); return p, m, v, s end,
    function() return t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }, "f32", 0, 1), ds.tensor({ 2 }) end },
  adam_amsgrad_update = { function(p, g, m, v, vm, s) ds.adam_amsgrad_update(p, g, m, v, vm, s, { lr = 1e-3 }); return p, m, v, vm, s end,
    function() return t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }, "f32", 0, 1), t({ 3, 4 }, "f32", 0, 1), ds.tensor({ 2 }) end },
  rmsprop_update = { function(p, g, sq, s) ds.rmsprop_update(p, g, sq, s, { lr = 1e-2 }); return p, sq, s end,
    function() return t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }, "f32", 0, 1), ds.tensor({ 2 }) end },
  rmsprop_full_update = { function(p, g, sq, ga, b, s)
      ds.rmsprop_full_update(p, g, sq, ga, b, s, { lr = 1e-2, momentum = 0.9, centered = true }); return p, sq, ga, b, s end,
    function() return t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }, "f32", 1, 2), t({ 3, 4 }, "f32", 0, 0.5), t({ 3, 4 }), ds.tensor({ 2 }) end },
  adagrad_update = { function(p, g, sum, s) ds.adagrad_update(p, g, sum, s, { lr = 0.1, lr_decay = 0.01 }); return p, sum, s end,
    function() return t({ 3, 4 }), t({ 3, 4 }), t({ 3, 4 }, "f32", 0, 1), ds.tensor({ 2 }) end },
}
-- reductions (dim 2) and softmax-likes
for _, name in ipairs { "sum", "mean", "prod", "var", "std", "amax", "amin", "logsumexp", "max", "min", "argmax", "argmin", "cumsum", "softmax", "log_softmax" } do
  cases[name] = { function(x) return ds[name](x, 2) end, x34 }
end
cases.all = { function(x) return ds.all(x:gt(0), 2) end, x34 }
cases.sort = { function(x) return ds.sort(x, 2, true) end, x34 }
cases.cumprod = { function(x) return ds.cumprod(x, 2) end, x34 }
cases.any = { function(x) return ds.any(x:gt(0), 2) end, x34 }
-- backward kernels are reached through ds.grad inside the traced function
local function grads_of(f, n)
  return function(...)
    local args = { ... }
    for i = 1, n do args[i] = args[i]:requires_grad_() end
    local y = f(unpack(args))
    local want = {}
    for i = 1, n do want[i] = args[i] end
    return unpack(ds.grad((y * y):sum(), want))
  end
end
cases.conv2d_backward_input = { grads_of(function(x, w, b) return ds.conv2d(x, w, b, { padding = 1 }) end, 3), cases.conv2d[2] }
cases.conv2d_backward_weight = cases.conv2d_backward_input
cases.conv2d_backward_bias = cases.conv2d_backward_input
cases.max_pool2d_backward = { grads_of(function(x) return ds.max_pool2d(x, 2) end, 1), cases.max_pool2d[2] }
cases.avg_pool2d_backward = { grads_of(function(x) return ds.avg_pool2d(x, 2) end, 1), cases.avg_pool2d[2] }
cases.layer_norm_backward = { grads_of(function(x, w, b) return ds.layer_norm(x, { 4 }, w, b) end, 3), cases.layer_norm[2] }

-- elementwise ops: each dtype the op supports, with a broadcast operand
local function elementwise_case(def)
  return function()
    for dt in pairs(def.dtypes) do
      local lo, hi = -3, 3
      if def.name == "log" or def.name == "sqrt" or def.name == "rsqrt" or def.name == "pow" then lo = 0.1 end
      if dt == "u8" or dt == "bool" then lo = 0 end
      local int_div = def.name == "div" or def.name == "fmod" or def.name == "remainder" -- integer x / 0 raises
      if def.name == "floor_divide" or (int_div and dt ~= "f32" and dt ~= "f64") then lo = 1 end
      local function arg(shape) return dt == "bool" and t(shape, "f32"):gt(0) or t(shape, dt, lo, hi) end
      local args
      if def.name == "where" then args = { t({ 3, 4 }):gt(0), arg({ 3, 4 }), arg({ 4 }) }
      elseif def.kind == "binary" then args = { arg({ 3, 4 }), arg({ 4 }) }
      else args = { arg({ 3, 4 }) } end
      local fn
      if def.name == "astype" then fn = function(a) return a:astype(dt == "f32" and "i32" or "f32") end
      elseif def.name == "clamp" then fn = function(a) return a:clamp(-1, 1) end
      elseif def.name == "contiguous" then fn = function(a) return a:t():contiguous() end
      else fn = function(...) return ds[def.name](...) end end
      parity(fn, args)
      -- and inside a fused chain (a second op after it)
      if def.name ~= "astype" and def.name ~= "contiguous" then
        parity(function(...) local y = fn(...); return ds.where(y:eq(y), y, y), fn(...) end, args)
      end
    end
  end
end

describe("compile: every op of the op table", function()
  for _, def in ipairs(D.list) do
    if not def.internal then
      it(def.name .. " compiled equals eager bitwise", function()
        if def.elementwise then return elementwise_case(def)() end
        local case = cases[def.name] -- a row of its own first (update ops: their option tables), else the sample
        if not case and def.sample then
          local inputs, _, fn = def.sample()
          return parity(fn, inputs)
        end
        assert(case, "no compile test row for op " .. def.name .. " (add one to tests/compile_spec.lua)")
        parity(case[1], { case[2]() })
      end)
    end
  end
end)

describe("compile: fusion", function()
  it("fuses a chain into one step and keeps it bitwise", function()
    local f = function(x, b) return ((x * 2 + b):relu() - 1):exp():tanh() end
    local cg = parity(f, { t({ 64, 300 }), t({ 300 }) })
    assert.are.equal(1, cg.stats.fuse)
    assert.truthy(tostring(cg):find("fused[mul, add, relu, sub, exp, tanh]", 1, true))
  end)
  it("large tensors (parallel tiles), strided and broadcast operands", function()
    parity(function(x, y, s) return (x:t() * y + s):sigmoid() * x:t() end, { t({ 300, 200 }), t({ 200, 1 }), t({}) })
  end)
  it("where/clamp/cast/compare chains", function()
    parity(function(x, y)
      local m = x:gt(y)
      return ds.where(m, x, y):clamp(-0.5, 0.5):astype("f64") * 3, m:astype("f32") + x
    end, { t({ 5, 7 }), t({ 7 }) })
  end)
  it("intermediate values used outside the chain become extra outputs", function()
    local cg = parity(function(x) local a = x * 3; local b = a:exp(); return b + a, a:sum() end, { t({ 4, 5 }) })
    assert.truthy(tostring(cg):find("fused", 1, true))
  end)
  it("matmul + bias + gelu becomes a matmul epilogue", function()
    local cg = parity(function(x, w, b) return (x:matmul(w) + b):gelu() end, { t({ 8, 16 }), t({ 16, 32 }), t({ 32 }) })
    assert.are.equal(1, cg.stats.epilogue)
    assert.truthy(tostring(cg):find("matmul_ep", 1, true))
  end)
  it("a long chain of 10 adds", function()
    parity(function(x, y)
      local z = x
      for _ = 1, 10 do z = z + y end
      return z
    end, { t({ 33, 1000 }), t({ 1000 }) })
  end)
  it("f64 and integer chains", function()
    parity(function(x) return (x * 2 + 1):abs():sqrt() end, { t({ 6, 5 }, "f64") })
    parity(function(x) return (x * 3 + 1):maximum(x) - 2 end, { t({ 6, 5 }, "i64") })
  end)
end)

describe("compile: dynamic dims and plans", function()
  it("one plan per concrete shape, each bitwise equal to eager", function()
    local f = function(x, b) return (x:matmul(x:t()) + b):softmax(-1) end
    local cg = ds.compile(f, { ds.spec({ "n", 8 }, "f32", "x"), ds.spec({ 1 }, "f32", "b") })
    for _, n in ipairs { 3, 5, 3, 1 } do
      local x, b = t({ n, 8 }), t({ 1 })
      assert(H.bitwise(cg(x, b), f(x, b)))
    end
    assert.are.equal(3, cg:plan_count())
  end)
  it("rejects inputs that do not match the specs, naming the input", function()
    local cg = ds.compile(function(x, y) return x + y end, { ds.spec({ "n", 3 }, "f32", "x"), ds.spec({ "n", 3 }, "f32", "y") })
    H.raises(function() cg(t({ 2, 3 }), t({ 4, 3 })) end, "y", "dim 1")
    H.raises(function() cg(t({ 2, 4 }), t({ 2, 3 })) end, "x", "(2,4)")
    H.raises(function() cg(t({ 2, 3 }, "f64"), t({ 2, 3 })) end, "x", "f64")
  end)
  it("after a call, inputs that do not fit its plan are still checked (the last plan is reused only as it is)", function()
    local cg = ds.compile(function(x, y) return x + y end, { ds.spec({ "n", 3 }, "f32", "x"), ds.spec({ "n", 3 }, "f32", "y") })
    local x, y = t({ 2, 3 }), t({ 2, 3 })
    assert(H.bitwise(cg(x, y), x + y))
    H.raises(function() cg(x, t({ 4, 3 })) end, "y", "dim 1")
    H.raises(function() cg(x, t({ 2, 3 }, "f64")) end, "y", "f64")
    H.raises(function() cg(x, { _c = y._c, _shape = { 2, 3 }, dtype = "f32" }) end, "y", "must be a tensor")
    H.raises(function() cg(x) end, "expects 2 tensor inputs, got 1")
    -- shapes called before find their plan again (not only the last call's); others are still checked
    local x4, y4 = t({ 4, 3 }), t({ 4, 3 })
    for _ = 1, 2 do
      assert(H.bitwise(cg(x4, y4), x4 + y4))
      assert(H.bitwise(cg(x, y), x + y))
      H.raises(function() cg(x4, t({ 4, 3 }, "f64")) end, "y", "f64")
      H.raises(function() cg(x4, y) end, "y", "dim 1")
    end
    assert.are.equal(2, cg:plan_count())
    local s = ds.compile(function(a) return a * 2 end, { ds.spec({ 2, 3 }, "f32", "a") })
    assert(H.bitwise(s(x), x * 2))
    H.raises(function() s(t({ 3, 2 })) end, "a", "(3,2)")
    H.raises(function() s(t({ 2, 3 }, "f64")) end, "a", "f64")
    assert(H.bitwise(s(y), y * 2))
    assert.are.equal(1, s:plan_count())
  end)
  it("a compiled module follows its train/eval mode call by call, one graph per mode", function()
    local Probe = ds.nn.Module:extend("ModeProbe")
    function Probe:forward(x) if self.training then return x * 2 end return x + 1 end
    local m = Probe()
    m:eval()
    local cg = ds.compile(m, { ds.spec({ 3 }, "f32", "x") })
    local x = t({ 3 })
    local seen = {}
    for _, mode in ipairs { "eval", "train", "train", "eval", "train", "eval" } do
      m[mode](m)
      assert(H.bitwise(cg(x), mode == "train" and x * 2 or x + 1), mode)
      local c = cg.current()
      seen[mode] = seen[mode] or c
      assert.are.equal(seen[mode], c)
    end
    assert.are_not.equal(seen.eval, seen.train)
  end)
  it("an input updated in place is written back, contiguous or not, call after call", function()
    local f = function(x) x:mul_(2); return x + 1 end
    local cg = ds.compile(f, { ds.spec({ 4, 3 }, "f32", "x") })
    for _, transposed in ipairs { false, true, true, false } do
      local x = transposed and t({ 3, 4 }):t() or t({ 4, 3 })
      local e = x:clone()
      local want = f(e)
      assert(H.bitwise(cg(x), want))
      assert(H.bitwise(x, e))
    end
  end)
  it("options: passes can be switched off (results unchanged); unknown options are errors", function()
    local f = function(x) return (x * 2):exp() + x:exp() end
    local x = t({ 3, 4 })
    for _, opts in ipairs { { fuse = false }, { cse = false, fold = false }, { epilogue = false, dce = false } } do
      assert(H.bitwise(ds.compile(f, { x }, opts)(x), f(x)))
    end
    H.raises(function() ds.compile(f, { x }, { fusion = false }) end, "unknown option 'fusion'")
  end)
  it("a compiled graph called inside another traced function becomes part of its graph", function()
    local inner = ds.compile(function(x) return (x * 2):exp() end, { ds.spec({ 3 }, "f32", "x") })
    local outer = function(x) return inner(x + 1) - 1 end
    local cg = ds.compile(outer, { ds.spec({ 3 }, "f32", "x") })
    local x = t({ 3 })
    assert(H.bitwise(cg(x), outer(x)))
  end)
  it("non-contiguous inputs are accepted", function()
    local f = function(x) return x * 2 end
    local cg = ds.compile(f, { ds.spec({ 4, 3 }, "f32", "x") })
    local x = t({ 3, 4 }):t()
    assert(H.bitwise(cg(x), f(x)))
  end)
  it("profile times every C step and leaves results and later runs unchanged", function()
    local f = function(x, w) return x:matmul(w):relu():softmax(-1) end
    local cg = ds.compile(f, { ds.spec({ 8, "n" }, "f32", "x"), ds.spec({ "n", 5 }, "f32", "w") })
    local x, w = t({ 8, 6 }), t({ 6, 5 })
    local rows, total = cg:profile(4, x, w)
    local steps = require("ds.ffi").C.ds_plan_num_steps(cg._last_plan.plan)
    assert.are.equal(steps, #rows)
    local kernels, share = {}, 0
    for i, r in ipairs(rows) do
      kernels[r.kernel] = true
      assert.truthy(r.ms >= 0 and (i == 1 or rows[i - 1].ms >= r.ms))
      assert.truthy(r.line and r.line:find("compile_spec.lua", 1, true))
      share = share + r.share
    end
    assert.truthy(kernels.ds_softmax_f32 and (kernels.ds_matmul_ep_f32 or kernels.ds_matmul_f32))
    assert.truthy(total > 0 and math.abs(share - 1) < 1e-9)
    local text = ds.format_profile(rows, total)
    assert.truthy(text:find("ds_softmax_f32", 1, true) and text:find("total of " .. steps .. " steps", 1, true))
    assert(H.bitwise(cg(x, w), f(x, w)))
    H.raises(function() cg:profile(x, w) end, "profile", "number of runs")
  end)
end)

describe("compile: memory plan", function()
  it("reuses buffers: the arena is smaller than the unplanned sum", function()
    local f = function(x, w)
      local h = x
      for _ = 1, 6 do h = h:matmul(w):tanh():softmax(-1) end
      return h
    end
    local cg = parity(f, { t({ 32, 64 }), t({ 64, 64 }) })
    local m = cg:memory()
    assert.truthy(m.arena_bytes > 0)
    assert.truthy(m.arena_bytes <= 0.5 * m.eager_bytes, m.arena_bytes .. " vs " .. m.eager_bytes)
  end)
  it("no allocations per run after the first (live bytes flat apart from the outputs)", function()
    local f = function(x) return (x:matmul(x:t()) * 2):softmax(-1):sum() end
    local cg = ds.compile(f, { ds.spec({ 16, 16 }, "f32", "x") })
    local x = t({ 16, 16 })
    cg(x)
    collectgarbage("collect")
    local before = ds.memory().live_bytes
    for _ = 1, 20 do local y = cg(x); y = nil end
    collectgarbage("collect")
    assert.are.equal(before, ds.memory().live_bytes)
  end)
end)

describe("compile: state", function()
  it("reads parameters by reference and applies state writes", function()
    local w = t({ 4, 4 })
    local f = function(x) w:add_(x); return w * 2 end
    local cg = ds.compile(f, { ds.spec({ 4, 4 }, "f32", "x") })
    local x = t({ 4, 4 })
    local w0 = w:clone()
    local out = cg(x)
    assert(H.bitwise(w, w0 + x))
    assert(H.bitwise(out, (w0 + x) * 2))
  end)
  it("several random ops in one graph (the generator state updated in place along the chain)", function()
    local f = function(x) return x + ds.rand(3, 4) * ds.randn(3, 4) + ds.rand(3, 4) end
    local cg = ds.compile(f, { ds.spec({ 3, 4 }, "f32", "x") })
    local x = t({ 3, 4 })
    ds.manual_seed(11); local e1, e2 = f(x), f(x)
    local after = require("ds.random").state():clone()
    ds.manual_seed(11); local c1, c2 = cg(x), cg(x)
    assert(H.bitwise(c1, e1)); assert(H.bitwise(c2, e2))
    assert(H.bitwise(require("ds.random").state(), after))
  end)
  it("random ops advance the generator like eager", function()
    local f = function(x) return ds.dropout and ds.dropout(x, 0.5, true) or x + ds.rand(x.shape) end
    local cg = ds.compile(f, { ds.spec({ 8, 8 }, "f32", "x") })
    local x = t({ 8, 8 })
    ds.manual_seed(3); local e1, e2 = f(x), f(x)
    ds.manual_seed(3); local c1, c2 = cg(x), cg(x)
    assert(H.bitwise(c1, e1)); assert(H.bitwise(c2, e2))
  end)
end)

describe("compile: training step", function()
  it("forward + backward + Adam (with dropout) compiles; losses and weights equal eager bitwise", function()
    local nn, F = ds.nn, ds.nn.functional
    local function make()
      ds.manual_seed(1)
      local net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
      return net, ds.optim.Adam(net:parameters(), { lr = 1e-2 })
    end
    local function step_fn(net, opt)
      return function(x, y)
        opt:zero_grad()
        local loss = F.cross_entropy(net(x), y)
        loss:backward()
        opt:step()
        return loss
      end
    end
    local xs, ys = {}, {}
    ds.manual_seed(9)
    for i = 1, 4 do xs[i] = ds.randn(4, 8); ys[i] = (ds.rand(4) * 3):astype("i64") + 1 end
    local n1, o1 = make()
    local eager = step_fn(n1, o1)
    ds.manual_seed(2)
    local losses = {}
    for i = 1, 4 do losses[i] = eager(xs[i], ys[i]) end
    local n2, o2 = make()
    local compiled = ds.compile(step_fn(n2, o2), { xs[1], ys[1] })
    ds.manual_seed(2)
    for i = 1, 4 do assert(H.bitwise(compiled(xs[i], ys[i]), losses[i]), "loss " .. i) end
    local w2 = n2:state_dict()
    for k, p in pairs(n1:state_dict()) do assert(H.bitwise(w2[k], p), k) end
  end)
end)

describe("compile: LeNet-5 training (examples/lenet_fashion_mnist.lua --compile)", function()
  it("three compiled Adam steps (conv, pool, linear) equal eager bitwise, with a smaller last batch", function()
    local LeNet = dofile("examples/lenet_fashion_mnist.lua").LeNet
    local F = ds.nn.functional
    local function run(compiled)
      ds.manual_seed(22)
      local model = LeNet()
      local opt = ds.optim.Adam(model:parameters(), { lr = 1e-3 })
      local step = function(x, y)
        local loss = F.cross_entropy(model(x), y)
        opt:zero_grad(); loss:backward(); opt:step()
        return loss
      end
      if compiled then
        step = ds.compile(step, { ds.spec({ "batch", 1, 28, 28 }, "f32", "x"), ds.spec({ "batch" }, "i64", "y") })
      end
      ds.manual_seed(5)
      local losses = {}
      for i, n in ipairs { 16, 16, 7 } do
        local x, y = ds.rand(n, 1, 28, 28), (ds.rand(n) * 10):astype("i64") + 1
        losses[i] = step(x, y)
      end
      return losses, model:state_dict()
    end
    local le, we = run(false)
    local lc, wc = run(true)
    for i = 1, 3 do assert(H.bitwise(lc[i], le[i]), "loss " .. i) end
    for k, p in pairs(we) do assert(H.bitwise(wc[k], p), k) end
  end)
end)

describe("compile: the BERT-style classifier (examples/bert_sentiment.lua, small sizes)", function()
  it("compiled and loaded equal eager bitwise, padded and with a dynamic length", function()
    local bert = dofile("examples/bert_sentiment.lua")
    local cfg = { vocab = 50, hidden = 32, layers = 2, heads = 4, ffn = 64, max_len = 16, labels = 6 }
    ds.manual_seed(4)
    local model = bert.Bert(cfg)
    model:eval()
    local function sample(len, total)
      local ids = (ds.rand(1, total) * 40):astype("i64") + 5
      local mask = ds.zeros(1, total)
      mask:narrow(2, 1, len):fill_(1)
      return ids, mask
    end
    local padded = ds.compile(model, { ds.spec({ 1, 16 }, "i64", "ids"), ds.spec({ 1, 16 }, "f32", "mask") })
    local dynamic = ds.compile(model, { ds.spec({ 1, "seq" }, "i64", "ids"), ds.spec({ 1, "seq" }, "f32", "mask") })
    local path = os.tmpname()
    ds.save(dynamic, path)
    local loaded = ds.load(path)
    for _, len in ipairs { 3, 9, 16 } do
      local ids, mask = sample(len, 16)
      assert(H.bitwise(padded(ids, mask), model(ids, mask)))
      local ids2, mask2 = ids:narrow(2, 1, len):contiguous(), mask:narrow(2, 1, len):contiguous()
      local want = model(ids2, mask2)
      assert(H.bitwise(dynamic(ids2, mask2), want))
      assert(H.bitwise(loaded(ids2, mask2), want))
    end
    assert.truthy(padded:memory().arena_bytes <= 0.5 * padded:memory().eager_bytes)
  end)
end)
