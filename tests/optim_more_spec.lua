-- tests/optim_more_spec.lua: RAdam, NAdam, Adamax, Adadelta and maximize on every optimizer against torch.optim
-- trajectories, eagerly and in a compiled train step; ConstantLR, PolynomialLR, MultiplicativeLR, CyclicLR,
-- ChainedScheduler and SequentialLR against torch's lr sequences (fixtures: tests/gen_optim_more_fixtures.py);
-- compiled steps following the new schedulers; state_dict round trips; refused options.
local ds = require("ds")
local H = require("helpers")

local fixtures = H.fixture("optim_more.json")
local S = ds.optim.lr_scheduler

local function T(e) return ds.tensor(e.data, { dtype = e.dtype }):reshape(e.shape) end

-- Tolerance. ds runs torch 1.13's single-tensor formulas in the same operation order, each operation rounded to
-- the dtype; torch's vectorized add(alpha) / addcmul / addcdiv fuse a multiply and an add (one rounding fewer)
-- on most elements, ds rounds both. The difference is a rounding of the operands' size at each step: measured
-- at most 2.3 ulps of a tensor's largest element (f32 and f64 alike) over 6-10 steps. An element near zero
-- after cancellation (exp_avg) has no relative accuracy in either, so the bound is normwise: |a - b| <= 8 ulps of
-- max|b| (8 * 2^-23 in f32, 8 * 2^-52 in f64). A wrong formula or hyper-parameter misses it by orders.
local EPS = { f32 = 2 ^ -23, f64 = 2 ^ -52 }
local function close_normwise(a, ref, what)
  local ta, tb = a:astype("f64"):reshape(-1):totable(), ref:astype("f64"):reshape(-1):totable()
  assert(#ta == #tb, what .. ": " .. #ta .. " elements, torch has " .. #tb)
  local m = 0
  for _, y in ipairs(tb) do m = math.max(m, math.abs(y)) end
  local tol = 8 * EPS[ref.dtype] * m
  for i = 1, #ta do
    if math.abs(ta[i] - tb[i]) > tol then
      error(string.format("%s element %d: %.9g, torch %.9g (tolerance %.3g)", what, i, ta[i], tb[i], tol), 2)
    end
  end
end

local function build(case)
  local params = {}
  for i, e in ipairs(case.params) do params[i] = T(e):requires_grad_() end
  local opts = {}
  for k, v in pairs(case.opts) do opts[k] = v end
  return params, ds.optim[case.class](params, opts)
end

local function check_state(opt, case)
  local st = opt:state_dict().state
  for idx, entries in pairs(case.final_state) do
    for k, e in pairs(entries) do
      local x = st[tonumber(idx)][k]
      assert(x, case.name .. ": state " .. k .. " of parameter " .. idx .. " missing")
      close_normwise(x, T(e), case.name .. " state " .. k)
    end
  end
end

-- a compiled step whose gradients are its inputs: d/dp sum(p * g) is g exactly
local function compiled_step(params, opt, case)
  local specs = {}
  for i, e in ipairs(case.params) do specs[i] = ds.spec(e.shape, e.dtype, "g" .. i) end
  return ds.compile(function(...)
    local gs = { ... }
    opt:zero_grad()
    local loss = (params[1] * gs[1]):sum()
    for i = 2, #params do loss = loss + (params[i] * gs[i]):sum() end
    loss:backward()
    opt:step()
    return loss
  end, specs)
end

describe("optimizers match torch.optim trajectories (RAdam, NAdam, Adamax, Adadelta, maximize)", function()
  for _, case in ipairs(fixtures.optimizers) do
    it(case.name .. ", eager and compiled", function()
      local params, opt = build(case)
      local cparams, copt = build(case)
      local step = compiled_step(cparams, copt, case)
      for s, grads in ipairs(case.grads) do
        local gs = {}
        for i, g in ipairs(grads) do gs[i] = T(g); params[i].grad = gs[i] end
        opt:step()
        step(unpack(gs))
        for i, p in ipairs(params) do
          close_normwise(p, T(case.steps[s][i]), string.format("%s step %d param %d", case.name, s, i))
          assert(H.bitwise(p, cparams[i]), string.format("%s step %d: compiled param %d differs from eager", case.name,
            s, i))
        end
      end
      check_state(opt, case)
      check_state(copt, case)
    end)
  end
end)

-- the same training run eagerly and compiled; change(opt, k) after step k changes hyper-parameters or steps a
-- scheduler: weights agree bitwise after every step
local function same_run(make_opt, change, steps)
  local function setup()
    ds.manual_seed(3)
    local model = ds.nn.Sequential(ds.nn.Linear(4, 8), ds.nn.Tanh(), ds.nn.Linear(8, 3))
    local opt = make_opt(model:parameters())
    return model, opt, change(opt)
  end
  local function train_step(model, opt)
    return function(x, y)
      opt:zero_grad()
      local loss = ds.F.cross_entropy(model(x), y)
      loss:backward()
      opt:step()
      return loss
    end
  end
  ds.manual_seed(5)
  local x, y = ds.randn(16, 4), ds.randint(1, 4, { 16 })
  local m1, o1, c1 = setup()
  local m2, o2, c2 = setup()
  local eager = train_step(m1, o1)
  local compiled = ds.compile(train_step(m2, o2), { ds.spec({ 16, 4 }, "f32", "x"), ds.spec({ 16 }, "i64", "y") })
  local start = m1[1].weight:clone()
  for k = 1, steps or 6 do
    assert(H.bitwise(eager(x, y), compiled(x, y)), "loss of step " .. k)
    c1(k); c2(k)
    for i, p in ipairs(m1:parameters()) do
      assert(H.bitwise(p, m2:parameters()[i]), "parameter " .. i .. ", step " .. k)
    end
  end
  assert.is_false(H.bitwise(start, m1[1].weight), "the run did not move the weights")
  return o1, o2
end

local NEW = {
  RAdam = function(ps) return ds.optim.RAdam(ps, { lr = 1e-2, betas = { 0.8, 0.9 } }) end,
  NAdam = function(ps) return ds.optim.NAdam(ps, { lr = 1e-2 }) end,
  Adamax = function(ps) return ds.optim.Adamax(ps, { lr = 1e-2 }) end,
  Adadelta = function(ps) return ds.optim.Adadelta(ps, { lr = 0.5 }) end,
}

describe("a compiled train step reads the new optimizers' hyper-parameters at every call", function()
  it("every hyper-parameter, maximize included, changed after tracing", function()
    local changes = {
      RAdam = function(g) g.betas, g.eps, g.weight_decay, g.maximize = { 0.5, 0.95 }, 1e-3, 0.2, true end,
      NAdam = function(g) g.betas, g.momentum_decay, g.weight_decay, g.maximize = { 0.7, 0.9 }, 0.1, 0.1, true end,
      Adamax = function(g) g.betas, g.eps, g.weight_decay, g.maximize = { 0.5, 0.9 }, 1e-2, 0.1, true end,
      Adadelta = function(g) g.rho, g.eps, g.weight_decay, g.maximize = 0.5, 1e-3, 0.1, true end,
    }
    for name, change in pairs(changes) do
      local o1 = same_run(NEW[name], function(opt)
        return function(k) if k == 2 then change(opt.param_groups[1]) end end
      end, 4)
      assert.is_true(o1.param_groups[1].maximize, name)
    end
    local maximize = {
      SGD = function(ps) return ds.optim.SGD(ps, { lr = 0.1, weight_decay = 0.01 }) end,
      SGDm = function(ps) return ds.optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end,
      Adam = function(ps) return ds.optim.Adam(ps, { lr = 1e-2 }) end,
      AdamW = function(ps) return ds.optim.AdamW(ps, { lr = 1e-2, amsgrad = true }) end,
      RMSprop = function(ps) return ds.optim.RMSprop(ps, { lr = 1e-2 }) end,
      RMSpropc = function(ps) return ds.optim.RMSprop(ps, { lr = 1e-2, centered = true }) end,
      Adagrad = function(ps) return ds.optim.Adagrad(ps, { lr = 0.1 }) end,
    }
    for _, make in pairs(maximize) do
      same_run(make, function(opt)
        return function(k) if k == 3 then opt.param_groups[1].maximize = true end end
      end, 5)
    end
  end)

  it("follows the new schedulers (lr, and momentum or beta1 cycled by CyclicLR)", function()
    local function sched(make) return function(opt) local s = make(opt); return function() s:step() end end end
    same_run(NEW.NAdam, sched(function(o) return S.CyclicLR(o, { base_lr = 1e-3, max_lr = 1e-2, step_size_up = 2 }) end))
    same_run(function(ps) return ds.optim.SGD(ps, { lr = 0.1, momentum = 0.5 }) end,
      sched(function(o) return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 2, mode = "triangular2" }) end))
    same_run(NEW.RAdam, sched(function(o) return S.PolynomialLR(o, { total_iters = 4, power = 2 }) end))
    same_run(NEW.Adadelta, sched(function(o) return S.ConstantLR(o, { factor = 0.5, total_iters = 2 }) end))
    same_run(NEW.Adamax, sched(function(o)
      return S.ChainedScheduler({ S.MultiplicativeLR(o, { lr_lambda = function() return 0.8 end }),
        S.ExponentialLR(o, { gamma = 0.9 }) })
    end))
  end)
