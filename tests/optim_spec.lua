-- tests/optim_spec.lua: SGD/Adam/AdamW steps and LR schedules against torch.optim (fixtures from
-- gen_nn_module_fixtures.py), state_dict round trips, the update ops' table entries and C checks.
local ds = require("ds")
local H = require("helpers")
local D = require("ds.dispatch")

local fixtures = H.fixture("nn_module_optim.json")

local function T(e) return ds.tensor(e.data, { dtype = e.dtype }):reshape(e.shape) end

local classes = {
  sgd = "SGD", sgd_wd = "SGD", sgd_momentum = "SGD", sgd_nesterov = "SGD",
  adam = "Adam", adam_wd = "Adam", adamw = "AdamW",
}

local function build(case)
  local params = {}
  for i, e in ipairs(case.params) do params[i] = T(e):requires_grad_() end
  local opts = {}
  for k, v in pairs(case.opts) do opts[k] = v end
  return params, ds.optim[classes[case.name]](params, opts)
end

-- three train steps of a small classifier, eager and compiled, from the same weights: losses and
-- parameters must agree bitwise. Returns the compiled run's model and optimizer.
local function compiled_train_parity(make_opt)
  local nn, F = ds.nn, ds.F
  local function make()
    ds.manual_seed(1)
    local model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    return model, make_opt(model:parameters())
  end
  local function step(m, o)
    return function(x, y)
      o:zero_grad()
      local loss = F.cross_entropy(m(x), y)
      loss:backward()
      o:step()
      return loss
    end
  end
  local x, y = ds.randn(16, 4), ds.randint(1, 4, { 16 })
  local m1, o1 = make()
  local m2, o2 = make()
  local eager = step(m1, o1)
  local compiled = ds.compile(step(m2, o2), { ds.spec({ 16, 4 }, "f32", "x"), ds.spec({ 16 }, "i64", "y") })
  for _ = 1, 3 do assert(H.bitwise(eager(x, y), compiled(x, y))) end
  for i, p in ipairs(m1:parameters()) do assert(H.bitwise(p, m2:parameters()[i])) end
  return m2, o2
end

