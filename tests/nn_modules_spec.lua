-- tests/nn_modules_spec.lua: containers (ModuleDict, ParameterList, Unflatten), ds.nn.utils (gradient
-- clipping and parameter vectors against PyTorch 1.13, fixtures from gen_training_fixtures.py), tensor
-- hooks and retain_grad, the Module helpers zero_grad / apply / to; loss and activation modules,
-- Embedding.from_pretrained, TransformerEncoder, TransformerDecoderLayer and MultiheadAttention with
-- kdim/vdim against PyTorch (fixtures from gen_nn_modules_fixtures.py).
local ds = require("ds")
local H = require("helpers")
local nn = ds.nn
local F = ds.F

local fixtures = H.fixture("training.json")

local function T(e) return ds.tensor(e.data, { dtype = e.dtype }):reshape(e.shape) end

describe("containers", function()
  it("ModuleDict keeps insertion order, names children by key and refuses method names", function()
    local md = nn.ModuleDict({ { "enc", nn.Linear(2, 3) }, { "act", nn.ReLU() }, { "dec", nn.Linear(3, 1) } })
    assert.same({ "enc", "act", "dec" }, md:keys())
    assert.equal(3, md:len())
    local names = {}
    for name in md:named_parameters() do names[#names + 1] = name end
    assert.same({ "enc.weight", "enc.bias", "dec.weight", "dec.bias" }, names)
    local seen = {}
    for k, m in md:items() do seen[#seen + 1] = k .. ":" .. m._name end
    assert.same({ "enc:Linear", "act:ReLU", "dec:Linear" }, seen)
    md:update({ act = nn.Tanh(), extra = nn.Identity() })
    assert.equal("Tanh", md.act._name)
    assert.same({ "enc", "act", "dec", "extra" }, md:keys())
    assert.same({ "a", "b" }, nn.ModuleDict({ b = nn.ReLU(), a = nn.ReLU() }):keys())
    H.raises(function() md:set("forward", nn.ReLU()) end, "ModuleDict", "'forward'", "reserved")
    H.raises(function() md:set("training", nn.ReLU()) end, "reserved")
    H.raises(function() md:set("x", 3) end, "ModuleDict", "not a module")
  end)

  it("ParameterList registers parameters 1, 2, ... that optimizers and state_dict see", function()
    local pl = nn.ParameterList({ ds.ones(2), ds.zeros(3) })
    pl:append(ds.ones(1))
    local names = {}
    for name, p in pl:named_parameters() do names[#names + 1] = name; assert.is_true(p.requires_grad) end
    assert.same({ "1", "2", "3" }, names)
    assert.same({ 3 }, pl[2].shape)
    assert.truthy(pl:state_dict()["3"])
    H.raises(function() pl:append(5) end, "ParameterList", "number")
  end)

  it("Unflatten splits one dim (negative dims count from the end, one size may be -1)", function()
    local x = ds.arange(24):reshape(2, 12)
    assert.same({ 2, 3, 4 }, nn.Unflatten(2, { 3, 4 })(x).shape)
    assert.same({ 2, 2, 6 }, nn.Unflatten(-1, { 2, -1 })(x).shape)
    assert(H.bitwise(nn.Unflatten(2, { 3, 4 })(x):reshape(2, 12), x))
    H.raises(function() nn.Unflatten(2, { 5, 5 })(x) end, "reshape")
    H.raises(function() nn.Unflatten(4, { 3, 4 })(x) end, "Unflatten", "dim 4")
  end)
end)

describe("ds.nn.utils match PyTorch", function()
  for _, case in ipairs(fixtures.clip) do
    it("clip_grad " .. case.name, function()
      local params = {}
      for i, g in ipairs(case.grads) do
        params[i] = ds.zeros(g.shape):requires_grad_()
        params[i].grad = T(g)
      end
      if case.name == "value" then
        nn.utils.clip_grad_value_(params, case.args.clip_value)
      else
        local nt = case.args.norm_type == "inf" and math.huge or case.args.norm_type
        local total = nn.utils.clip_grad_norm_(params, case.args.max_norm, { norm_type = nt })
        -- the norms are sums in another order than PyTorch's vectorized reduction: rounding only
        H.close(total, T(case.total), 1e-6, 0)
      end
      for i, p in ipairs(params) do H.close(p.grad, T(case.clipped[i]), 1e-6, 1e-7) end
    end)
  end

  it("clip_grad_norm_ skips params without grads, rejects bad arguments, reports non-finite norms", function()
    local a, b = ds.zeros(2):requires_grad_(), ds.zeros(2):requires_grad_()
    a.grad = ds.tensor({ 3, 4 })
    H.close(nn.utils.clip_grad_norm_({ a, b }, 1), { 5 })
    H.close(a.grad, { 0.6, 0.8 }, 1e-6)
    assert.is_nil(b.grad)
    H.raises(function() nn.utils.clip_grad_norm_({ a }, 1, { norm_type = 0 }) end, "clip_grad_norm_", "norm_type")
    H.raises(function() nn.utils.clip_grad_norm_({ 3 }, 1) end, "clip_grad_norm_", "element 1")
    a.grad = ds.tensor({ 1, 0 / 0 })
    H.raises(function() nn.utils.clip_grad_norm_({ a }, 1, { error_if_nonfinite = true }) end, "non-finite")
  end)

  it("parameters_to_vector / vector_to_parameters round trip in order", function()
    local m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    local v = nn.utils.parameters_to_vector(m:parameters())
    assert.same({ 6 + 2 + 2 + 1 }, v.shape)
    assert(H.bitwise(v:narrow(1, 7, 2), m[1].bias))
    nn.utils.vector_to_parameters(ds.arange(11):astype("f32"), m:parameters())
    assert.same({ { 0, 1, 2 }, { 3, 4, 5 } }, m[1].weight:totable())
    assert.same({ 10 }, m[2].bias:totable())
    assert.is_true(m[1].weight.requires_grad)
    H.raises(function() nn.utils.vector_to_parameters(ds.zeros(3), m:parameters()) end, "vector_to_parameters", "3", "11")
  end)

  it("clipping inside a compiled train step equals eager bitwise", function()
    local function make()
      ds.manual_seed(4)
      local m = nn.Linear(3, 2)
      return m, ds.optim.SGD(m:parameters(), { lr = 0.1 })
    end
    local function step(m, o)
      return function(x)
        o:zero_grad()
        local loss = (m(x) * 10):pow(2):sum()
        loss:backward()
        local total = nn.utils.clip_grad_norm_(m:parameters(), 0.5)
        o:step()
        return loss, total
      end
    end
    local x = ds.randn(4, 3)
    local m1, o1 = make()
    local m2, o2 = make()
    local eager, compiled = step(m1, o1), ds.compile(step(m2, o2), { ds.spec({ 4, 3 }, "f32", "x") })
    for _ = 1, 3 do
      local l1, t1 = eager(x)
      local l2, t2 = compiled(x)
      assert(H.bitwise(l1, l2)); assert(H.bitwise(t1, t2))
    end
    assert(H.bitwise(m1.weight, m2.weight))
  end)
end)

describe("tensor hooks", function()
  it("register_hook and retain_grad as in PyTorch (hooks in registration order)", function()
    local f = fixtures.hooks
    local x = T(f.x):requires_grad_()
    local y = x * x
    y:retain_grad()
    y:register_hook(function(g) return g * 3 end)
    x:register_hook(function(g) return g:clamp(-5, 5) end)
    local _ = (y * ds.tensor({ 1, 2, -1 })):sum():backward()
    assert(H.bitwise(y.grad, T(f.y_grad)))
    assert(H.bitwise(x.grad, T(f.x_grad)))
    assert.is_true(y:retains_grad())
  end)

  it("a removed hook no longer runs; a hook may only observe; bad hooks are refused", function()
    local x = ds.ones(2):requires_grad_()
    local calls = 0
    local h = x:register_hook(function() calls = calls + 1 end)
    local _ = (x * 2):sum():backward()
    assert.equal(1, calls)
    assert.same({ 2, 2 }, x.grad:totable())
    h:remove()
    _ = (x * 2):sum():backward()
    assert.equal(1, calls)
    x:register_hook(function() return ds.ones(3) end)
    H.raises(function() (x * 2):sum():backward() end, "register_hook", "(2)")
    H.raises(function() ds.ones(2):register_hook(print) end, "register_hook", "does not require grad")
    H.raises(function() ds.ones(2):requires_grad_():register_hook(5) end, "register_hook", "function")
  end)

  it("ds.grad returns the hooked grad of a non-leaf", function()
    local x = ds.ones(2):requires_grad_()
    local y = x * 3
    y:register_hook(function(g) return g * 2 end)
    local gy, gx = unpack(ds.grad((y * y):sum(), { y, x }))
    assert.same({ 12, 12 }, gy:totable())
    assert.same({ 36, 36 }, gx:totable())
  end)
end)

describe("Module helpers", function()
  it("zero_grad, apply and to/float/double", function()
    local m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    local _ = m(ds.randn(4, 2)):sum():backward()
    assert.truthy(m[1].weight.grad)
    m:zero_grad()
    for _, p in ipairs(m:parameters()) do assert.is_nil(p.grad) end
    local visited = {}
    m:apply(function(mod) visited[#visited + 1] = mod._name end)
    assert.same({ "Linear", "ReLU", "Linear", "Sequential" }, visited)
    m:apply(function(mod) if mod._name == "Linear" then nn.init.zeros_(mod.bias) end end)
    assert.same({ 0, 0, 0 }, m[1].bias:totable())
    m:double()
    assert.equal("f64", m[3].weight.dtype)
    assert.is_true(m[3].weight.requires_grad)
    assert.equal("f64", m(ds.randn(1, 2, { dtype = "f64" })).dtype)
    m:to("f32")
    assert.equal("f32", m[1].weight.dtype)
    m:float()
    assert.equal("f32", m[1].bias.dtype)
  end)
end)

describe("loss modules match PyTorch's", function()
  local fx = H.fixture("nn_modules.json")
  for _, case in ipairs(fx.losses) do
    it(case.name .. " " .. require("cjson").encode(case.opts) .. " after " .. #case.args .. " positional arguments", function()
      local opts, args = {}, {}
      for k, v in pairs(case.opts) do opts[k] = type(v) == "table" and T(v) or v end
      for i, v in ipairs(case.args) do args[i] = type(v) == "table" and T(v) or v end
      args[#args + 1] = opts
      local m = nn[case.name](unpack(args))
      local input = T(case.inputs[1]):requires_grad_()
      local rest = {}
      for i = 2, #case.inputs do rest[#rest + 1] = T(case.inputs[i]) end
      local out = m(input, unpack(rest))
      H.close(out, T(case.output), 1e-5, 1e-6)
      out:sum():backward()
      H.close(input.grad, T(case.grad), 1e-5, 1e-6)
    end)
  end

  it("keep tensor options as buffers that follow the module's dtype", function()
    local m = nn.BCEWithLogitsLoss({ pos_weight = ds.tensor({ 1, 2 }), reduction = "sum" })
    assert.truthy(m:state_dict().pos_weight)
    m:double()
    local x = ds.zeros(3, 2, { dtype = "f64" })
    assert.equal("f64", m(x, ds.ones(3, 2, { dtype = "f64" })).dtype)
    assert.truthy(tostring(m):find("reduction=sum", 1, true))
  end)

  it("take PyTorch's positional arguments (with gaps) as the options table, and refuse bad ones by name when constructed", function()
    local w, x, t = ds.tensor({ 1, 2, 3 }), ds.randn(4, 3), ds.tensor({ 1, 2, 3, 2 }, { dtype = "i64" })
    assert(H.bitwise(nn.CrossEntropyLoss(w, nil, 2)(x, t), nn.CrossEntropyLoss({ weight = w, ignore_index = 2 })(x, t)))
    H.raises(function() nn.MSELoss({ reduction = "avg" }) end, "MSELoss", "reduction")
    H.raises(function() nn.CrossEntropyLoss({ wieght = w }) end, "CrossEntropyLoss", "unknown option 'wieght'")
    H.raises(function() nn.MSELoss("sum") end, "MSELoss", "size_average", "deprecated", "reduction")
    H.raises(function() nn.NLLLoss(5) end, "NLLLoss", "weight")
    H.raises(function() nn.NLLLoss(w, { weight = w }) end, "NLLLoss", "weight given twice")
    H.raises(function() nn.HuberLoss("sum", 1, 2) end, "HuberLoss", "at most 2 positional")
    H.raises(function() nn.L1Loss({ reduction = "sum" }, w) end, "L1Loss", "options table must be the last")
    H.raises(function() nn.MSELoss()(x, x, x) end, "MSELoss", "2 inputs")
  end)
end)

describe("Embedding.from_pretrained", function()
  it("uses the given weights (frozen by default) as PyTorch does", function()
    local fx = H.fixture("nn_modules.json").from_pretrained
    local e = nn.Embedding.from_pretrained(T(fx.weight), { freeze = false, padding_idx = 3 })
    local out = e(T(fx.ids))
    assert(H.bitwise(out, T(fx.output)))
    out:sum():backward()
    assert(H.bitwise(e.weight.grad, T(fx.grad)))
    local frozen = nn.Embedding.from_pretrained(T(fx.weight))
    assert.is_false(frozen.weight.requires_grad)
    assert.equal(1, #frozen:parameters())
    H.raises(function() nn.Embedding.from_pretrained(ds.zeros(3)) end, "from_pretrained", "2-d")
  end)
end)

describe("TransformerEncoder, TransformerDecoderLayer and MultiheadAttention with kdim/vdim match PyTorch", function()
  local fx = H.fixture("nn_modules.json")
  local build = {
    encoder_stack = function()
      local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, batch_first = true })
      return nn.TransformerEncoder(layer, 2, { norm = nn.LayerNorm(8) })
    end,
    decoder_layer = function() return nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 12, dropout = 0, activation = "gelu" }) end,
    mha_kdim_vdim = function() return nn.MultiheadAttention(8, 2, { kdim = 5, vdim = 3 }) end,
    decoder_layer_norm_first = function()
      return nn.TransformerDecoderLayer(8, 4, { dim_feedforward = 12, dropout = 0, batch_first = true, norm_first = true })
    end,
  }
  for _, case in ipairs(fx.transformers) do
    it(case.name, function()
      local m = build[case.name]()
      local sd = {}
      for k, e in pairs(case.state_dict) do sd[k] = T(e) end
      m:load_state_dict(sd)
      local ins = {}
      for i, e in ipairs(case.inputs) do ins[i] = T(e):requires_grad_() end
      local masks = {}
      for k, e in pairs(case.masks) do masks[k] = T(e) end
      local y
      if case.name == "encoder_stack" then y = m(ins[1], masks)
      elseif case.name == "mha_kdim_vdim" then y = m(ins[1], ins[2], ins[3], masks)
      else y = m(ins[1], ins[2], masks) end
      H.close(y, T(case.output), 2e-4, 2e-5)
      local _ = (y * T(case.r)):sum():backward()
      for i, e in ipairs(case.input_grads) do H.close(ins[i].grad, T(e), 2e-4, 2e-5) end
      local n = 0
      for name, p in m:named_parameters() do
        n = n + 1
        assert(case.param_grads[name], "unexpected parameter " .. name)
        H.close(p.grad, T(case.param_grads[name]), 2e-4, 2e-5)
      end
      local expected = 0
      for _ in pairs(case.param_grads) do expected = expected + 1 end
      assert.equal(expected, n)
    end)
  end

  it("the encoder's layers are independent copies", function()
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    local enc = nn.TransformerEncoder(layer, 3)
    assert.are_not.equal(enc.layers[1].linear1.weight, enc.layers[2].linear1.weight)
    assert(H.bitwise(enc.layers[1].linear1.weight, layer.linear1.weight))
    ds.no_grad(function() enc.layers[1].linear1.weight:fill_(0) end)
    assert.is_false(H.bitwise(enc.layers[2].linear1.weight, enc.layers[1].linear1.weight))
    assert.equal(3 * #layer:parameters(), #enc:parameters())
    H.raises(function() nn.TransformerEncoder(layer, 0) end, "TransformerEncoder")
    H.raises(function() nn.TransformerDecoderLayer(8, 2)(ds.zeros(3, 2, 8)) end, "TransformerDecoderLayer", "memory")
    local mha = nn.MultiheadAttention(8, 2, { kdim = 5, vdim = 3 })
    H.raises(function() mha(ds.zeros(3, 2, 8), ds.zeros(4, 2, 8), ds.zeros(4, 2, 3)) end, "MultiheadAttention", "kdim 5")
  end)
end)

describe("activation modules match PyTorch's", function()
  for _, case in ipairs(H.fixture("nn_modules.json").activations) do
    it(case.name .. " " .. require("cjson").encode(case.opts), function()
      local x = T(case.input):requires_grad_()
      local y = nn[case.name](case.opts)(x)
      H.close(y, T(case.output), 1e-6, 1e-7)
      y:sum():backward()
      H.close(x.grad, T(case.grad), 1e-6, 1e-7)
    end)
  end
end)

describe("activation module constructors", function()
  it("take PyTorch's positional arguments, refuse inplace = true and anything unknown by name", function()
    local x = ds.randn(3, 4)
    assert(H.bitwise(nn.Hardtanh(-0.5, 0.5)(x), F.hardtanh(x, -0.5, 0.5)))
    assert(H.bitwise(nn.Softplus(2, 1)(x), nn.Softplus({ beta = 2, threshold = 1 })(x)))
    assert(H.bitwise(nn.LeakyReLU(0.2, false)(x), F.leaky_relu(x, 0.2)))
    assert(H.bitwise(nn.Softmax({ dim = 1 })(x), nn.Softmax(1)(x)))
    assert.equal("GELU(approximate='tanh')", tostring(nn.GELU("tanh")))
    assert(H.bitwise(nn.ReLU(false)(x), x:relu()))
    H.raises(function() nn.ReLU({ inplace = true }) end, "ReLU", "inplace = true is not implemented")
    H.raises(function() nn.ELU(1, true) end, "ELU", "inplace")
    H.raises(function() nn.Tanh(3) end, "Tanh", "no positional arguments")
    H.raises(function() nn.Softplus({ betta = 2 }) end, "Softplus", "unknown option 'betta'")
    H.raises(function() nn.Softmax("x") end, "Softmax", "dim", "integer")
  end)
end)