end)

-- the schedulers of the fixture, by name, as gen_optim_more_fixtures.py builds them
local MAKERS = {
  constant = function(o) return S.ConstantLR(o, { factor = 0.5, total_iters = 4 }) end,
  constant_default = function(o) return S.ConstantLR(o) end,
  polynomial = function(o) return S.PolynomialLR(o, { total_iters = 6, power = 2.0 }) end,
  polynomial_default = function(o) return S.PolynomialLR(o) end,
  polynomial_sqrt = function(o) return S.PolynomialLR(o, { total_iters = 20, power = 0.5 }) end,
  multiplicative = function(o) return S.MultiplicativeLR(o, { lr_lambda = function() return 0.95 end }) end,
  multiplicative_epoch = function(o) return S.MultiplicativeLR(o, { lr_lambda = function(e) return 1 / (1 + 0.1 * e) end }) end,
  cyclic_triangular = function(o) return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 4 }) end,
  cyclic_triangular2 = function(o)
    return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 3, step_size_down = 5, mode = "triangular2",
      base_momentum = 0.85, max_momentum = 0.95 })
  end,
  cyclic_exp_range = function(o)
    return S.CyclicLR(o, { base_lr = 0.001, max_lr = 0.1, step_size_up = 4, mode = "exp_range", gamma = 0.9 })
  end,
  cyclic_scale_fn_cycle = function(o)
    return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 2, step_size_down = 3,
      scale_fn = function(x) return 1.0 / (1.0 + 0.1 * x) end })
  end,
  cyclic_scale_fn_iterations = function(o)
    return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 3,
      scale_fn = function(x) return 1.0 / (1.0 + 0.1 * x) end, scale_mode = "iterations" })
  end,
  cyclic_groups = function(o)
    return S.CyclicLR(o, { base_lr = { 0.01, 0.02 }, max_lr = { 0.1, 0.05 }, step_size_up = 3,
      base_momentum = { 0.8, 0.7 }, max_momentum = { 0.9, 0.95 } })
  end,
  cyclic_no_momentum = function(o)
    return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 5, cycle_momentum = false })
  end,
  chained = function(o)
    return S.ChainedScheduler({ S.ConstantLR(o, { factor = 0.1, total_iters = 2 }), S.ExponentialLR(o, { gamma = 0.9 }) })
  end,
  chained_three = function(o)
    return S.ChainedScheduler({ S.LinearLR(o, { start_factor = 0.5, total_iters = 5 }),
      S.MultiplicativeLR(o, { lr_lambda = function() return 0.97 end }),
      S.PolynomialLR(o, { total_iters = 20, power = 1.5 }) })
  end,
  sequential_constant_polynomial = function(o)
    return S.SequentialLR(o, { schedulers = { S.ConstantLR(o, { factor = 0.5, total_iters = 3 }),
      S.PolynomialLR(o, { total_iters = 8 }) }, milestones = { 4 } })
  end,
  sequential_exponential_constant = function(o)
    return S.SequentialLR(o, { schedulers = { S.ExponentialLR(o, { gamma = 0.9 }),
      S.ConstantLR(o, { factor = 0.25, total_iters = 6 }) }, milestones = { 5 } })
  end,
  sequential_three = function(o)
    return S.SequentialLR(o, { schedulers = { S.LinearLR(o, { start_factor = 0.2, total_iters = 4 }),
      S.MultiplicativeLR(o, { lr_lambda = function() return 0.9 end }), S.StepLR(o, { step_size = 3, gamma = 0.5 }) },
      milestones = { 6, 15 } })
  end,
}

