-- tests/gradcheck_spec.lua: finite-difference gradchecks (f64) of EVERY op in the op table that has
-- a backward rule -- plain, broadcasting and non-contiguous inputs -- and second derivatives
-- (ds.grad with create_graph) of a set of ops; plus checks that gradcheck itself catches wrong rules.
local ds = require("ds")
local D = require("ds.dispatch")
local H = require("helpers")

local gradcheck, gradgradcheck = ds.autograd.gradcheck, ds.autograd.gradgradcheck

-- ---- inputs (f64, requires_grad) ----
local function leaf(t) return t:requires_grad_() end
local function N(...) return leaf(ds.randn({ ... }, { dtype = "f64" })) end                    -- normal
local function P(...) return leaf(ds.rand({ ... }, { dtype = "f64" }) * 1.5 + 0.5) end         -- in [0.5, 2)
local function A(...)                                                                          -- |x| in [0.3, 1.3)
  local u = ds.rand({ ... }, { dtype = "f64" })
  local s = ds.rand({ ... }, { dtype = "f64" }):gt(0.5):astype("f64") * 2 - 1
  return leaf((u + 0.3) * s)
end
-- the same values as a non-contiguous view (last two dims transposed in memory)
local function NC(t)
  local v = t:detach():transpose(-1, -2):contiguous():transpose(-1, -2)
  assert(not v:is_contiguous())
  return leaf(v)
end
local function I(list) return ds.tensor(list, { dtype = "i64" }) end

local function call(name, attrs)
  return function(...) return (D.call(D.by_name[name], { ... }, attrs)) end
end

-- ---- cases: op name -> list of {label, fn, inputs} ----
local cases = {}
local function add(name, label, fn, inputs) cases[name] = cases[name] or {}; table.insert(cases[name], { label, fn, inputs }) end

local unary_domain = { log = P, sqrt = P, rsqrt = P, abs = A, relu = A, sign = A }
for _, name in ipairs { "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh",
                        "erf", "abs", "neg", "relu", "sign" } do
  local make = unary_domain[name] or N
  add(name, "(3,4)", call(name), function() return { make(3, 4) } end)
  add(name, "non-contiguous", call(name), function() return { NC(make(4, 3)) } end)
end

local binary_domain = { div = { N, A }, pow = { P, N } }
for _, name in ipairs { "add", "sub", "mul", "div", "pow", "maximum", "minimum" } do
  local ma, mb = unpack(binary_domain[name] or { N, N })
  add(name, "same shape", call(name), function() return { ma(3, 4), mb(3, 4) } end)
  add(name, "broadcast (3,4) op (4)", call(name), function() return { ma(3, 4), mb(4) } end)
  add(name, "broadcast (3,1) op (1,4)", call(name), function() return { ma(3, 1), mb(1, 4) } end)
  add(name, "non-contiguous and broadcast", call(name), function() return { NC(ma(4, 3)), mb(2, 1, 3) } end)
end
for _, name in ipairs { "log1p", "expm1", "log2", "floor", "ceil", "round", "trunc" } do
  local make = (name == "log1p" or name == "log2") and P or N
  add(name, "non-contiguous", call(name), function() return { NC(make(4, 3)) } end)
end
-- the trigonometric family inside each domain
local SMALL = function(...) return N(...) * 0.3 end
local trig_domain = { asin = SMALL, acos = SMALL, atanh = SMALL, acosh = function(...) return P(...) + 1 end }
for _, name in ipairs { "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh" } do
  add(name, "non-contiguous", call(name), function() return { NC((trig_domain[name] or N)(4, 3)) } end)
end
for _, name in ipairs { "fmod", "remainder" } do
  add(name, "broadcast (3,4) op (4)", call(name), function() return { N(3, 4), A(4) } end)
end
add("mul", "with a Lua number", function(x) return x * 2.5 end, function() return { N(2, 3) } end)

add("where", "broadcast", function(c, a, b) return ds.where(c, a, b) end,
  function() return { ds.rand(3, 4):gt(0.5), NC(N(3, 4)), N(4) } end)
