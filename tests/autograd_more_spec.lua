-- tests/autograd_more_spec.lua: autograd as PyTorch ports write it, against PyTorch 1.13's answers
-- (tests/fixtures/autograd_more.json from tests/gen_autograd_more_fixtures.py): ds.autograd.functional, a custom
-- ds.autograd.Function, tensor and module hooks, in-place writes under autograd (PyTorch's raise-or-allow verdict
-- and its gradients) and version counters, retain_graph, backward's inputs, double backward.
local ds = require("ds")
local H = require("helpers")

local fx = H.fixture("autograd_more.json")
local AF = ds.autograd.functional
local TOL = 1e-10

local function T(t) return ds.tensor(t, { dtype = "f64" }) end
local function check(got, e, what)
  assert(ds.is_tensor(got), (what or "value") .. " is not a tensor")
  assert.same(e.shape, got.shape, what)
  H.close(got, e.data, TOL, TOL)
end
local function checkl(got, es, what)
  assert.equal(#es, #got, what)
  for i, e in ipairs(es) do check(got[i], e, (what or "") .. " " .. i) end
end

local f_sin = function(x) return x:sin() * x end
local f_mm = function(a, b) return (a:matmul(b)):tanh() end
local f_multi = function(x) return { x * 2, (x * x):sum() } end
local f_scalar = function(x) return (x:exp() * x:sum()):sum() end
local f_scalar2 = function(a, b) return (a * b:t()):sum() + (a ^ 2):sum() * b:sum() end
local f_lin = function(x) return (x * 3):sum() end

describe("ds.autograd.functional as torch.autograd.functional", function()
  local x, a, b, v3 = T(fx.x3), T(fx.a23), T(fx.b32), T(fx.v3)
  it("jacobian: one input, a list of inputs, a list of outputs", function()
    check(AF.jacobian(f_sin, x), fx.jacobian_sin)
    checkl(AF.jacobian(f_mm, { a, b }), fx.jacobian_mm, "mm")
    checkl(AF.jacobian(f_multi, x), fx.jacobian_multi, "multi")
  end)
  it("hessian: one input, a list of inputs (a list of lists), a linear function (zeros)", function()
    check(AF.hessian(f_scalar, x), fx.hessian_scalar)
    local h = AF.hessian(f_scalar2, { a, b })
    for i = 1, 2 do checkl(h[i], fx.hessian_scalar2[i], "row " .. i) end
    check(AF.hessian(f_lin, x), fx.hessian_lin)
  end)
  it("vjp, jvp, vhp, hvp return the function's output and the product", function()
    local o, g = AF.vjp(f_sin, x, v3)
    check(o, fx.vjp_sin.out); check(g, fx.vjp_sin.vjp)
    o, g = AF.vjp(f_mm, { a, b }, T(fx.vjp_mm.v))
    check(o, fx.vjp_mm.out); checkl(g, fx.vjp_mm.vjp)
    o, g = AF.jvp(f_sin, x, v3)
    check(o, fx.jvp_sin.out); check(g, fx.jvp_sin.jvp)
    o, g = AF.jvp(f_mm, { a, b }, { a * 0 + 0.5, b * 0 - 1 })
    check(o, fx.jvp_mm.out); check(g, fx.jvp_mm.jvp)
    o, g = AF.vhp(f_scalar, x, v3)
    check(o, fx.vhp_scalar.out); check(g, fx.vhp_scalar.vhp)
    o, g = AF.hvp(f_scalar, x, v3)
    check(o, fx.hvp_scalar.out); check(g, fx.hvp_scalar.hvp)
    o, g = AF.hvp(f_scalar2, { a, b }, { a * 0 + 1, b * 0 + 2 })
    check(o, fx.hvp_scalar2.out); checkl(g, fx.hvp_scalar2.hvp)
  end)
  it("strict raises for an output independent of an input; otherwise zeros", function()
    assert.is_true(fx.strict_raises)
    H.raises(function() AF.jacobian(function(p) return p * 2 end, { x, T({ 1 }) }, { strict = true }) end,
      "jacobian", "independent of input 2")
    check(AF.jacobian(function(p) return p * 2 end, { x, T({ 1 }) })[2], fx.nonstrict_zero)
  end)
  it("create_graph keeps the result differentiable; vectorize and unknown options are refused", function()
    local p = T(fx.x3):requires_grad_()
    local _, g = AF.vjp(function(q) return q * q * q end, p, v3, { create_graph = true })
    assert.is_true(g.requires_grad)
    local gg = ds.grad(g:sum(), { p })[1]
    H.close(gg, (p:detach() * 6 * v3), TOL, TOL)
    local _, g2 = AF.vjp(function(q) return q * q end, p, v3)
    assert.is_false(g2.requires_grad)
    H.raises(function() AF.jacobian(f_sin, x, { vectorize = true }) end, "jacobian", "vectorize")
    H.raises(function() AF.jacobian(f_sin, x, { strategy = "forward-mode" }) end, "jacobian", "forward-mode")
    H.raises(function() AF.vjp(f_sin, x, v3, { vectorise = true }) end, "vjp", "vectorise")
    H.raises(function() AF.vjp(f_sin, x) end, "vjp", "v can be omitted only")
    H.raises(function() AF.hessian(f_sin, x) end, "hessian", "single element")
  end)
end)

describe("ds.autograd.Function as torch.autograd.Function", function()
  local MulSum = ds.autograd.Function:extend("MulSum")
  local needs
  function MulSum.forward(ctx, x, w, scale, flag)
    assert.is_true(flag)
    ctx:save_for_backward(x, w)
    ctx.scale = scale
    return x * w * scale, (x + w):sum()
  end
  function MulSum.backward(ctx, gy, gz)
    local x, w = unpack(ctx.saved_tensors)
    needs = ctx.needs_input_grad
    return gy * w * ctx.scale + gz, gy * x * ctx.scale + gz, nil, nil
  end

  it("gives the user's gradients for several outputs and non-tensor arguments (MyFn.apply and MyFn:apply)", function()
    local c = fx.custom
    for _, call in ipairs { function(...) return MulSum.apply(...) end, function(...) return MulSum:apply(...) end } do
      local x, w = T(fx.x3):requires_grad_(), T(fx.v3):requires_grad_()
      local y, z = call(x, w, 2.5, true)
      ;((y * T(c.c)):sum() + z * 2):backward()
      check(y, c.y); check(z, c.z); check(x.grad, c.gx); check(w.grad, c.gw)
      assert.same(fx.custom_needs_input_grad, { needs[1], needs[2], needs[3], needs[4] })
    end
  end)
  it("uses backward as written (a straight-through estimator) and set_materialize_grads(false)", function()
    local ST = ds.autograd.Function:extend("STRound")
    function ST.forward(_, x) return x:round() end
    function ST.backward(_, g) return g end
    local x = T(fx.x3):requires_grad_()
    ;(ST.apply(x) * T(fx.custom.c)):sum():backward()
    check(x.grad, fx.custom_st.gx)
    local Lazy = ds.autograd.Function:extend("Lazy")
    local gb_none
    function Lazy.forward(ctx, p)
      ctx:set_materialize_grads(false)
      return p * 2, p * 3
    end
    function Lazy.backward(_, ga, gb)
      gb_none = gb == nil
      return gb and ga * 2 + gb * 3 or ga * 2
    end
    local p = T(fx.x3):requires_grad_()
    local ya = Lazy.apply(p)
    ya:sum():backward()
    assert.equal(fx.custom_lazy_gb_is_none, gb_none)
    check(p.grad, fx.custom_lazy.gx)
  end)
  it("marks outputs non-differentiable, checks backward's results, and catches a saved tensor written since", function()
    local Arg = ds.autograd.Function:extend("Arg")
    function Arg.forward(ctx, x)
      local i = x:argmax()
      local m = x:max()
      ctx:mark_non_differentiable(m)
      return i, m, x * 2
    end
    function Arg.backward(_, gi, gm, gx)
      assert.equal(0, gi:abs():sum():item() + gm:abs():sum():item()) -- materialized zeros, as PyTorch's
      return gx * 2
    end
    local x = T(fx.x3):requires_grad_()
    local i, m, y = Arg.apply(x)
    assert.is_false(i.requires_grad); assert.is_false(m.requires_grad); assert.is_true(y.requires_grad)
    y:sum():backward()
    H.close(x.grad, { 2, 2, 2 }, 0, 0)
    local Bad = ds.autograd.Function:extend("Bad")
    function Bad.forward(_, p) return p * 1 end
    function Bad.backward(_, g) return g, g end
    H.raises(function() Bad.apply(T(fx.x3):requires_grad_()):sum():backward() end, "Bad",
      "incorrect number of gradients",
      "expected 1, got 2")
    local Shape = ds.autograd.Function:extend("Shape")
    function Shape.forward(_, p) return p * 1 end
    function Shape.backward(_, g) return g:sum() end
    H.raises(function() Shape.apply(T(fx.x3):requires_grad_()):sum():backward() end, "Shape", "invalid gradient")
    local Saver = ds.autograd.Function:extend("Saver")
    function Saver.forward(ctx, p, q) ctx:save_for_backward(q); return p * q end
    function Saver.backward(ctx, g) local q = unpack(ctx.saved_tensors); return g * q, nil end
    local q = T(fx.v3)
    local r = Saver.apply(T(fx.x3):requires_grad_(), q)
    q:add_(1)
    H.raises(function() r:sum():backward() end, "Saver", "modified by an inplace operation",
      "version 1; expected version 0")
    H.raises(function() ds.autograd.Function.apply(x) end, "extend Function first")
    local r2 = Saver.apply(T(fx.x3):requires_grad_(), T(fx.v3))
    r2:sum():backward({ retain_graph = true })
    r2:sum():backward() -- saved tensors kept by retain_graph
    H.raises(function() r2:sum():backward() end, "second time", "retain_graph")
    local Listy = ds.autograd.Function:extend("Listy")
    function Listy.forward(_, p) return { p * 1, p * 2 } end
    H.raises(function() Listy.apply(T(fx.x3):requires_grad_()) end, "Listy", "several values")
  end)
  it("traces: a compiled training step uses the user's backward", function()
    local ST = ds.autograd.Function:extend("STRound")
    function ST.forward(_, p) return p:round() end
    function ST.backward(_, g) return g * 3 end
    local w = T(fx.x3):requires_grad_()
    local function step(c)
      local l = (ST.apply(w) * c):sum()
      return ds.grad(l, { w })[1]
    end
    local cf = ds.compile(step, { ds.spec({ 3 }, "f64", "c") })
    local c = T(fx.custom.c)
    H.close(cf(c), (c * 3), 0, 0)
    H.close(step(c), (c * 3), 0, 0)
  end)
end)

describe("hooks", function()
  it("tensor hooks modify gradients as PyTorch's", function()
    local x = T(fx.x3):requires_grad_()
    local y = x * x
    y:register_hook(function(g) return g * 3 end)
    x:register_hook(function(g) return g + 1 end)
    ;(y * T(fx.custom.c)):sum():backward()
    check(x.grad, fx.tensor_hooks.gx)
  end)
  it("module full backward hooks (and the pre-hook) see and replace grad_input / grad_output", function()
    local e = fx.module_hooks
    local lin = ds.nn.Linear(3, 2, { dtype = "f64" })
    ds.no_grad(function() lin.weight:copy_(T(fx.a23)); lin.bias:copy_(T(fx.v2)) end)
    local seen = {}
    local hp = lin:register_full_backward_pre_hook(function(_, gout)
      seen.pre = gout[1]; return { gout[1] * 2 }
    end)
    lin:register_full_backward_hook(function(m, gin, gout)
      assert.equal(lin, m)
      seen.gin, seen.gout = gin[1], gout[1]
      return { gin[1] * 10 }
    end)
    local x = T(e.x):requires_grad_()
    ;(lin(x) * T(e.c)):sum():backward()
    check(seen.pre, e.pre_gout); check(seen.gout, e.gout); check(seen.gin, e.gin)
    check(x.grad, e.gx); check(lin.weight.grad, e.gw); check(lin.bias.grad, e.gb)
    hp.remove()
    lin:zero_grad()
    local x2 = T(e.x):requires_grad_()
    ;(lin(x2) * T(e.c)):sum():backward()
    check(seen.gout, { shape = e.pre_gout.shape, data = e.pre_gout.data }) -- without the pre-hook
  end)
  it("a backward pre-hook is part of a compiled training step", function()
    local lin = ds.nn.Linear(3, 2, { dtype = "f64" })
    lin:register_full_backward_pre_hook(function(_, gout) return { gout[1] * 2 } end)
    local function step(x) return ds.grad((lin(x) * x:narrow(2, 1, 2)):sum(), { lin.weight })[1] end
    local x = T({ { 1, 2, 3 }, { -1, 0.5, 2 } })
    local want = step(x)
    H.close(want, { 4, 3, 2, 3, 8.5, 14 }, 0, 0) -- 2 * sum_n c[n, o] x[n, i]
    H.close(ds.compile(step, { ds.spec({ 2, 3 }, "f64", "x") })(x), want, 0, 0)
  end)
  it("forward hooks replace input and output; with_kwargs is refused", function()
    local lin = ds.nn.Linear(3, 2, { dtype = "f64" })
    ds.no_grad(function() lin.weight:copy_(T(fx.a23)); lin.bias:copy_(T(fx.v2)) end)
    lin:register_forward_pre_hook(function(_, args) return { args[1] + 1 } end)
    lin:register_forward_hook(function(_, _, o) return o * 2 end)
    check(lin(T({ { 1, 2, 3 } })), fx.forward_hooks)
    H.raises(function() lin:register_forward_hook(print, { with_kwargs = true }) end, "with_kwargs")
    H.raises(function() lin:register_forward_hook(print, { bogus = true }) end, "bogus")
  end)
end)

-- the in-place cases of the fixture, written as in the generator (x: a leaf (3) requiring grad); each returns the
-- grads to compare
local W = function(t) return T(t) end
local CASES = {
  mul_saved_input = function(x) local a = x * 2; local b = a * a; a:add_(1); b:sum():backward(); return { x.grad } end,
  add_no_save = function(x)
    local a = x * 2; local c = a + 1; a:add_(1); (c * c:detach()):sum():backward(); return { x.grad }
  end,
  relu_result_modified = function(x) local c = (x * 2):relu(); c:mul_(2); c:sum():backward(); return { x.grad } end,
  relu_input_modified = function(x)
    local a = x * 2; local c = a:relu(); a:mul_(-1); (c * W { 1, 2, 3 }):sum():backward(); return { x.grad }
  end,
  relu_inplace = function(x) local h = x * 2; h:relu_(); (h * h):sum():backward(); return { x.grad } end,
  mul_inplace_chain = function(x)
    local h = x * 1; h:mul_(x); h:add_(3); h:div_(2); (h * W { 1, 2, 3 }):sum():backward(); return { x.grad }
  end,
  view_inplace = function(x)
    local h = (x * 1):reshape(1, 3):expand(2, 3):contiguous()
    h[1]:mul_(3)
    ;(h * W { { 1, 2, 3 }, { 4, 5, 6 } }):sum():backward(); return { x.grad }
  end,
  view_inplace_then_read_old_view = function(x)
    local h = x * 1; local v = h:narrow(1, 2, 2); h:mul_(2); (v * W { 1, 2 }):sum():backward(); return { x.grad }
  end,
  sigmoid_out_modified = function(x) local s = (x * 1):sigmoid(); s:add_(1); s:sum():backward(); return { x.grad } end,
  exp_input_zeroed = function(x)
    local a = x * 1; local e = a:exp(); a:zero_(); e:sum():backward(); return { x.grad }
  end,
  setitem_view_twice = function(x)
    local w = T({ 3, 4 }):requires_grad_()
    local h = x * 2; local v = h:narrow(1, 1, 2)
    v[ds.tensor({ 2 }, { dtype = "i64" })] = w[1] * w[2]
    v[v:lt(0)] = 0
    ;(h * W { 1, 2, 3 }):sum():backward(); return { x.grad, w.grad, h }
  end,
  view_written_then_read = function(x)
    local h = x * 2; local v = h:narrow(1, 1, 2); v:mul_(3); v:copy_(ds.where(v:lt(0), W { 0 }, v))
    ;(h * W { 1, 2, 3 }):sum():backward(); return { x.grad, h }
  end,
  zero_then_grad = function(x)
    local h = x * 2; h:zero_(); return { ds.grad((h + x):sum(), { x })[1], T({ h.requires_grad and 1 or 0 }) }
  end,
  leaf_inplace = function(x) x:add_(1); return { x } end,
  view_of_leaf_inplace = function(x) x[1]:mul_(2); return { x } end,
  nograd_write_saved = function(x)
    local y = ds.ones(3, { dtype = "f64" }); local b = x * y
    ds.no_grad(function() y:add_(1) end)
    b:sum():backward(); return { x.grad }
  end,
  nograd_write_unsaved = function(x)
    local y = ds.ones(3, { dtype = "f64" }); local b = x + y
    ds.no_grad(function() y:add_(1) end)
    b:sum():backward(); return { x.grad }
  end,
  plain_written_with_grad_input = function(x)
    local z = ds.zeros(3, { dtype = "f64" }); z:add_(x * 2); z:mul_(x); z:sum():backward(); return { x.grad }
  end,
  matmul_weight_modified = function(x)
    local Wt = ds.ones(3, 2, { dtype = "f64" }); local y = x:reshape(1, 3):matmul(Wt)
    ds.no_grad(function() Wt:mul_(2) end)
    y:sum():backward(); return { x.grad }
  end,
  div_denominator_modified = function(x)
    local a = x * 1 + 2; local q = x / a; a:add_(1); q:sum():backward(); return { x.grad }
  end,
  setitem_after_use = function(x) local y = x * 2; local z = y * y; y[1] = 0; z:sum():backward(); return { x.grad } end,
  setitem_unsaved = function(x)
    local y = x * 2; local z = y + 1; y[1] = 0; (z + y):sum():backward(); return { x.grad }
  end,
}

describe("in-place writes under autograd (PyTorch's verdict and gradients)", function()
  it("covers every case of the fixture", function()
    for name in pairs(fx.inplace) do assert(CASES[name], "no ds case for " .. name) end
  end)
  for name, f in pairs(CASES) do
    it(name, function()
      local e = assert(fx.inplace[name], "no fixture for " .. name)
      local x = T(fx.x3):requires_grad_()
      local ok, res = pcall(f, x)
      if e.raises then
        assert(not ok, name .. ": PyTorch raises (" .. e.message .. "), ds allowed it")
        local msg = tostring(res)
        assert(msg:find("modified by an inplace operation", 1, true) or msg:find("leaf Variable", 1, true),
          name .. ": " .. msg)
      else
        assert(ok, name .. ": PyTorch allows it, ds raised " .. tostring(res))
        checkl(res, e.grads, name)
      end
    end)
  end
  it("raises PyTorch's message with the versions", function()
    H.raises(function() CASES.mul_saved_input(T(fx.x3):requires_grad_()) end,
      "backward: one of the variables needed for gradient computation has been modified by an inplace operation",
      "input 1 of mul", "is at version 1; expected version 0")
  end)
  it("version counters: every in-place write counts, shared by views; new tensors start at 0", function()
    local t = ds.zeros(3)
    local vs = { t._version }
    t:add_(1); vs[#vs + 1] = t._version
    t[1] = 5; vs[#vs + 1] = t._version
    local v = t:narrow(1, 2, 2)
    v:mul_(2); vs[#vs + 1] = t._version; vs[#vs + 1] = v._version
    t:zero_(); vs[#vs + 1] = v._version
    local u = t + 1; vs[#vs + 1] = u._version
    assert.same(fx.versions, vs)
  end)
  it("in-place ops on non-leaf tensors inside a module's forward train like the out-of-place forms", function()
    local function net(x, w, inplace)
      local h = x:matmul(w)
      -- (relu_ saves its result: a write after it would raise, as in PyTorch)
      if inplace then h:narrow(2, 1, 1):mul_(3); h:relu_() else
        h = ds.cat({ h:narrow(2, 1, 1) * 3, h:narrow(2, 2, 1) }, 2):relu()
      end
      return (h * h):sum()
    end
    local x = T({ { 1, -2 }, { 0.5, 3 } })
    local w1, w2 = T({ { 0.3, -1 }, { 0.7, 0.2 } }):requires_grad_(), T({ { 0.3, -1 }, { 0.7, 0.2 } }):requires_grad_()
    net(x, w1, true):backward()
    net(x, w2, false):backward()
    H.close(w1.grad, w2.grad, 1e-12, 1e-12)
  end)
  it("in-place writes trace and compile, with their gradient", function()
    local w = T(fx.x3):requires_grad_()
    local function step(c)
      local h = w * 2
      h:mul_(c)
      h:relu_()
      return ds.grad(h:sum(), { w })[1]
    end
    local c = T({ 1, 2, 0.5 })
    local want = step(c)
    H.close(want, { 2, 0, 1 }, 0, 0) -- h = x3 * 2 * c = (1, -5, 2)
    H.close(ds.compile(step, { ds.spec({ 3 }, "f64", "c") })(c), want, 0, 0)
  end)
  it("a write into a narrow of a tensor in a graph traces and compiles (other views are refused traced)", function()
    local w = T({ { 1, -2 }, { 3, 4 } }):requires_grad_()
    local function step(c)
      local h = w * c
      h:narrow(2, 1, 1):mul_(3)
      h:relu_()
      return ds.grad((h * h):sum(), { w })[1]
    end
    local c = T({ { 1, 2 }, { 0.5, -1 } })
    local want = step(c)
    H.close(want, { 18, 0, 13.5, 0 }, 0, 0) -- h = (3, 0; 4.5, 0): 2 h * 3 c in the first column
    local spec = { ds.spec({ 2, 2 }, "f64", "c") }
    H.close(ds.trace(step, spec)(c), want, 0, 0)
    H.close(ds.compile(step, spec)(c), want, 0, 0)
    H.raises(function() ds.trace(function(p) local h = w * p; h[1]:mul_(2); return h end, spec) end, "mul_",
      "other than a narrow")
  end)
end)

describe("backward's options", function()
  it("a second backward without retain_graph raises; with it, grads accumulate as PyTorch's", function()
    local x = T(fx.x3):requires_grad_()
    local l = (x * x):sum()
    l:backward({ retain_graph = true })
    l:backward()
    check(x.grad, fx.retain_twice)
    H.raises(function() l:backward() end, "backward", "second time", "retain_graph")
  end)
  it("backward{inputs = ...} accumulates only into the given tensors", function()
    local a, b = T(fx.x3):requires_grad_(), T(fx.v3):requires_grad_()
    ;(a * b):sum():backward({ inputs = { a } })
    check(a.grad, fx.backward_inputs.ga)
    assert.equal(fx.backward_inputs.gb_is_none, b.grad == nil)
  end)
  it("ds.grad gives nil for an unused input with allow_unused; create_graph gives double backward", function()
    local x = T(fx.x3):requires_grad_()
    assert.is_nil(ds.grad((x * 2):sum(), { x, T({ 1 }):requires_grad_() }, { allow_unused = true })[2])
    local g = ds.grad((x ^ 3):sum(), { x }, { create_graph = true })[1]
    check(ds.grad((g * T(fx.v3)):sum(), { x })[1], fx.double_backward)
  end)
end)