local function optimizer_for(name)
  local a, b = ds.zeros(1):requires_grad_(), ds.zeros(1):requires_grad_()
  local momentum = name == "cyclic_no_momentum" and 0 or 0.9
  if name == "cyclic_groups" then
    return ds.optim.SGD({ { params = { a } }, { params = { b }, lr = 0.2 } }, { lr = 0.1, momentum = momentum })
  end
  return ds.optim.SGD({ a }, { lr = 0.1, momentum = momentum })
end

-- lrs, momentums and get_last_lr of every group, bit for bit, before the first step and after each
local function check_sequence(case, opt, sched, from)
  for i = from or 1, #case.lrs do
    if i > 1 then opt:step(); sched:step() end
    for gi, g in ipairs(opt.param_groups) do
      local where = string.format("%s step %d group %d", case.name, i - 1, gi)
      assert(case.lrs[i][gi] == g.lr, string.format("%s: lr %.17g, torch %.17g", where, g.lr, case.lrs[i][gi]))
      assert(case.momentums[i][gi] == g.momentum,
        string.format("%s: momentum %.17g, torch %.17g", where, g.momentum, case.momentums[i][gi]))
      assert(case.last_lrs[i][gi] == sched:get_last_lr()[gi], where .. ": get_last_lr")
    end
  end