add("clamp", "(3,4)", call("clamp", { min = -0.5, max = 0.5 }), function() return { N(3, 4) } end)
add("clamp", "one bound, non-contiguous", call("clamp", { min = 0.1 }), function() return { NC(N(4, 3)) } end)
add("softplus", "beta 2, threshold 1 (both sides)", call("softplus", { beta = 2, threshold = 1 }), function() return { NC(N(4, 3)) } end)
add("astype", "f64", call("astype", { dtype = "f64" }), function() return { N(3, 4) } end)
add("contiguous", "non-contiguous", call("contiguous"), function() return { NC(N(4, 3)) } end)

add("reshape", "(3,4) -> (2,6)", call("reshape", { shape = { 2, 6 } }), function() return { N(3, 4) } end)
add("reshape", "non-contiguous", call("reshape", { shape = { 12 } }), function() return { NC(N(4, 3)) } end)
add("transpose", "(2,3,4)", call("transpose", { dim0 = 1, dim1 = 3 }), function() return { N(2, 3, 4) } end)
add("permute", "(2,3,4)", call("permute", { dims = { 3, 1, 2 } }), function() return { NC(N(2, 4, 3)) } end)
add("narrow", "dim 2", call("narrow", { dim = 2, start = 2, length = 2 }), function() return { N(3, 4) } end)
add("select", "dim 1", call("select", { dim = 1, index = 2 }), function() return { N(3, 4) } end)
add("unfold", "overlapping windows, non-contiguous", call("unfold", { dim = 2, size = 3, step = 2 }),
  function() return { NC(N(6, 3)) } end)
add("select", "last dim, non-contiguous", call("select", { dim = -1, index = 3 }), function() return { NC(N(4, 3)) } end)
add("expand", "(3,1) -> (2,3,4)", call("expand", { shape = { 2, 3, 4 } }), function() return { N(3, 1) } end)

add("matmul", "(3,4) @ (4,5)", ds.matmul, function() return { N(3, 4), N(4, 5) } end)
add("matmul", "batched (2,3,4) @ (4,5)", ds.matmul, function() return { N(2, 3, 4), N(4, 5) } end)
add("matmul", "broadcast (2,1,3,4) @ (3,4,2)", ds.matmul, function() return { N(2, 1, 3, 4), N(3, 4, 2) } end)
add("matmul", "non-contiguous", ds.matmul, function() return { NC(N(3, 4)), NC(N(4, 5)) } end)
add("matmul", "vector operands", ds.matmul, function() return { N(4), N(4, 3) } end)

for _, name in ipairs { "sum", "mean", "prod", "var", "std", "amax", "amin", "logsumexp" } do
  local make = name == "prod" and A or N
  add(name, "all dims", call(name), function() return { make(3, 4) } end)
  add(name, "dim 2 keepdim", call(name, { dims = { 2 }, keepdim = true }), function() return { make(3, 4) } end)
  add(name, "dims {1,3}, non-contiguous", call(name, { dims = { 1, 3 } }), function() return { NC(make(2, 4, 3)) } end)
end
for _, name in ipairs { "max", "min" } do
  add(name, "dim 2", function(x) return ds[name](x, 2) end, function() return { N(3, 4) } end)
  add(name, "dim 1 keepdim, non-contiguous", function(x) return ds[name](x, 1, true) end, function() return { NC(N(4, 3)) } end)
end
for _, name in ipairs { "softmax", "log_softmax" } do
  add(name, "dim -1", call(name, { dim = -1 }), function() return { N(3, 4) } end)
  add(name, "dim 1, non-contiguous", call(name, { dim = 1 }), function() return { NC(N(2, 4, 3)) } end)
end
add("cumsum", "dim 2", call("cumsum", { dim = 2 }), function() return { N(3, 4) } end)
add("cumsum", "reverse, non-contiguous", call("cumsum", { dim = 1, reverse = true }), function() return { NC(N(4, 3)) } end)