describe("optimizers match torch.optim step by step", function()
  for _, case in ipairs(fixtures.optimizers) do
    it(case.name, function()
      local params, opt = build(case)
      for s, grads in ipairs(case.grads) do
        for i, g in ipairs(grads) do params[i].grad = T(g) end
        opt:step()
        for i, p in ipairs(params) do H.close(p, T(case.steps[s][i]), 1e-5, 1e-6) end
      end
      local st = opt:state_dict().state
      for idx, entries in pairs(case.final_state) do
        for k, e in pairs(entries) do H.close(st[tonumber(idx)][k], T(e), 1e-5, 1e-6) end
      end
    end)
  end

  it("state_dict / load_state_dict resume to the same trajectory", function()
    local case = fixtures.optimizers[5] -- adam
    local pa, oa = build(case)
    for s = 1, 2 do
      for i, g in ipairs(case.grads[s]) do pa[i].grad = T(g) end
      oa:step()
    end
    local pb, ob = build(case)
    for i, p in ipairs(pb) do ds.no_grad(function() p:copy_(pa[i]) end) end
    ob:load_state_dict(oa:state_dict())
    for s = 3, 5 do
      for i, g in ipairs(case.grads[s]) do pa[i].grad = T(g); pb[i].grad = T(g) end
      oa:step(); ob:step()
    end
    for i = 1, #pa do assert(H.bitwise(pa[i], pb[i])) end
    H.close(pb[1], T(case.steps[5][1]), 1e-5, 1e-6)
  end)

  it("zero_grad clears grads and params without grads are skipped", function()
    local p = ds.ones(3):requires_grad_()
    local q = ds.ones(2):requires_grad_()
    local opt = ds.optim.SGD({ p, q }, { lr = 0.5 })
    p.grad = ds.ones(3)
    opt:step()
    assert.same({ 0.5, 0.5, 0.5 }, p:totable())
    assert.same({ 1, 1 }, q:totable())
    opt:zero_grad()
    assert.is_nil(p.grad)
  end)

  it("param groups take their own options", function()
    local a, b = ds.ones(2):requires_grad_(), ds.ones(2):requires_grad_()
    local opt = ds.optim.SGD({ { params = { a } }, { params = { b }, lr = 0.1 } }, { lr = 1 })
    a.grad, b.grad = ds.ones(2), ds.ones(2)
    opt:step()
    assert.same({ 0, 0 }, a:totable())
    H.close(b, { 0.9, 0.9 })
  end)

  it("a non-contiguous grad is accepted", function()
    local p = ds.zeros(2, 3):requires_grad_()
    local opt = ds.optim.SGD({ p }, { lr = 1 })
    p.grad = ds.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }):t()
    opt:step()
    assert.same({ { -1, -3, -5 }, { -2, -4, -6 } }, p:totable())
  end)

  it("take PyTorch's positional arguments after the parameters", function()
    local function run(make)
      ds.manual_seed(3)
      local p = ds.randn(4):requires_grad_()
      local o = make({ p })
      for _ = 1, 3 do
        o:zero_grad()
        local loss = (p * p):sum() + p:sum()
        loss:backward()
        o:step()
      end
      return p
    end
    local O = ds.optim
    assert(H.bitwise(run(function(ps) return O.SGD(ps, { lr = 0.1, momentum = 0.9, nesterov = true, dampening = 0 }) end),
      run(function(ps) return O.SGD(ps, 0.1, 0.9, 0, 0, true) end)))
    assert(H.bitwise(run(function(ps) return O.Adam(ps, { lr = 0.01, betas = { 0.8, 0.9 }, amsgrad = true }) end),
      run(function(ps) return O.Adam(ps, 0.01, { 0.8, 0.9 }, nil, nil, true) end)))
    assert(H.bitwise(run(function(ps) return O.RMSprop(ps, { lr = 0.01, alpha = 0.9, centered = true }) end),
      run(function(ps) return O.RMSprop(ps, 0.01, 0.9, 1e-8, 0, 0, true) end)))
    assert(H.bitwise(run(function(ps) return O.Adagrad(ps, { lr = 0.1, lr_decay = 0.01 }) end),
      run(function(ps) return O.Adagrad(ps, 0.1, 0.01) end)))
    H.raises(function() O.SGD({ ds.zeros(1):requires_grad_() }, "0.1") end, "SGD", "lr", "number")
    H.raises(function() O.Adam({ ds.zeros(1):requires_grad_() }, 0.1, { 0.9, 0.99 }, 1e-8, 0, false, true) end,
      "Adam", "at most 5 positional")
  end)

  it("rejects bad options and parameters clearly", function()
    local p = ds.ones(2):requires_grad_()
    H.raises(function() ds.optim.Adam({ p }, { learning_rate = 1 }) end, "Adam", "learning_rate")
    H.raises(function() ds.optim.SGD({ ds.ones(2, { dtype = "i64" }) }, {}) end, "SGD", "i64", "floating point")
    H.raises(function() ds.optim.SGD({ p * 2 }, {}) end, "SGD", "not a leaf")
    H.raises(function() ds.optim.SGD({ p }, { nesterov = true }) end, "nesterov")
    H.raises(function() ds.optim.Adam({}, {}) end, "empty")
  end)
end)

describe("learning-rate schedulers match torch", function()
  local makers = {
    step_lr = function(opt) return ds.optim.StepLR(opt, { step_size = 2, gamma = 0.5 }) end,
    cosine = function(opt) return ds.optim.CosineAnnealingLR(opt, { T_max = 4, eta_min = 0.001 }) end,
  }
  for _, case in ipairs(fixtures.schedulers) do
    it(case.name, function()
      local opt = ds.optim.SGD({ ds.zeros(1):requires_grad_() }, { lr = 0.1 })
      local sched = makers[case.name](opt)
      assert.equal(case.lrs[1], opt.param_groups[1].lr)
      for i = 2, #case.lrs do
        opt:step()
        sched:step()
        assert.equal(case.lrs[i], opt.param_groups[1].lr)
        assert.equal(case.lrs[i], sched:get_last_lr()[1])
      end
    end)
  end
end)

describe("a compiled train step", function()
  it("records the fused updates as state writes and equals eager bitwise", function()
    local m2, o2 = compiled_train_parity(function(ps) return ds.optim.Adam(ps, { lr = 1e-2 }) end)
    assert.equal(3, o2.state[m2[1].weight].step:item())
  end)
end)

