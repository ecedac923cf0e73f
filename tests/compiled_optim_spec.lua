-- tests/compiled_optim_spec.lua: a compiled train step reads the optimizer's hyper-parameters at every call
-- (schedulers and manual changes reach it, bit for bit as eagerly); a compiled or saved graph records the
-- train/eval mode it was traced in, and ds.save refuses a predictor holding train-mode sites unless asked.
local ds = require("ds")
local H = require("helpers")
local nn, F = ds.nn, ds.F

local function model_and_opt(make_opt)
  ds.manual_seed(3)
  local model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
  return model, make_opt(model:parameters())
end

local function train_step(model, opt)
  return function(x, y)
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
end

local SPECS = { ds.spec({ 16, 4 }, "f32", "x"), ds.spec({ 16 }, "i64", "y") }

-- the same training run eagerly and compiled: after every step (and the schedule's change after it) the
-- losses, the weights and the param groups agree bitwise. schedule(opt, k) changes hyper-parameters.
local function same_run(make_opt, schedule, steps)
  ds.manual_seed(5)
  local x, y = ds.randn(16, 4), ds.randint(1, 4, { 16 })
  local m1, o1 = model_and_opt(make_opt)
  local m2, o2 = model_and_opt(make_opt)
  local s1, s2 = schedule(o1), schedule(o2)
  local eager, compiled = train_step(m1, o1), ds.compile(train_step(m2, o2), SPECS)
  for k = 1, steps or 6 do
    assert(H.bitwise(eager(x, y), compiled(x, y)), "loss of step " .. k)
    s1(k); s2(k)
    for i, p in ipairs(m1:parameters()) do assert(H.bitwise(p, m2:parameters()[i]), "parameter " .. i .. ", step " .. k) end
  end
  for gi, g in ipairs(o1.param_groups) do assert.equal(g.lr, o2.param_groups[gi].lr) end
  return m2, o2, compiled
end

local function sched(cls, opts)
  return function(opt)
    local s = ds.optim[cls](opt, opts)
    return function() s:step() end
  end
end

local OPTIMIZERS = {
  SGD = function(ps) return ds.optim.SGD(ps, { lr = 0.1, momentum = 0.9, weight_decay = 1e-3 }) end,
  Nesterov = function(ps) return ds.optim.SGD(ps, { lr = 0.1, momentum = 0.9, nesterov = true }) end,
  Adam = function(ps) return ds.optim.Adam(ps, { lr = 1e-2 }) end,
  AdamW = function(ps) return ds.optim.AdamW(ps, { lr = 1e-2, amsgrad = true }) end,
  RMSprop = function(ps) return ds.optim.RMSprop(ps, { lr = 1e-2, momentum = 0.5, centered = true }) end,
  Adagrad = function(ps) return ds.optim.Adagrad(ps, { lr = 0.1, lr_decay = 0.01 }) end,
}

describe("a compiled train step reads the optimizer's hyper-parameters at every call", function()
  it("lr set to 0 stops the weights, as eagerly", function()
    local model, opt = model_and_opt(function(ps) return ds.optim.SGD(ps, { lr = 0.1 }) end)
    local step = ds.compile(train_step(model, opt), SPECS)
    local x, y = ds.randn(16, 4), ds.randint(1, 4, { 16 })
    step(x, y)
    opt.param_groups[1].lr = 0
    local before = model[1].weight:clone()
    step(x, y)
    assert(H.bitwise(before, model[1].weight), "a compiled step with lr = 0 moved the weights")
  end)

  for name, make in pairs(OPTIMIZERS) do
    it(name .. " with StepLR, CosineAnnealingLR and a manual change equals eager bitwise", function()
      same_run(make, sched("StepLR", { step_size = 2, gamma = 0.5 }))
      same_run(make, sched("CosineAnnealingLR", { T_max = 4 }))
      same_run(make, function(opt)
        return function(k) if k == 3 then for _, g in ipairs(opt.param_groups) do g.lr = g.lr * 3 end end end
      end)
    end)
  end

  it("OneCycleLR (lr and momentum / beta1 cycle) equals eager bitwise", function()
    same_run(OPTIMIZERS.SGD, sched("OneCycleLR", { max_lr = 0.2, total_steps = 8 }), 7)
    same_run(OPTIMIZERS.Adam, sched("OneCycleLR", { max_lr = 0.02, total_steps = 8 }), 7)
  end)

  it("every hyper-parameter is read: momentum, dampening, nesterov, betas, eps, weight_decay, alpha, lr_decay",
    function()
      local changes = {
        { OPTIMIZERS.SGD, function(g) g.momentum, g.dampening, g.weight_decay = 0.5, 0.25, 0.1 end },
        { OPTIMIZERS.Nesterov, function(g) g.nesterov, g.momentum = false, 0.3 end },
        { OPTIMIZERS.Adam, function(g) g.betas, g.eps, g.weight_decay = { 0.5, 0.9 }, 1e-3, 0.2 end },
        { OPTIMIZERS.AdamW, function(g) g.betas, g.weight_decay = { 0.8, 0.99 }, 0.5 end },
        { OPTIMIZERS.RMSprop, function(g) g.alpha, g.eps, g.momentum, g.centered = 0.5, 1e-2, 0.9, false end },
        { OPTIMIZERS.Adagrad, function(g) g.lr_decay, g.eps, g.weight_decay = 0.5, 1e-3, 0.1 end },
      }
      for _, c in ipairs(changes) do
        same_run(c[1], function(opt)
          return function(k) if k == 2 then c[2](opt.param_groups[1]) end end
        end, 4)
      end
    end)

  it("param groups each keep their own values", function()
    same_run(function(ps)
      return ds.optim.SGD({ { params = { ps[1], ps[2] } }, { params = { ps[3], ps[4] }, lr = 0.01 } },
        { lr = 0.1, momentum = 0.9 })
    end, sched("ExponentialLR", { gamma = 0.7 }))
  end)

  it("a lazily compiled step (ds.compile(fn)) follows the schedule too", function()
    local m1, o1 = model_and_opt(OPTIMIZERS.Adam)
    local m2, o2 = model_and_opt(OPTIMIZERS.Adam)
    local x, y = ds.randn(16, 4), ds.randint(1, 4, { 16 })
    local eager, lazy = train_step(m1, o1), ds.compile(train_step(m2, o2))
    for _ = 1, 3 do
      assert(H.bitwise(eager(x, y), lazy(x, y)))
      o1.param_groups[1].lr = o1.param_groups[1].lr / 2
      o2.param_groups[1].lr = o2.param_groups[1].lr / 2
    end
    assert(H.bitwise(m1[3].weight, m2[3].weight))
  end)

  it("an option that chooses another update (momentum 0, amsgrad) is an error naming the fix", function()
    local model, opt = model_and_opt(OPTIMIZERS.SGD)
    local step = ds.compile(train_step(model, opt), SPECS)
    local x, y = ds.randn(16, 4), ds.randint(1, 4, { 16 })
    step(x, y)
    opt.param_groups[1].momentum = 0
    H.raises(function() step(x, y) end, "SGD param group 1", "sgd_momentum_update", "compile the step again")
    local m2, adam = model_and_opt(OPTIMIZERS.Adam)
    local step2 = ds.compile(train_step(m2, adam), SPECS)
    step2(x, y)
    adam.param_groups[1].amsgrad = true
    H.raises(function() step2(x, y) end, "Adam param group 1", "adam_amsgrad_update")
  end)

  it("a hyper-parameter that is not a number is an error", function()
    local model, opt = model_and_opt(OPTIMIZERS.SGD)
    local step = ds.compile(train_step(model, opt), SPECS)
    opt.param_groups[1].lr = "0.1"
    H.raises(function() step(ds.randn(16, 4), ds.randint(1, 4, { 16 })) end, "SGD param group 1: lr must be a number")
  end)

  it("{freeze = true} keeps the hyper-parameters as state", function()
    local model, opt = model_and_opt(OPTIMIZERS.SGD)
    local step = ds.compile(train_step(model, opt), SPECS, { freeze = true })
    opt.param_groups[1].lr = 0
    local before = model[1].weight:clone()
    step(ds.randn(16, 4), ds.randint(1, 4, { 16 }))
    assert(H.bitwise(before, model[1].weight), "a frozen compiled step kept the lr it was compiled with")
  end)

  it("the update ops take the hyper-parameters as their last operand, or as options", function()
    local p, g = ds.ones(3, { dtype = "f64" }), ds.ones(3, { dtype = "f64" })
    ds.sgd_update(p, g, { lr = 0.5 })
    assert.same({ 0.5, 0.5, 0.5 }, p:totable())
    ds.sgd_update(p, g, ds.tensor({ 0.25, 0 }, { dtype = "f64" }))
    assert.same({ 0.25, 0.25, 0.25 }, p:totable())
    H.raises(function() ds.sgd_update(p, g, ds.tensor({ 0.25 }, { dtype = "f64" })) end, "sgd_update",
      "f64 tensor of shape (2)")
    H.raises(function() ds.sgd_update(p, g, { weight_decay = 0.1 }) end, "sgd_update: option 'lr' is required")
    H.raises(function() ds.sgd_update(p, g, { lr = 0.1, momentum = 0.9 }) end, "sgd_update: unknown option 'momentum'")
  end)
end)

describe("a compiled or saved graph records the train/eval mode it was traced in", function()
  local cjson = require("cjson")
  local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
  local function doc_of(path) return cjson.decode(H.read_file(path .. ".json")) end
  local function net()
    ds.manual_seed(7)
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.BatchNorm1d(8), nn.Linear(8, 2))
  end
  local x = ds.randn(3, 4)

  it("a closure's graph records its modules' mode", function()
    local model = net()
    model:eval()
    local f = ds.compile(function(v) return model(v) end, { ds.spec({ 3, 4 }) })
    assert.is_false(f.ir.training)
    model:train()
    assert.is_true(f.current().ir.training)
    local lazy = ds.compile(function(v) return model(v) end)
    lazy(x)
    assert.is_true(lazy:graphs()[1].training)
  end)

  it("ds.save refuses a predictor traced in train mode with dropout / batch-norm sites, naming the fix", function()
    local model = net()
    model:eval()
    local f = ds.compile(function(v) return model(v) end, { ds.spec({ 3, 4 }) })
    model:train() -- as sampling helpers restore it
    H.raises(function() ds.save(f, dir .. "/pred") end, "train mode", "random draw", "running_mean",
      "call model:eval() before ds.compile/ds.save", "allow_train_mode = true")
    local lazy = ds.compile(function(v) return model(v) end)
    lazy(x)
    H.raises(function() ds.save(lazy, dir .. "/lazy") end, "allow_train_mode")
    H.raises(function() ds.save(f, dir .. "/pred", { allow_train = true }) end, "save: unknown option 'allow_train'")
    -- asked for: saved, and the file says so
    ds.save(f, dir .. "/pred", { allow_train_mode = true })
    local doc = doc_of(dir .. "/pred")
    assert.is_true(doc.training)
    local text = table.concat(doc.train_sites, "\n")
    assert.truthy(text:find("random draw (rand)", 1, true))
    assert.truthy(text:find("running_var", 1, true))
    assert.is_true(ds.load(dir .. "/pred").ir.training)
    -- in eval mode: saved, marked eval, no sites, and predicts as the eager model in eval mode
    model:eval()
    ds.save(f, dir .. "/pred")
    doc = doc_of(dir .. "/pred")
    assert.is_false(doc.training)
    assert.is_nil(doc.train_sites)
    assert(H.bitwise(model(x), ds.load(dir .. "/pred")(x)))
  end)

  it("a model without train-mode sites saves in train mode, and a train step says what it holds", function()
    local plain = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    ds.save(ds.compile(plain, { ds.spec({ 3, 4 }) }), dir .. "/plain") -- modules start in train mode
    assert.is_true(doc_of(dir .. "/plain").training)
    local model = net()
    local opt = ds.optim.SGD(model:parameters(), { lr = 0.1 })
    local step = ds.compile(function(v, y)
      opt:zero_grad()
      local loss = F.cross_entropy(model(v), y)
      loss:backward()
      opt:step()
      return loss
    end, { ds.spec({ 3, 4 }), ds.spec({ 3 }, "i64") })
    ds.save(step, dir .. "/step")
    local doc = doc_of(dir .. "/step")
    assert.is_true(doc.training)
    local text = table.concat(doc.train_sites, "\n")
    assert.truthy(text:find("random draw", 1, true) and text:find("running_mean", 1, true))
    assert.falsy(text:find("weight", 1, true)) -- parameters and optimizer state are no train-mode sites
  end)
end)