add("sort", "dim 2 descending", call("sort", { dim = 2, descending = true }), function() return { N(3, 4) } end)
add("sort", "dim 1, non-contiguous", call("sort", { dim = 1 }), function() return { NC(N(4, 3)) } end)
add("cumprod", "dim 2", call("cumprod", { dim = 2 }), function() return { A(3, 4) } end)
add("cumprod", "dim 1, non-contiguous", call("cumprod", { dim = 1 }), function() return { NC(A(4, 3)) } end)

add("cat", "dim 2", function(a, b) return ds.cat({ a, b }, 2) end, function() return { N(2, 3), NC(N(2, 2)) } end)
add("cat", "dim 1", function(a, b, c) return ds.cat({ a, b, c }, 1) end, function() return { N(1, 3), N(2, 3), N(1, 3) } end)
add("gather", "dim 2", function(x, i) return ds.gather(x, 2, i) end, function() return { N(3, 4), I { { 1, 4 }, { 2, 2 }, { 3, 1 } } } end)
add("gather", "dim 1, non-contiguous", function(x, i) return ds.gather(x, 1, i) end, function() return { NC(N(4, 3)), I { { 1, 2, 3 } } } end)
add("scatter_add", "dim 2", function(x, i, s) return ds.scatter_add(x, 2, i, s) end,
  function() return { N(3, 4), I { { 1, 4 }, { 2, 2 }, { 3, 1 } }, N(3, 2) } end)
add("scatter_add", "src larger than index", function(x, i, s) return ds.scatter_add(x, 1, i, s) end,
  function() return { N(3, 4), I { { 1, 3, 2 } }, N(2, 4) } end)
for _, reduce in ipairs({ "sum", "prod", "amax", "amin" }) do
  add("scatter_reduce", reduce .. ", duplicates, src larger than index",
    function(x, i, s) return ds.scatter_reduce(x, 2, i, s, reduce) end,
    function() return { N(3, 4), I { { 1, 4 }, { 2, 2 }, { 3, 1 } }, N(3, 3) } end)
end
add("index_select", "dim 1", function(x, i) return ds.index_select(x, 1, i) end, function() return { N(4, 3), I { 1, 3, 3 } } end)
add("index_select", "dim 2, non-contiguous", function(x, i) return ds.index_select(x, 2, i) end, function() return { NC(N(4, 3)), I { 2, 2 } } end)
add("index_add", "dim 1", function(x, i, s) return ds.index_add(x, 1, i, s) end, function() return { N(4, 3), I { 1, 3, 3 }, N(3, 3) } end)
add("embedding", "repeated ids", function(ids, w) return ds.embedding(ids, w) end, function() return { I { { 1, 3 }, { 3, 4 } }, N(5, 3) } end)
-- the padding row is excluded from the gradient on purpose (as in PyTorch), so the ids avoid it here
add("embedding", "padding_idx", function(ids, w) return ds.embedding(ids, w, 2) end, function() return { I { 1, 3, 3, 5 }, N(5, 3) } end)

local conv = { stride = { 2, 1 }, padding = { 1, 1 }, dilation = { 1, 1 }, groups = 2 }
local conv_d = { stride = { 1, 1 }, padding = { 0, 2 }, dilation = { 2, 1 }, groups = 1 }
add("conv2d", "stride, padding, groups", function(x, w, b) return ds.conv2d(x, w, b, conv) end,
  function() return { N(2, 4, 5, 5), N(6, 2, 3, 3), N(6) } end)
add("conv2d", "dilation, non-contiguous input", function(x, w, b) return ds.conv2d(x, w, b, conv_d) end,
  function() return { NC(N(1, 2, 6, 5)), N(3, 2, 2, 3), N(3) } end)
local function with(t, k, v) local o = {}; for a, b in pairs(t) do o[a] = b end; o[k] = v; return o end
add("conv2d_backward_input", "groups", call("conv2d_backward_input", with(conv, "input_size", { 5, 5 })),
  function() return { N(2, 6, 3, 5), N(6, 2, 3, 3) } end)