describe("scheduler state", function()
  it("state_dict / load_state_dict resume the schedule", function()
    local function make()
      local opt = ds.optim.SGD({ ds.zeros(1):requires_grad_() }, { lr = 0.1 })
      return opt, ds.optim.CosineAnnealingLR(opt, { T_max = 5 })
    end
    local oa, sa = make()
    for _ = 1, 3 do sa:step() end
    local ob, sb = make()
    sb:load_state_dict(sa:state_dict())
    ob.param_groups[1].lr = oa.param_groups[1].lr
    for _ = 1, 4 do sa:step(); sb:step() end
    assert.equal(oa.param_groups[1].lr, ob.param_groups[1].lr)
    assert.equal(7, sb.last_epoch)
  end)
end)

describe("update ops", function()
  it("are op-table entries of kind update that name the inputs they write", function()
    for _, name in ipairs { "sgd_update", "sgd_momentum_update", "adam_update", "adam_amsgrad_update", "rmsprop_update",
                             "rmsprop_full_update", "adagrad_update" } do
      local def = D.by_name[name]
      assert.equal("update", def.kind)
      assert.equal(0, def.noutputs)
      assert.equal(1, def.mutates[1])
      for _, dt in ipairs { "f32", "f64" } do assert.truthy(D.kernel(def, dt)) end
    end
    assert.same({ 1, 3, 4, 5 }, D.by_name.adam_update.mutates)
  end)
  it("check shapes in Lua and in C", function()
    local p, g = ds.zeros(3), ds.zeros(4)
    H.raises(function() ds.adam_update(p, g, ds.zeros(3), ds.zeros(3), ds.zeros({}), { lr = 1 }) end, "adam_update", "(4)", "(3)")
    H.raises(function() ds.adam_update(p, ds.zeros(3), ds.zeros(3), ds.zeros(3), ds.zeros(2), { lr = 1 }) end, "step counter")
    local k = D.kernel(D.by_name.adam_update, "f32")
    local ffi = require("ffi")
    local tb = ffi.new("ds_tensor*[5]", { p._c, g._c, p._c, p._c, ds.zeros({})._c })
    assert.are_not.equal(0, k(tb, ffi.new("double[6]")))
    assert.truthy(ffi.string(require("ds.ffi").C.ds_last_error()):find("adam_update"))
  end)
  it("run in f64 too", function()
    local p = ds.ones(2, { dtype = "f64" }):requires_grad_()
    local opt = ds.optim.AdamW({ p }, { lr = 0.1, weight_decay = 0 })
    p.grad = ds.ones(2, { dtype = "f64" })
    opt:step()
    H.close(p, { 0.9 + 1e-9, 0.9 + 1e-9 }, 0, 1e-14) -- 1 - 0.1 * 1 / (1 + eps)
  end)
end)