end

describe("the new schedulers match torch's lr sequences bit for bit", function()
  for _, case in ipairs(fixtures.schedulers) do
    it(case.name, function()
      local opt = optimizer_for(case.name)
      check_sequence(case, opt, MAKERS[case.name](opt))
    end)
  end

  it("step(epoch) takes the closed form where torch has one (ConstantLR, PolynomialLR), get_lr otherwise", function()
    for _, case in ipairs(fixtures.closed_forms) do
      local opt = optimizer_for(case.name)
      local sched = MAKERS[case.name](opt)
      for i, e in ipairs(case.epochs) do
        opt:step()
        sched:step(e)
        assert(case.lrs[i] == opt.param_groups[1].lr, case.name .. " epoch " .. e)
      end
    end
  end)

  it("CyclicLR cycles beta1 of optimizers with betas as it cycles momentum", function()
    local case
    for _, c in ipairs(fixtures.schedulers) do if c.name == "cyclic_triangular" then case = c end end
    for _, cls in ipairs { "Adam", "AdamW", "RAdam", "NAdam", "Adamax" } do
      local opt = ds.optim[cls]({ ds.zeros(1):requires_grad_() }, { lr = 0.1, betas = { 0.5, 0.99 } })
      local sched = MAKERS.cyclic_triangular(opt)
      for i = 1, #case.lrs do
        if i > 1 then sched:step() end
        local g = opt.param_groups[1]
        assert.equal(case.lrs[i][1], g.lr)
        assert.equal(case.momentums[i][1], g.betas[1])
        assert.equal(0.99, g.betas[2])
      end
    end
  end)
end)