add("conv2d_backward_weight", "groups", call("conv2d_backward_weight", with(conv, "kernel_size", { 3, 3 })),
  function() return { N(2, 6, 3, 5), N(2, 4, 5, 5) } end)
add("conv2d_backward_bias", "(2,3,4,4)", call("conv2d_backward_bias"), function() return { N(2, 3, 4, 4) } end)
add("max_pool2d", "kernel 2", function(x) return ds.max_pool2d(x, 2) end, function() return { N(2, 2, 4, 5) } end)
add("max_pool2d", "kernel 3, stride 2, padding 1, non-contiguous", function(x) return ds.max_pool2d(x, 3, { stride = 2, padding = 1 }) end,
  function() return { NC(N(1, 2, 5, 6)) } end)
add("avg_pool2d", "kernel 2", function(x) return ds.avg_pool2d(x, 2) end, function() return { N(2, 2, 4, 5) } end)
add("avg_pool2d", "padding, count_include_pad = false", function(x) return ds.avg_pool2d(x, 3, { stride = 2, padding = 1, count_include_pad = false }) end,
  function() return { NC(N(1, 2, 5, 6)) } end)
add("avg_pool2d_backward", "padding", call("avg_pool2d_backward", { kernel_size = { 3, 3 }, stride = { 2, 2 }, padding = { 1, 1 }, input_size = { 5, 6 } }),
  function() return { N(1, 2, 3, 3) } end)
add("layer_norm", "last dim", function(x, w, b) return ds.layer_norm(x, 4, w, b) end, function() return { N(3, 4), N(4), N(4) } end)
add("layer_norm", "last two dims, non-contiguous", function(x, w, b) return ds.layer_norm(x, { 3, 2 }, w, b, 1e-3) end,
  function() return { NC(N(2, 3, 2)), N(3, 2), N(3, 2) } end)

-- ops whose backward rule refuses on purpose (the message says why)
local refuses = {
  max_pool2d_backward = { "second-order", function() local x = N(1, 1, 4, 4); return ds.max_pool2d(x, 2), x end },
  segment_attention = { "no gradient", function()
    local x, s = N(3, 1, 2), I { { 1, 3 } }
    return ds.segment_attention(x, x, x, s, s), x
  end },
}

-- an op's own def.sample (inputs, attrs, fn) when the op defines one
local function from_sample(def)
  local inputs, _, fn = def.sample()
  for i, x in ipairs(inputs) do
    if ds.is_tensor(x) and (x.dtype == "f32" or x.dtype == "f64") then inputs[i] = leaf(x:astype("f64")) end
  end
  return fn, inputs
end

