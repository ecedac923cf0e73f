-- tests/reduce_spec.lua: reductions, softmax/log_softmax and cumsum against PyTorch fixtures
-- (tests/gen_reduce_fixtures.py), call forms, special values, errors (Lua and C side),
-- 1-vs-2-thread bitwise determinism, and backward (first and second order) by finite differences.
local ds = require("ds")
local H = require("helpers")
local cjson = require("cjson")
local ffi = require("ffi")


local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- a fixture tensor; "formula" inputs are recomputed (see gen_reduce_fixtures.py)
local function T(spec)
  local vals = spec.data
  if spec.formula then
    vals = {}
    for i = 0, numel(spec.shape) - 1 do vals[i + 1] = ((i * 7919) % 10007) / 100 - 5 end
  end
  return ds.tensor(vals, { dtype = spec.dtype }):reshape(spec.shape)
end

local TOL = { f32 = { 2e-5, 2e-5 }, f64 = { 1e-10, 1e-10 } }

local function run_case(c)
  local x = T(c.input)
  if c.transpose ~= cjson.null and c.transpose then x = x:transpose(c.transpose[1], c.transpose[2]) end
  local a, op = c.args, c.op
  if op == "max" or op == "min" then
    if a.dims then return { ds[op](x, a.dims[1], a.keepdim) } end
    return { ds[op](x) }
  elseif op == "argmax" or op == "argmin" then
    return { ds[op](x, a.dims and a.dims[1], a.keepdim) }
  elseif op == "softmax" or op == "log_softmax" or op == "cumsum" then
    return { ds[op](x, a.dim) }
  elseif op == "var" or op == "std" then -- positionally (dim, unbiased, keepdim) as PyTorch: options here
    return { ds[op](x, { dim = a.dims, keepdim = a.keepdim, correction = a.correction }) }
  end
  return { ds[op](x, a.dims, a.keepdim) }
end

local function check_output(got, want)
  assert.same(want.shape, got.shape)
  assert.equal(want.dtype, got.dtype)
  local tol = TOL[want.dtype]
  if tol then
    H.close(got, T(want), tol[1], tol[2])
  else
    assert.same(T(want):astype("f64"):reshape(-1):totable(), got:astype("f64"):reshape(-1):totable())
  end
end