describe("RMSprop, Adagrad and amsgrad match torch.optim step by step", function()
  local training = H.fixture("training.json")
  for _, case in ipairs(training.optimizers) do
    it(case.name, function()
      local params = {}
      for i, e in ipairs(case.params) do params[i] = T(e):requires_grad_() end
      local opt = ds.optim[case.class](params, case.opts)
      for s, grads in ipairs(case.grads) do
        for i, g in ipairs(grads) do params[i].grad = T(g) end
        opt:step()
        -- same formulas and operation order as torch's single-tensor loops: equal up to rounding of
        -- sqrt / division (the f32 results agree to a few ulps)
        for i, p in ipairs(params) do H.close(p, T(case.steps[s][i]), 1e-6, 1e-7) end
      end
      local st = opt:state_dict().state
      for idx, entries in pairs(case.final_state) do
        for k, e in pairs(entries) do H.close(st[tonumber(idx)][k], T(e), 1e-6, 1e-7) end
      end
    end)
  end

  it("compile in a train step, equal to eager bitwise", function()
    compiled_train_parity(function(ps) return ds.optim.RMSprop(ps, { lr = 1e-2, momentum = 0.9, centered = true }) end)
    compiled_train_parity(function(ps) return ds.optim.RMSprop(ps, { lr = 1e-2 }) end)
    compiled_train_parity(function(ps) return ds.optim.Adagrad(ps, { lr = 0.1, lr_decay = 0.01 }) end)
    compiled_train_parity(function(ps) return ds.optim.Adam(ps, { lr = 1e-2, amsgrad = true }) end)
  end)

  it("add_param_group takes the optimizer's defaults and refuses shared parameters", function()
    local a, b = ds.ones(2):requires_grad_(), ds.ones(2):requires_grad_()
    local opt = ds.optim.RMSprop({ a }, { lr = 0.5, alpha = 0.9 })
    opt:add_param_group({ params = { b }, lr = 0.1 })
    assert.equal(2, #opt.param_groups)
    assert.equal(0.1, opt.param_groups[2].lr)
    assert.equal(0.9, opt.param_groups[2].alpha)
    H.raises(function() opt:add_param_group({ params = { a } }) end, "RMSprop", "appears twice")
    H.raises(function() opt:add_param_group({ params = { ds.ones(1):requires_grad_() }, beta = 1 }) end, "RMSprop param group 3: unknown option 'beta'")
    H.raises(function() ds.optim.Adagrad({ a }, { lr = -1 }) end, "Adagrad", "lr")
  end)
end)

describe("the other schedulers match torch's learning rates", function()
  local training = H.fixture("training.json")
  local S = ds.optim.lr_scheduler
  local makers = {
    multistep = function(o) return S.MultiStepLR(o, { milestones = { 2, 5, 5, 8 }, gamma = 0.5 }) end,
    exponential = function(o) return S.ExponentialLR(o, { gamma = 0.9 }) end,
    lambda = function(o) return S.LambdaLR(o, { lr_lambda = function(e) return 1 / (1 + e) end }) end,
    linear = function(o) return S.LinearLR(o, { start_factor = 0.25, end_factor = 1.0, total_iters = 4 }) end,
    linear_down = function(o) return S.LinearLR(o, { start_factor = 1.0, end_factor = 0.1, total_iters = 6 }) end,
    onecycle_cos = function(o) return S.OneCycleLR(o, { max_lr = 1.0, total_steps = 15 }) end,
    onecycle_linear_3phase = function(o)
      return S.OneCycleLR(o, { max_lr = 0.5, epochs = 3, steps_per_epoch = 5, anneal_strategy = "linear",
                               three_phase = true, pct_start = 0.25 })
    end,
    warm_restarts = function(o) return S.CosineAnnealingWarmRestarts(o, { T_0 = 3, eta_min = 0.01 }) end,
    warm_restarts_mult = function(o) return S.CosineAnnealingWarmRestarts(o, { T_0 = 2, T_mult = 2 }) end,
    sequential = function(o)
      return S.SequentialLR(o, { schedulers = { S.LinearLR(o, { start_factor = 0.1, total_iters = 3 }),
                                                S.ExponentialLR(o, { gamma = 0.8 }) }, milestones = { 4 } })
    end,
    sequential_cosine = function(o)
      return S.SequentialLR(o, { schedulers = { S.ExponentialLR(o, { gamma = 0.9 }), S.CosineAnnealingLR(o, { T_max = 5 }) },
                                 milestones = { 3 } })
    end,
  }
  local function optimizer(name)
    local p = ds.zeros(1):requires_grad_()
    if name == "SGD" then return ds.optim.SGD({ p }, { lr = 0.1, momentum = 0.9 }) end
    return ds.optim[name]({ p }, { lr = 0.1 })
  end
  for _, case in ipairs(training.schedulers) do
    it(case.name, function()
      local opt = optimizer(case.optimizer or "SGD")
      if case.metrics then
        local sched = S.ReduceLROnPlateau(opt, case.opts)
        for i, m in ipairs(case.metrics) do
          sched:step(m)
          assert.equal(case.lrs[i], opt.param_groups[1].lr)
        end
        return
      end
      local sched = makers[case.name](opt)
      assert.equal(case.lrs[1], opt.param_groups[1].lr)
      for i = 2, #case.lrs do
        opt:step()
        sched:step()
        local g = opt.param_groups[1]
        assert.equal(case.lrs[i], g.lr)
        assert.equal(case.lrs[i], sched:get_last_lr()[1])
        assert.equal(case.momentums[i - 1], g.betas and g.betas[1] or g.momentum)
      end
    end)
  end

  it("state_dict / load_state_dict resume every schedule where it was", function()
    for _, name in ipairs { "multistep", "onecycle_cos", "warm_restarts_mult", "sequential", "lambda" } do
      local oa = optimizer("SGD")
      local sa = makers[name](oa)
      for _ = 1, 5 do sa:step() end
      local ob = optimizer("SGD")
      local sb = makers[name](ob)
      sb:load_state_dict(sa:state_dict())
      for k, v in pairs(oa.param_groups[1]) do if k ~= "params" then ob.param_groups[1][k] = v end end
      for _ = 1, 4 do sa:step(); sb:step() end
      assert.equal(oa.param_groups[1].lr, ob.param_groups[1].lr, name)
    end
    local o = optimizer("SGD")
    local p = ds.optim.lr_scheduler.ReduceLROnPlateau(o, { patience = 0 })
    p:step(1); p:step(2)
    local q = ds.optim.lr_scheduler.ReduceLROnPlateau(optimizer("SGD"), { patience = 0 })
    q:load_state_dict(p:state_dict())
    assert.equal(1, q.best)
    assert.equal(2, q.last_epoch)
  end)

  it("take PyTorch's positional constructor arguments, the same schedules as the options forms", function()
    local f = function(e) return 1 / (1 + e) end
    local positional = {
      multistep = function(o) return S.MultiStepLR(o, { 2, 5, 5, 8 }, 0.5) end,
      exponential = function(o) return S.ExponentialLR(o, 0.9) end,
      lambda = function(o) return S.LambdaLR(o, { f }) end,
      linear = function(o) return S.LinearLR(o, 0.25, 1.0, 4) end,
      onecycle_cos = function(o) return S.OneCycleLR(o, 1.0, 15) end,
      warm_restarts = function(o) return S.CosineAnnealingWarmRestarts(o, 3, nil, 0.01) end,
      warm_restarts_mult = function(o) return S.CosineAnnealingWarmRestarts(o, 2, 2) end,
      sequential = function(o)
        return S.SequentialLR(o, { S.LinearLR(o, 0.1, nil, 3), S.ExponentialLR(o, { gamma = 0.8 }) }, { 4 })
      end,
    }
    for name, make in pairs(positional) do
      local oa, ob = optimizer("SGD"), optimizer("SGD")
      local sa, sb = makers[name](oa), make(ob)
      for _ = 1, 12 do
        assert.equal(oa.param_groups[1].lr, ob.param_groups[1].lr, name)
        oa:step(); ob:step(); sa:step(); sb:step()
      end
    end
    local oa, ob = optimizer("SGD"), optimizer("SGD")
    local pa = S.ReduceLROnPlateau(oa, { mode = "max", factor = 0.5, patience = 1 })
    local pb = S.ReduceLROnPlateau(ob, "max", 0.5, 1)
    for _, m in ipairs { 1, 0.5, 0.4, 0.3, 2, 1 } do
      pa:step(m); pb:step(m)
      assert.equal(oa.param_groups[1].lr, ob.param_groups[1].lr)
    end
  end)

  it("reject bad arguments clearly", function()
    local S2 = ds.optim.lr_scheduler
    H.raises(function() S2.StepLR(optimizer("SGD"), 2, 0.5, -1, true) end, "StepLR", "at most 3 positional")
    H.raises(function() S2.StepLR(optimizer("SGD"), 2, { step_size = 3 }) end, "StepLR", "step_size given twice")
    H.raises(function() S2.ExponentialLR(optimizer("SGD"), "0.9") end, "ExponentialLR", "gamma", "number")
    local o = optimizer("SGD")
    H.raises(function() S2.OneCycleLR(o, { max_lr = 1 }) end, "OneCycleLR", "total_steps")
    H.raises(function() S2.OneCycleLR(ds.optim.Adagrad({ ds.zeros(1):requires_grad_() }), { max_lr = 1, total_steps = 5 }) end,
      "OneCycleLR", "cycle_momentum")
    local oc = S2.OneCycleLR(optimizer("SGD"), { max_lr = 1, total_steps = 2 })
    oc:step(); oc:step()
    H.raises(function() oc:step() end, "OneCycleLR", "total_steps 2")
    H.raises(function() S2.SequentialLR(o, { schedulers = { S2.ExponentialLR(o, { gamma = 0.5 }) }, milestones = { 2 } }) end,
      "SequentialLR", "milestones")
    H.raises(function() S2.ExponentialLR(o, {}) end, "ExponentialLR", "gamma")
    H.raises(function() S2.LambdaLR(o, { lr_lambda = 3 }) end, "LambdaLR", "lr_lambda")
    H.raises(function() S2.ReduceLROnPlateau(o, { mode = "up" }) end, "ReduceLROnPlateau", "mode")
    H.raises(function() S2.CosineAnnealingWarmRestarts(o, { T_0 = 0 }) end, "CosineAnnealingWarmRestarts", "T_0")
  end)
end)