describe("gradcheck covers every differentiable op of the table", function()
  it("each op with a backward rule has a case, a sample, or a documented refusal", function()
    local missing = {}
    for _, def in ipairs(D.list) do
      if def.backward and not cases[def.name] and not refuses[def.name] and not def.sample then missing[#missing + 1] = def.name end
    end
    assert(#missing == 0, "no gradcheck case for: " .. table.concat(missing, ", "))
  end)

  for _, def in ipairs(D.list) do
    if def.backward and cases[def.name] then
      for _, c in ipairs(cases[def.name]) do
        it(def.name .. ": " .. c[1], function()
          ds.manual_seed(7)
          assert.is_true(gradcheck(c[2], c[3]()))
        end)
      end
    elseif def.backward and refuses[def.name] then
      it(def.name .. ": its backward refuses clearly", function()
        local y, x = refuses[def.name][2]()
        H.raises(function()   -- the first or the second derivative refuses
          local g = ds.grad((y * y):sum(), x, { create_graph = true })[1]
          g:sum():backward()
        end, def.name, refuses[def.name][1])
      end)
    elseif def.backward and def.sample then
      it(def.name .. ": its sample", function()
        local fn, inputs = from_sample(def)
        assert.is_true(gradcheck(fn, inputs))
      end)
    end
  end
end)

describe("second derivatives (ds.grad with create_graph) match finite differences", function()
  local second = {
    { "mul", function(a, b) return a * b * a end, function() return { N(3, 4), N(4) } end },
    { "div", function(a, b) return a / b end, function() return { N(3, 2), A(3, 2) } end },
    { "exp", ds.exp, function() return { N(3, 4) } end },
    { "log", ds.log, function() return { P(3, 4) } end },
    { "tanh", ds.tanh, function() return { N(3, 4) } end },
    { "sigmoid", ds.sigmoid, function() return { N(3, 4) } end },
    { "gelu", ds.gelu, function() return { N(3, 4) } end },
    { "sin", ds.sin, function() return { N(3, 4) } end },
    { "pow", function(a, b) return ds.pow(a, b) end, function() return { P(3), N(3) } end },
    { "sqrt", ds.sqrt, function() return { P(3, 2) } end },
    { "matmul", ds.matmul, function() return { N(3, 4), N(4, 2) } end },
    { "softmax", function(x) return ds.softmax(x, -1) end, function() return { N(3, 4) } end },
    { "log_softmax", function(x) return ds.log_softmax(x, -1) end, function() return { N(3, 4) } end },
    { "logsumexp", function(x) return ds.logsumexp(x, 2) end, function() return { N(3, 4) } end },
    { "sum and mean", function(x) return (x * x):sum(2) + (x * x):mean() end, function() return { N(3, 4) } end },
    { "var", function(x) return ds.var(x, 1) end, function() return { N(4, 3) } end },
    { "where and maximum", function(a, b) return ds.maximum(a * a, b) * ds.where(a:gt(0), a, b) end, function() return { N(3, 4), N(3, 4) } end },
    { "views", function(x) return (x:transpose(1, 2):reshape(6) * x:reshape(6)):narrow(1, 2, 4) end, function() return { NC(N(3, 2)) } end },
    { "gather and cat", function(x) return ds.cat({ ds.gather(x * x, 2, I { { 2 }, { 1 } }), x }, 2) end, function() return { N(2, 3) } end },
    { "conv2d", function(x, w) return ds.conv2d(x * x, w, nil, { padding = 1 }) end, function() return { N(1, 2, 4, 4), N(2, 2, 3, 3) } end },
    { "avg_pool2d", function(x) return ds.avg_pool2d(x * x, 2) end, function() return { N(1, 1, 4, 4) } end },
    { "layer_norm", function(x, w) return ds.layer_norm(x * x, { 2, 3 }, w) end, function() return { N(2, 2, 3), N(2, 3) } end },
    { "cross_entropy", function(x) return ds.F.cross_entropy(x, I { 2, 1, 3 }) end, function() return { N(3, 4) } end },
  }
  for _, c in ipairs(second) do
    it(c[1], function()
      ds.manual_seed(11)
      assert.is_true(gradgradcheck(c[2], c[3]()))
    end)
  end
end)

describe("gradcheck itself", function()
  it("reports a wrong backward rule with the input and element", function()
    local def = D.define {
      name = "gradcheck_test_wrong_square", kind = "unary", kernel = "ds_mul_%s", dtypes = { f64 = true }, ninputs = 1,
      promote = function(inputs) return { inputs[1], inputs[1] } end,
      infer = function(inputs) return { shape = inputs[1]._shape, dtype = inputs[1].dtype } end,
      backward = function(ctx, g) return g * ctx.inputs[1] end, -- should be 2 * g * x
    }
    local ok, msg = gradcheck(function(x) return (D.call(def, { x })) end, { N(3) }, { raise = false })
    D.list[#D.list] = nil
    D.by_name[def.name] = nil
    assert.is_false(ok)
    assert.truthy(msg:find("input 1 (3), element 1: analytic", 1, true))
  end)
  it("needs an input that requires grad", function()
    H.raises(function() gradcheck(ds.exp, { ds.zeros(2, { dtype = "f64" }) }) end, "gradcheck", "no input requires grad")
  end)
  it("nn layers pass gradcheck in f64", function()
    ds.manual_seed(3)
    local layer = ds.nn.TransformerEncoderLayer(4, 2, { dim_feedforward = 6, dropout = 0, batch_first = true }):double()
    assert.is_true(gradcheck(function(x) return layer(x) end, { N(2, 3, 4) }))
    local mha = ds.nn.MultiheadAttention(4, 2, { batch_first = true }):double()
    local mask = ds.tensor({ { false, false, true }, { false, false, false } })
    assert.is_true(gradcheck(function(q, k) return (mha(q, k, k, { key_padding_mask = mask })) end, { N(2, 2, 4), N(2, 3, 4) }))
  end)
end)

describe("autograd tape (issue 3, item 1)", function()
  it("accumulates .grad over backward calls", function()
    local x = ds.tensor({ 1, 2, 3 }):requires_grad_()
    local y = (x * x):sum()
    y:backward()
    assert.same({ 2, 4, 6 }, x.grad:totable())
    ;(x * 3):sum():backward()
    assert.same({ 5, 7, 9 }, x.grad:totable())
    assert.is_true(x.is_leaf)
    assert.is_false(y.is_leaf)
  end)
  it("backward of a non-scalar needs a gradient argument", function()
    local x = ds.tensor({ { 1, 2 }, { 3, 4 } }):requires_grad_()
    local y = x * 2
    H.raises(function() y:backward() end, "backward", "(2,2)", "scalar")
    y:backward(ds.tensor({ { 1, 0 }, { 0, 1 } }))
    assert.same({ { 2, 0 }, { 0, 2 } }, x.grad:totable())
  end)
  it("detach shares storage and cuts the tape", function()
    local x = ds.tensor({ 1, 2 }):requires_grad_()
    local d = (x * 2):detach()
    assert.is_false(d.requires_grad)
    local z = (x * d):sum()
    z:backward()
    assert.same({ 2, 4 }, x.grad:totable())
    local v = x:detach()
    ds.no_grad(function() v:fill_(7) end)
    assert.same({ 7, 7 }, x:totable())
  end)
  it("no_grad records nothing and returns fn's results", function()
    local x = ds.tensor({ 1, 2 }):requires_grad_()
    local a, b = ds.no_grad(function() return x * 2, 5 end)
    assert.is_false(a.requires_grad)
    assert.equal(5, b)
    assert.is_true(ds.is_grad_enabled())
  end)
  it("ds.grad returns a list and differentiates again with create_graph", function()
    local x = ds.tensor({ 2, 3 }, { dtype = "f64" }):requires_grad_()
    local y = (x * x * x):sum()
    local g1 = ds.grad(y, { x }, { create_graph = true })
    assert.same({ 12, 27 }, g1[1]:totable())            -- 3x^2
    local g2 = ds.grad(g1[1]:sum(), { x }, { create_graph = true })
    assert.same({ 12, 18 }, g2[1]:totable())            -- 6x
    local g3 = ds.grad(g2[1]:sum(), { x })
    assert.same({ 6, 6 }, g3[1]:totable())              -- 6
    assert.is_nil(x.grad)
  end)
  it("ds.grad names unused inputs unless allow_unused, which gives nil for them (PyTorch's None)", function()
    local x, z = ds.ones(2):requires_grad_(), ds.ones(2):requires_grad_()
    local y = (x * 2):sum()
    H.raises(function() ds.grad(y, { x, z }, { retain_graph = true }) end, "grad", "input 2", "allow_unused")
    assert.is_nil(ds.grad(y, { x, z }, { allow_unused = true })[2])
  end)
  it("says clearly when a value is not differentiable", function()
    H.raises(function() ds.tensor({ 1, 2 }, { dtype = "i64" }):requires_grad_() end, "requires_grad_", "floating point", "i64")
    local x = ds.tensor({ 1, 3, 2 }):requires_grad_()
    local idx = x:argmax()
    assert.equal("i64", idx.dtype)
    assert.is_false(idx.requires_grad)
    H.raises(function() idx:astype("f32"):backward() end, "backward", "does not require grad")
    H.raises(function() x:add_(1) end, "add_", "leaf")
  end)
end)