describe("state_dict / load_state_dict", function()
  it("resume the new optimizers on the same trajectory (NAdam's mu_product included)", function()
    for _, name in ipairs { "radam_rectified", "nadam_options", "adamax_options", "adadelta_options" } do
      local case
      for _, c in ipairs(fixtures.optimizers) do if c.name == name then case = c end end
      local pa, oa = build(case)
      for s = 1, 3 do
        for i, g in ipairs(case.grads[s]) do pa[i].grad = T(g) end
        oa:step()
      end
      local pb, ob = build(case)
      for i, p in ipairs(pb) do ds.no_grad(function() p:copy_(pa[i]) end) end
      ob:load_state_dict(oa:state_dict())
      for s = 4, #case.grads do
        for i, g in ipairs(case.grads[s]) do pa[i].grad = T(g); pb[i].grad = T(g) end
        oa:step(); ob:step()
      end
      for i = 1, #pa do
        assert(H.bitwise(pa[i], pb[i]), name)
        close_normwise(pb[i], T(case.steps[#case.grads][i]), name)
      end
    end
  end)

  it("resume the new schedulers where they were", function()
    for _, name in ipairs { "constant", "polynomial", "multiplicative_epoch", "cyclic_scale_fn_cycle", "cyclic_groups",
      "chained_three", "sequential_constant_polynomial", "sequential_three" } do
      local case
      for _, c in ipairs(fixtures.schedulers) do if c.name == name then case = c end end
      local oa = optimizer_for(name)
      local sa = MAKERS[name](oa)
      for _ = 1, 7 do oa:step(); sa:step() end
      local ob = optimizer_for(name)
      local sb = MAKERS[name](ob)
      local sd = sa:state_dict()
      for k, v in pairs(sd) do assert(type(v) ~= "function", name .. ": state_dict holds the function " .. k) end
      sb:load_state_dict(sd)
      for gi, g in ipairs(oa.param_groups) do
        for k, v in pairs(g) do if k ~= "params" then ob.param_groups[gi][k] = v end end
      end
      check_sequence(case, ob, sb, 9)
    end
  end)
end)

describe("constructors", function()
  it("take PyTorch's positional arguments", function()
    local function same(make_a, make_b, n)
      local pa, pb = ds.ones(3):requires_grad_(), ds.ones(3):requires_grad_()
      local oa, ob = make_a({ pa }), make_b({ pb })
      for _ = 1, n or 4 do
        pa.grad, pb.grad = ds.tensor({ 0.5, -1, 2 }), ds.tensor({ 0.5, -1, 2 })
        oa:step(); ob:step()
      end
      assert(H.bitwise(pa, pb))
      return oa, ob
    end
    same(function(ps) return ds.optim.RAdam(ps, 0.01, { 0.8, 0.9 }, 1e-6, 0.1) end,
      function(ps) return ds.optim.RAdam(ps, { lr = 0.01, betas = { 0.8, 0.9 }, eps = 1e-6, weight_decay = 0.1 }) end, 8)
    same(function(ps) return ds.optim.NAdam(ps, 0.01, nil, nil, 0.1, 0.01) end,
      function(ps) return ds.optim.NAdam(ps, { lr = 0.01, weight_decay = 0.1, momentum_decay = 0.01 }) end)
    same(function(ps) return ds.optim.Adamax(ps, 0.02, { 0.8, 0.9 }) end,
      function(ps) return ds.optim.Adamax(ps, { lr = 0.02, betas = { 0.8, 0.9 } }) end)
    same(function(ps) return ds.optim.Adadelta(ps, 0.5, 0.8, 1e-5, 0.1, { maximize = true }) end,
      function(ps) return ds.optim.Adadelta(ps, { lr = 0.5, rho = 0.8, eps = 1e-5, weight_decay = 0.1, maximize = true }) end)
    local o = ds.optim.SGD({ ds.zeros(1):requires_grad_() }, { lr = 0.1, momentum = 0.9 })
    local c = S.CyclicLR(o, 0.01, 0.1, 4, nil, "triangular2")
    assert.equal("triangular2", c.mode)
    assert.equal(4, c.total_size / 2)
    assert.equal(0.25, S.ConstantLR(o, 0.25, 3).factor)
    assert.equal(2, S.PolynomialLR(o, 6, 2).power)
  end)

  it("have torch 1.13's defaults", function()
    local p = { ds.zeros(1):requires_grad_() }
    local d = ds.optim.RAdam(p).defaults
    assert.same({ 1e-3, { 0.9, 0.999 }, 1e-8, 0, false }, { d.lr, d.betas, d.eps, d.weight_decay, d.maximize })
    d = ds.optim.NAdam(p).defaults
    assert.same({ 2e-3, { 0.9, 0.999 }, 1e-8, 0, 4e-3 }, { d.lr, d.betas, d.eps, d.weight_decay, d.momentum_decay })
    d = ds.optim.Adamax(p).defaults
    assert.same({ 2e-3, { 0.9, 0.999 }, 1e-8, 0 }, { d.lr, d.betas, d.eps, d.weight_decay })
    d = ds.optim.Adadelta(p).defaults
    assert.same({ 1.0, 0.9, 1e-6, 0 }, { d.lr, d.rho, d.eps, d.weight_decay })
    for _, cls in ipairs { "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "RAdam", "NAdam", "Adamax", "Adadelta" } do
      assert.is_false(ds.optim[cls](p).defaults.maximize, cls)
    end
  end)

  it("refuse options ds does not implement, and bad values, naming the class", function()
    local p = { ds.zeros(1):requires_grad_() }
    for _, cls in ipairs { "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "RAdam", "NAdam", "Adamax", "Adadelta" } do
      for _, opt in ipairs { "foreach", "capturable", "differentiable", "fused", "bogus" } do
        H.raises(function() ds.optim[cls](p, { [opt] = false }) end, cls .. ": unknown option '" .. opt .. "'")
      end
      H.raises(function() ds.optim[cls](p, { maximize = 1 }) end, cls, "maximize", "boolean")
    end
    H.raises(function() ds.optim.RAdam(p, 0.01, nil, nil, 0, true) end, "RAdam", "at most 4 positional")
    H.raises(function() ds.optim.NAdam(p, { momentum_decay = -1 }) end, "NAdam", "momentum_decay")
    H.raises(function() ds.optim.Adamax(p, { betas = { 1, 0.9 } }) end, "Adamax", "betas")
    H.raises(function() ds.optim.RAdam(p, { lr = -1 }) end, "RAdam", "lr")
    H.raises(function() ds.optim.Adadelta(p, { rho = 1.5 }) end, "Adadelta", "rho")
    H.raises(function() ds.optim.Adadelta(p, { eps = -1 }) end, "Adadelta", "eps")
    local o = ds.optim.SGD(p, { lr = 0.1, momentum = 0.9 })
    for _, cls in ipairs { "ConstantLR", "PolynomialLR", "MultiplicativeLR", "CyclicLR" } do
      H.raises(function() S[cls](o, { verbose = true }) end, cls .. ": unknown option 'verbose'")
    end
    H.raises(function() S.ConstantLR(o, { factor = 2 }) end, "ConstantLR", "factor", "between 0 and 1")
    H.raises(function() S.MultiplicativeLR(o, { lr_lambda = 0.9 }) end, "MultiplicativeLR", "lr_lambda")
    H.raises(function() S.MultiplicativeLR(o, { lr_lambda = { print, print } }) end, "MultiplicativeLR", "one per param group")
    H.raises(function() S.CyclicLR(o, { base_lr = 0.01 }) end, "CyclicLR", "max_lr")
    H.raises(function() S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, mode = "square" }) end, "CyclicLR", "mode")
    H.raises(function() S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, scale_mode = "epoch" }) end, "CyclicLR", "scale_mode")
    H.raises(function() S.CyclicLR(o, { base_lr = { 0.01, 0.02 }, max_lr = 0.1 }) end, "CyclicLR", "expected 1 values for base_lr")
    H.raises(function() S.CyclicLR(ds.optim.Adagrad(p), { base_lr = 0.01, max_lr = 0.1 }) end, "CyclicLR",
      "cycle_momentum = false")
    S.CyclicLR(ds.optim.Adagrad({ ds.zeros(1):requires_grad_() }), { base_lr = 0.01, max_lr = 0.1, cycle_momentum = false })
    local o2 = ds.optim.SGD({ ds.zeros(1):requires_grad_() }, { lr = 0.1 })
    H.raises(function() S.ChainedScheduler({ S.ConstantLR(o), S.ConstantLR(o2) }) end, "ChainedScheduler",
      "different optimizers")
    H.raises(function() S.ChainedScheduler({}) end, "ChainedScheduler", "list of schedulers")
    H.raises(function() S.ChainedScheduler({ S.ConstantLR(o) }):step(3) end, "ChainedScheduler.step", "no epoch")
    H.raises(function() S.ChainedScheduler.step({}) end, "step", "scheduler as self")
  end)
end)