describe("reductions against PyTorch", function()
  local cases = H.fixture("reduce.json")
  it("has the fixture cases", function() assert.is_true(#cases > 500) end)
  for i, c in ipairs(cases) do
    local desc = string.format("%d %s %s %s %s%s", i, c.op, c.input.dtype, table.concat(c.input.shape, "x"),
      cjson.encode(c.args), (c.transpose ~= cjson.null and c.transpose) and " transposed" or "")
    it(desc, function()
      local outs = run_case(c)
      assert.equal(#c.outputs, #outs)
      for k = 1, #outs do check_output(outs[k], c.outputs[k]) end
    end)
  end
end)

describe("reduction call forms", function()
  local x = ds.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  it("accept dims, keepdim, lists and an options table", function()
    assert.equal(21, x:sum():item())
    assert.same({ 6, 15 }, x:sum(2):totable())
    assert.same({ { 6 }, { 15 } }, x:sum(2, true):totable())
    assert.same({ { 21 } }, x:sum({ 1, 2 }, true):totable())
    assert.same({ { 6 }, { 15 } }, x:sum({ dim = 2, keepdim = true }):totable())
    assert.same({ 6, 15 }, ds.sum(x, 2):totable())
    assert.same({ 2.5, 3.5, 4.5 }, x:mean(1):totable())
    assert.same({ 6, 15 }, x:sum(-1):totable())
    assert.equal(21, x:sum({}):item())
  end)
  it("max/min: values and 1-based indices over a dim, the global value without one", function()
    local v, i = x:max(2)
    assert.same({ 3, 6 }, v:totable())
    assert.same({ 3, 3 }, i:totable())
    assert.equal("i64", i.dtype)
    assert.equal(6, x:max():item())
    assert.equal(1, x:min():item())
    assert.same({ { 1, 2, 3 } }, x:min(1, true):totable())
    assert.same({ { 6, 5, 4 }, { 6, 5, 6 } }, x:max(ds.tensor({ 6, 5, 4 })):totable())
    assert.same({ 3, 3 }, x:argmax(-1):totable())
    assert.equal(6, x:argmax():item())
    assert.equal(1, x:argmin():item())
    assert.same({ { 1 }, { 1 } }, x:argmin(2, true):totable())
  end)
  it("var/std: unbiased by default, correction or unbiased = false", function()
    H.close(x:var(2), { 1, 1 })
    H.close(x:var(2, { unbiased = false }), { 2 / 3, 2 / 3 })
    H.close(x:var(2, false), { 2 / 3, 2 / 3 })
    H.close(x:std(), { math.sqrt(3.5) })
  end)
  it("dtypes follow torch: integer sums give i64, all/any give bool", function()
    local i = ds.tensor({ 1, 2, 3 }, { dtype = "i32" })
    assert.equal("i64", i:sum().dtype)
    assert.equal("i64", i:prod().dtype)
    assert.equal("i32", i:amax().dtype)
    assert.equal("bool", i:all().dtype)
    assert.equal("f32", i:logsumexp(1).dtype)
    assert.equal("f32", i:softmax(1).dtype)
    assert.equal("i64", i:cumsum(1).dtype)
    assert.equal(2, ds.tensor({ true, false, true }):sum():item())
  end)
  it("0-d tensors reduce over nothing", function()
    local s = ds.tensor(3)
    assert.equal(3, s:sum():item())
    assert.equal(3, s:sum(1):item())
    assert.equal(1, s:softmax(-1):item())
  end)
  it("cumsum runs backwards with reverse = true", function()
    assert.same({ 6, 5, 3 }, ds.tensor({ 1, 2, 3 }):cumsum(1, { reverse = true }):totable())
  end)
end)

describe("special values", function()
  local nan, inf = 0 / 0, math.huge
  it("max and argmax propagate NaN to its first position", function()
    local x = ds.tensor({ { 1, nan, 3, nan } })
    local v, i = x:max(2)
    assert.is_true(v:item() ~= v:item())
    assert.equal(2, i:item())
    assert.equal(2, x:argmax():item())
    assert.is_true(x:amax():item() ~= x:amax():item())
  end)
  it("ties give the first index", function()
    local _, i = ds.tensor({ 2, 5, 5, 1, 5 }):max(1)
    assert.equal(2, i:item())
    assert.equal(4, ds.tensor({ 2, 5, 5, 1, 1 }):argmin():item())
  end)
  it("logsumexp handles infinities and empty dims", function()
    assert.equal(-inf, ds.tensor({ -inf, -inf }):logsumexp(1):item())
    assert.equal(inf, ds.tensor({ 1, inf }):logsumexp(1):item())
    H.close(ds.tensor({ 1000, 1000 }, { dtype = "f64" }):logsumexp(1), { 1000 + math.log(2) })
    assert.same({ -inf, -inf }, ds.zeros(2, 0):logsumexp(2):totable())
  end)
  it("empty reductions give the identity", function()
    assert.same({ 0, 0 }, ds.zeros(2, 0):sum(2):totable())
    assert.same({ 1, 1 }, ds.zeros(2, 0):prod(2):totable())
    assert.same({ true, true }, ds.zeros(2, 0):all(2):totable())
    assert.same({ false, false }, ds.zeros(2, 0):any(2):totable())
    assert.same({ 0, 0, 0 }, ds.zeros(0, 3):sum(1):totable())
  end)
  it("softmax of masked (-inf) entries gives zeros there, as in attention", function()
    local x = ds.tensor({ { 0, -inf, 1, -inf }, { -inf, 2, -inf, -inf } })
    local y = x:softmax(-1)
    H.close(y, { 1 / (1 + math.exp(1)), 0, math.exp(1) / (1 + math.exp(1)), 0, 0, 1, 0, 0 })
    assert.equal(-inf, x:log_softmax(-1):totable()[1][2])
  end)
  it("softmax is stable for large inputs", function()
    H.close(ds.tensor({ 1000, 1000 }):softmax(1), { 0.5, 0.5 })
    H.close(ds.tensor({ -1000, 0 }):log_softmax(1), { -1000, 0 })
  end)
end)

describe("reduction errors", function()
  local x = ds.zeros(2, 3)
  it("name the op and the shape on a bad dim", function()
    H.raises(function() x:sum(3) end, "sum of (2,3)", "dim 3 out of range")
    H.raises(function() x:softmax(-3) end, "softmax of (2,3)", "out of range")
    H.raises(function() x:max(5) end, "max of (2,3)")
    H.raises(function() x:sum({ 1, -2 }) end, "sum of (2,3)", "repeated")
    H.raises(function() x:cumsum(0) end, "cumsum of (2,3)")
  end)
  it("reject bad arguments", function()
    H.raises(function() x:softmax() end, "softmax of (2,3)", "dim is required")
    H.raises(function() x:sum(1, 2) end, "sum", "keepdim must be a boolean")
    H.raises(function() x:sum("a") end, "sum", "dim must be")
    H.raises(function() x:max({ 1, 2 }) end, "max", "one dim")
    H.raises(function() x:sum({ foo = 1 }) end, "sum", "unknown option 'foo'")
    H.raises(function() ds.zeros(2, 0):max(2) end, "max of (2,0)", "size 0")
    H.raises(function() ds.zeros(2, 0):argmax() end, "argmax of (2,0)", "size 0")
  end)
  it("mean/var/std of integers are errors, as in torch", function()
    local i = ds.tensor({ 1, 2 }, { dtype = "i64" })
    H.raises(function() i:mean() end, "mean", "i64", "floating point")
    H.raises(function() i:var() end, "var", "i64")
  end)
  it("the C kernels validate what a loaded graph could feed them", function()
    local C = require("ds.ffi").C
    local function call(kname, outs, attrs)
      local t = ffi.new("ds_tensor*[?]", #outs + 1)
      for k, o in ipairs(outs) do t[k - 1] = o._c end
      t[#outs] = ds.zeros(2, 3)._c
      local a = ffi.new("double[?]", #attrs + 1, attrs)
      local rc = C.ds_kernel_find(kname)(t, a)
      return rc, ffi.string(C.ds_last_error())
    end
    local rc, msg = call("ds_sum_f32", { ds.zeros(2) }, { 1, 1, 0 })
    assert.equal(0, rc)
    rc, msg = call("ds_sum_f32", { ds.zeros(3) }, { 1, 1, 0 })
    assert.is_true(rc ~= 0); assert.truthy(msg:find("output shape", 1, true))
    rc, msg = call("ds_sum_f32", { ds.zeros(2) }, { 1, 7, 0 })
    assert.is_true(rc ~= 0); assert.truthy(msg:find("dim", 1, true))
    rc, msg = call("ds_sum_f32", { ds.zeros(2) }, { 9, 0, 0 })
    assert.is_true(rc ~= 0)
    rc, msg = call("ds_sum_f64", { ds.zeros(2) }, { 1, 1, 0 })
    assert.is_true(rc ~= 0); assert.truthy(msg:find("dtype", 1, true))
    rc, msg = call("ds_max_f32", { ds.zeros(2), ds.zeros(2) }, { 1, 1, 0 })
    assert.is_true(rc ~= 0); assert.truthy(msg:find("i64", 1, true))
    rc, msg = call("ds_softmax_f32", { ds.zeros(2, 3) }, { 2 })
    assert.is_true(rc ~= 0); assert.truthy(msg:find("dim", 1, true))
    rc, msg = call("ds_softmax_f32", { ds.zeros(3, 2) }, { 1 })
    assert.is_true(rc ~= 0); assert.truthy(msg:find("does not match", 1, true))
  end)
end)

describe("determinism", function()
  -- big enough for the parallel paths (> DS_PAR_MIN elements, several DS_CHUNK blocks)
  local x = ds.arange(0, 300007, { dtype = "f64" }):mul(0.001):sin():astype("f32")
  local m = x:narrow(1, 1, 300000):reshape(600, 500)
  local cases = {
    sum = function() return x:sum() end,
    mean = function() return x:astype("f64"):mean() end,
    var = function() return x:var() end,
    logsumexp = function() return m:logsumexp(1) end,
    row_sum = function() return m:sum(2) end,
    column_sum = function() return m:sum(1) end,
    transposed_sum = function() return m:t():sum(2) end,
    amax = function() return m:amax(1) end,
    argmax = function() return x:argmax() end,
    softmax = function() return m:softmax(-1) end,
    softmax_dim1 = function() return m:softmax(1) end,
    log_softmax = function() return m:log_softmax(-1) end,
    cumsum = function() return m:cumsum(2) end,
  }
  for name, f in pairs(cases) do
    it(name .. " is bitwise equal with 1 and 2 threads", function()
      local prev = ds.get_num_threads()
      ds.set_num_threads(1)
      local a = f()
      ds.set_num_threads(2)
      local b = f()
      ds.set_num_threads(prev)
      assert.is_true(H.bitwise(a, b))
    end)
  end
  it("softmax of a transposed view equals softmax of its contiguous copy bitwise", function()
    local v = m:t()
    assert.is_true(H.bitwise(v:softmax(1), v:contiguous():softmax(1)))
  end)
  -- many planes fold side by side (GlobalAveragePool's mean over H, W); one plane alone folds by itself
  it("planes reduced together equal each plane reduced alone, bitwise", function()
    for _, shape in ipairs { { 1, 13, 6, 6 }, { 2, 7, 3, 3 }, { 1, 9, 17, 5 }, { 1, 6, 24, 24 } } do
      local x = ds.randn(unpack(shape)) * 3
      for _, f in ipairs { ds.mean, ds.sum, ds.amax, ds.var, ds.logsumexp } do
        local whole, alone = f(x, { 3, 4 }), {}
        for n = 1, shape[1] do
          for c = 1, shape[2] do alone[#alone + 1] = f(x:narrow(1, n, 1):narrow(2, c, 1), { 3, 4 }) end
        end
        assert.is_true(H.bitwise(whole, ds.cat(alone, 2):reshape(shape[1], shape[2])))
      end
    end
  end)
  it("a large sum is accurate", function()
    local n = 300007
    local want = 0
    for i = 0, n - 1 do want = want + tonumber(ffi.new("float", math.sin(i * 0.001))) end
    H.close(x:astype("f64"):sum(), { want }, 1e-12, 1e-9)
    H.close(x:sum(), { want }, 1e-5, 1e-3)
  end)
end)

-- ---- gradients by central differences (f64) ----
local function values(shape, seed)
  local v, n = {}, numel(shape)
  for i = 1, n do v[i] = math.sin(i * 1.7 + seed) * 1.5 + (i % 3) * 0.1 end
  return v
end

-- analytic grad of sum(f(x) * w) vs central differences; x built from vals (shape) with transpose
local function gradcheck(f, shape, opts)
  opts = opts or {}
  local vals = opts.values or values(shape, 0.3)
  local function build(v)
    local x = ds.tensor(v, { dtype = "f64" }):reshape(shape)
    if opts.transpose then x = x:transpose(1, 2) end
    return x
  end
  local y0 = f(build(vals))
  local w = ds.tensor(values(y0.shape, 2.1), { dtype = "f64" }):reshape(y0.shape)
  local function loss(v) return (f(build(v)) * w):sum():item() end
  local base = ds.tensor(vals, { dtype = "f64" }):reshape(shape):requires_grad_()
  local x = opts.transpose and base:transpose(1, 2) or base
  local out = (f(x) * w):sum()
  local g = ds.grad(out, { base })[1]:reshape(-1):totable()
  local eps = 1e-6
  for i = 1, #vals do
    local vp, vm = {}, {}
    for k = 1, #vals do vp[k] = vals[k]; vm[k] = vals[k] end
    vp[i] = vals[i] + eps; vm[i] = vals[i] - eps
    local num = (loss(vp) - loss(vm)) / (2 * eps)
    assert(math.abs(num - g[i]) <= 1e-6 + 1e-5 * math.abs(num),
      string.format("element %d: analytic %.10g vs numeric %.10g", i, g[i], num))
  end
end

-- second order: grad of sum(grad(sum(f(x) * w1), x) * w2) by differences of the first grad
local function gradgradcheck(f, shape)
  local vals = values(shape, 0.7)
  local w1
  local function first(x)
    local y = f(x)
    w1 = w1 or ds.tensor(values(y.shape, 1.3), { dtype = "f64" }):reshape(y.shape)
    return ds.grad((y * w1):sum(), { x }, { create_graph = true })[1]
  end
  gradcheck(function(x)
    if not x.requires_grad then x = x:clone():requires_grad_() end
    return first(x)
  end, shape, { values = vals })
end

describe("backward against finite differences (f64)", function()
  local checks = {
    { "sum all", function(x) return x:sum() end, { 2, 3, 4 } },
    { "sum dims {1,3}", function(x) return x:sum({ 1, 3 }) end, { 2, 3, 4 } },
    { "sum keepdim", function(x) return x:sum(2, true) end, { 2, 3, 4 } },
    { "mean", function(x) return x:mean(2) end, { 3, 4 } },
    { "mean all keepdim", function(x) return x:mean({ dim = { 1, 2 }, keepdim = true }) end, { 3, 4 } },
    { "prod", function(x) return x:prod(2) end, { 3, 4 } },
    { "var", function(x) return x:var(2) end, { 3, 4 } },
    { "var dims correction 0", function(x) return x:var({ 1, 2 }, { correction = 0 }) end, { 3, 4 } },
    { "std keepdim", function(x) return x:std(1, true, true) end, { 3, 4 } },
    { "amax", function(x) return x:amax(2) end, { 3, 4 } },
    { "amin all", function(x) return x:amin() end, { 3, 4 } },
    { "max values", function(x) return (x:max(2)) end, { 3, 4 } },
    { "min values keepdim", function(x) return (x:min(1, true)) end, { 3, 4 } },
    { "max global", function(x) return x:max() end, { 3, 4 } },
    { "logsumexp", function(x) return x:logsumexp(2) end, { 3, 4 } },
    { "logsumexp dims", function(x) return x:logsumexp({ 1, 3 }, true) end, { 2, 3, 2 } },
    { "softmax last", function(x) return x:softmax(-1) end, { 3, 4 } },
    { "softmax dim 1", function(x) return x:softmax(1) end, { 3, 4 } },
    { "log_softmax", function(x) return x:log_softmax(2) end, { 2, 3, 4 } },
    { "cumsum", function(x) return x:cumsum(2) end, { 3, 4 } },
    { "reverse cumsum", function(x) return x:cumsum(1, { reverse = true }) end, { 3, 4 } },
  }
  for _, c in ipairs(checks) do
    it(c[1], function() gradcheck(c[2], c[3]) end)
  end
  it("on transposed (non-contiguous) inputs", function()
    gradcheck(function(x) return x:softmax(-1) end, { 4, 3 }, { transpose = true })
    gradcheck(function(x) return x:var(1) end, { 4, 3 }, { transpose = true })
    gradcheck(function(x) return x:sum(2) end, { 4, 3 }, { transpose = true })
  end)
  for _, c in ipairs {
    { "softmax", function(x) return x:softmax(-1) end },
    { "log_softmax", function(x) return x:log_softmax(1) end },
    { "logsumexp", function(x) return x:logsumexp(2) end },
    { "var", function(x) return x:var(2) end },
    { "std", function(x) return x:std(1) end },
    { "mean", function(x) return (x * x):mean(2) end },
    { "cumsum", function(x) return (x * x):cumsum(2) end },
  } do
    it("second order: " .. c[1], function() gradgradcheck(c[2], { 3, 4 }) end)
  end
  it("autograd.sum_to relies on g:sum(dims, true)", function()
    local a = ds.ones(3, 1, { dtype = "f64" }):requires_grad_()
    local b = ds.ones(2, 3, 4, { dtype = "f64" })
    local y = (a + b):sum()
    y:backward()
    assert.same({ 3, 1 }, a.grad.shape)
    assert.same({ { 8 }, { 8 }, { 8 } }, a.grad:totable())
  end)
  it("the grad of a sum is a tensor of its own (in-place updates of .grad stay elementwise)", function()
    local a = ds.ones(3):requires_grad_()
    a:sum():backward()
    a.grad:mul_(2)
    assert.same({ 2, 2, 2 }, a.grad:totable())
    local b = ds.ones(2, 2):requires_grad_()
    b:mean():backward()
    b.grad:add_(1)
    assert.same({ { 1.25, 1.25 }, { 1.25, 1.25 } }, b.grad:totable())
  end)
  it("mean and max backward trace with a symbolic reduced dim and match eager", function()
    local function fn(x)
      x = x:requires_grad_()
      local y = x:max(1) + x:mean(1) + x:var(1)
      return ds.grad(y:sum(), { x }, { create_graph = true })[1]
    end
    local g = ds.compile(ds.trace(fn, { ds.spec({ "batch", 3 }, "f64", "x") }))
    local x = ds.tensor({ { 1, 5, 3 }, { 4, 2, 6 }, { 0, 1, 2 } }, { dtype = "f64" })
    assert.is_true(H.bitwise(g(x), fn(x:clone())))
  end)
  it("argmax and integer reductions do not carry grad", function()
    local a = ds.ones(2, 3):requires_grad_()
    assert.is_false(a:argmax(2).requires_grad)
    local _, i = a:max(2)
    assert.is_false(i.requires_grad)
  end)
end)
