-- tests/nn_spec.lua: ds.nn modules and losses against PyTorch (fixtures from gen_nn_module_fixtures.py,
-- weights loaded through load_state_dict), the Module API, state_dict round trips, a training smoke test.
local ds = require("ds")
local H = require("helpers")
local cjson = require("cjson")
local nn, F = ds.nn, ds.F

local fixtures = H.fixture("nn_module.json")

local function T(e)
  if e == nil or e == cjson.null then return nil end
  local t = ds.tensor(e.data, { dtype = e.dtype })
  return t:reshape(e.shape)
end

local function close(a, b, what)
  local ok, err = pcall(H.close, a, b, 2e-4, 2e-5)
  assert(ok, (what or "") .. ": " .. tostring(err))
end

-- case name -> constructor and forward (inputs: list of tensors, kwargs: table of tensors)
local builders = {
  linear = function() return nn.Linear(5, 3) end,
  linear_nobias_3d = function() return nn.Linear(5, 3, { bias = false }) end,
  conv2d = function() return nn.Conv2d(3, 4, 3, { padding = 1 }) end,
  conv2d_groups = function() return nn.Conv2d(4, 6, 3, { stride = 2, groups = 2 }) end,
  conv2d_same = function() return nn.Conv2d(1, 2, 5, { padding = "same" }) end,
  maxpool2d = function() return nn.MaxPool2d(2) end,
  avgpool2d = function() return nn.AvgPool2d(3, { stride = 2, padding = 1 }) end,
  relu = function() return nn.ReLU() end,
  gelu = function() return nn.GELU() end,
  gelu_tanh = function() return nn.GELU({ approximate = "tanh" }) end,
  tanh = function() return nn.Tanh() end,
  sigmoid = function() return nn.Sigmoid() end,
  softmax = function() return nn.Softmax(-1) end,
  log_softmax = function() return nn.LogSoftmax(2) end,
  flatten = function() return nn.Flatten() end,
  batchnorm1d = function() return nn.BatchNorm1d(4) end,
  batchnorm2d = function() return nn.BatchNorm2d(3, { momentum = 0.2, eps = 1e-3 }) end,
  layernorm = function() return nn.LayerNorm(6) end,
  layernorm_2d = function() return nn.LayerNorm({ 3, 6 }, { eps = 1e-3 }) end,
  embedding = function() return nn.Embedding(10, 4, { padding_idx = 3 }) end,
  sequential = function() return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)) end,
  mha_self = function() return nn.MultiheadAttention(8, 2, { batch_first = true }) end,
  mha_causal = function() return nn.MultiheadAttention(8, 2, { batch_first = true }) end,
  mha_cross = function() return nn.MultiheadAttention(8, 4) end,
  transformer_layer = function()
    return nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, activation = "gelu", batch_first = true })
  end,
}

local function run(case, m, inputs, kwargs)
  if case.name:match("^mha") then
    return m(inputs[1], inputs[2], inputs[3], { key_padding_mask = kwargs.key_padding_mask, attn_mask = kwargs.attn_mask })
  elseif case.name == "transformer_layer" then
    return m(inputs[1], { src_key_padding_mask = kwargs.src_key_padding_mask })
  end
  return m(inputs[1])
end

local function load_case(case)
  local m = builders[case.name]()
  local sd = {}
  for k, v in pairs(case.state_dict) do sd[k] = T(v) end
  m:load_state_dict(sd)
  m:train(case.train)
  local inputs, kwargs = {}, {}
  for i, e in ipairs(case.inputs) do
    inputs[i] = T(e)
    if e.dtype == "f32" then inputs[i]:requires_grad_() end
  end
  for k, e in pairs(case.kwargs) do kwargs[k] = T(e) end
  return m, inputs, kwargs
end

describe("nn layers match PyTorch on the same weights", function()
  for _, case in ipairs(fixtures.layers) do
    it(case.name, function()
      assert(builders[case.name], "no builder for " .. case.name)
      local m, inputs, kwargs = load_case(case)
      local out, weights = run(case, m, inputs, kwargs)
      close(out, T(case.output), "output")
      assert.same(case.output.shape, out.shape)
      if case.weights then close(weights, T(case.weights), "attention weights") end
      if #case.input_grads > 0 or next(case.param_grads) then
        (out * T(case.r)):sum():backward()
      end
      local k = 0
      for _, x in ipairs(inputs) do
        if x.dtype == "f32" then k = k + 1; close(x.grad, T(case.input_grads[k]), "input grad " .. k) end
      end
      local seen = 0
      for name, p in m:named_parameters() do
        seen = seen + 1
        assert(case.param_grads[name], "unexpected parameter " .. name)
        close(p.grad, T(case.param_grads[name]), "grad of " .. name)
      end
      local n = 0
      for _ in pairs(case.param_grads) do n = n + 1 end
      assert.equal(n, seen)
      local sd = m:state_dict()
      for key, e in pairs(case.state_after) do close(sd[key], T(e), "state " .. key) end
      if case.eval_input then
        m:eval()
        close(m(T(case.eval_input)), T(case.eval_output), "eval output")
      end
    end)
  end
end)

describe("state_dict round trips through ds.save_state / ds.load_state", function()
  local path = os.tmpname()
  for _, case in ipairs(fixtures.layers) do
    it(case.name, function()
      local m, inputs, kwargs = load_case(case)
      m:eval()
      ds.save_state(m:state_dict(), path)
      local m2 = builders[case.name]()
      m2:load_state_dict(ds.load_state(path))
      m2:eval()
      local sd1, sd2 = m:state_dict(), m2:state_dict()
      for key, v in pairs(sd1) do assert(H.bitwise(v, sd2[key]), key) end
      local a = ds.no_grad(function() return run(case, m, inputs, kwargs) end)
      local b = ds.no_grad(function() return run(case, m2, inputs, kwargs) end)
      assert(H.bitwise(a, b), "outputs differ after the round trip")
    end)
  end
  teardown(function() os.remove(path) end)
end)

local losses = {
  cross_entropy_mean = function(a, b, o) return F.cross_entropy(a, b, o) end,
  cross_entropy_sum = function(a, b, o) return F.cross_entropy(a, b, o) end,
  cross_entropy_none = function(a, b, o) return F.cross_entropy(a, b, o) end,
  cross_entropy_smooth = function(a, b, o) return F.cross_entropy(a, b, o) end,
  cross_entropy_3d = function(a, b) return F.cross_entropy(a, b) end,
  cross_entropy_probs = function(a, b, o) return F.cross_entropy(a, b, o) end,
  nll_loss = function(a, b) return F.nll_loss(F.log_softmax(a, -1), b) end,
  mse_loss = function(a, b) return F.mse_loss(a, b) end,
  mse_loss_sum = function(a, b, o) return F.mse_loss(a, b, o) end,
  bce_with_logits = function(a, b) return F.binary_cross_entropy_with_logits(a, b) end,
  bce_with_logits_pos_weight = function(a, b, o)
    return F.binary_cross_entropy_with_logits(a, b, { pos_weight = ds.tensor(o.pos_weight) })
  end,
  binary_cross_entropy = function(a, b) return F.binary_cross_entropy(a, b) end,
  l1_loss = function(a, b) return F.l1_loss(a, b) end,
}

describe("losses match PyTorch", function()
  for _, case in ipairs(fixtures.losses) do
    it(case.name, function()
      local fn = assert(losses[case.name], "no loss for " .. case.name)
      local ins = {}
      for i, e in ipairs(case.inputs) do
        ins[i] = T(e)
        if e.dtype == "f32" then ins[i]:requires_grad_() end
      end
      local opts = next(case.opts) and case.opts or nil
      local loss = fn(ins[1], ins[2], opts)
      close(loss, T(case.output), "loss")
      assert.same(case.output.shape, loss.shape)
      ;(loss * T(case.r)):sum():backward()
      for i, e in ipairs(case.input_grads) do
        if e ~= cjson.null then close(ins[i].grad, T(e), "grad " .. i) end
      end
    end)
  end
  it("cross_entropy names the shapes when the target does not match", function()
    H.raises(function() F.cross_entropy(ds.zeros(4, 3), ds.tensor({ 1, 2 }, { dtype = "i64" })) end, "cross_entropy", "(2)", "(4,3)")
    H.raises(function() F.cross_entropy(ds.zeros(2, 3), ds.tensor({ 1, 2 })) end, "cross_entropy", "integers")
    H.raises(function() F.mse_loss(ds.zeros(2), ds.zeros(2), { reduction = "avg" }) end, "reduction")
  end)
end)

describe("Module API", function()
  local Net = nn.Module:extend("Net")
  function Net:init()
    self.fc = nn.Linear(4, 3)
    self.body = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    self.scale = nn.Parameter(ds.ones(2))
    self:register_buffer("count", ds.zeros(1))
    self:register_buffer("scratch", ds.zeros(2), false)
  end
  function Net:forward(x) return self.body(self.fc(x)) * self.scale end

  it("names parameters like PyTorch: own first, then children in registration order, 1-based Sequential keys", function()
    local names = {}
    for name in Net():named_parameters() do names[#names + 1] = name end
    assert.same({ "scale", "fc.weight", "fc.bias", "body.1.weight", "body.1.bias", "body.3.weight", "body.3.bias" }, names)
    assert.equal(7, #Net():parameters())
  end)
  it("lists buffers, children and modules; state_dict skips non-persistent buffers", function()
    local net = Net()
    assert.equal(2, #net:buffers())
    assert.equal(2, #net:children())
    assert.equal(6, #net:modules())
    local sd = net:state_dict()
    assert.truthy(sd.count)
    assert.is_nil(sd.scratch)
    assert.truthy(sd["body.3.bias"])
  end)
  it("Sequential supports seq[i], #seq and append", function()
    local seq = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    assert.equal(3, #seq)
    assert.same({ 16, 8 }, seq[1].weight.shape)
    seq:append(nn.Tanh())
    assert.equal(4, #seq)
    assert.equal(2, #nn.Sequential():add(nn.ReLU()):add(nn.Tanh()))
    assert.same({ 2, 4 }, seq(ds.zeros(2, 8)).shape)
    H.raises(function() nn.Sequential(nn.ReLU(), 3) end, "Sequential", "argument 2")
  end)
  it("train/eval set the flag everywhere; zero_grad clears grads", function()
    local net = Net()
    net:eval()
    for _, m in ipairs(net:modules()) do assert.is_false(m.training) end
    net:train()
    assert.is_true(net.body[2].training)
    net(ds.randn(3, 4)):sum():backward()
    assert.truthy(net.fc.weight.grad)
    net:zero_grad()
    assert.is_nil(net.fc.weight.grad)
  end)
  it("load_state_dict names missing, unexpected and mismatched keys", function()
    local net = Net()
    local sd = net:state_dict()
    sd["fc.bias"] = nil
    sd.extra = ds.zeros(1)
    H.raises(function() net:load_state_dict(sd) end, "missing keys: fc.bias", "unexpected keys: extra")
    local sd2 = net:state_dict()
    sd2["fc.weight"] = ds.zeros(3, 5)
    H.raises(function() net:load_state_dict(sd2) end, "fc.weight", "(3,5)", "(3,4)")
    local r = net:load_state_dict(sd, { strict = false })
    assert.same({ "fc.bias" }, r.missing_keys)
    assert.same({ "extra" }, r.unexpected_keys)
  end)
  it("load_state_dict copies values into the existing parameters", function()
    local a, b = Net(), Net()
    local w = b.fc.weight
    b:load_state_dict(a:state_dict())
    assert.equal(w, b.fc.weight)
    assert(H.bitwise(a.fc.weight, b.fc.weight))
    assert.is_true(b.fc.weight.requires_grad)
  end)
  it("prints the module tree like PyTorch", function()
    local s = tostring(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))
    assert.equal("Sequential(\n  (1): Linear(in_features=2, out_features=3, bias=true)\n  (2): ReLU()\n)", s)
    assert.truthy(tostring(Net()):find("(body): Sequential(\n    (1): Linear", 1, true))
    assert.equal("Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding='same')", tostring(nn.Conv2d(1, 6, 5, { padding = "same" })))
  end)
  it("astype converts parameters and buffers", function()
    local net = Net():astype("f64")
    for _, p in ipairs(net:parameters()) do assert.equal("f64", p.dtype); assert.is_true(p.requires_grad) end
    assert.equal("f64", net.count.dtype)
    assert.equal("f64", net(ds.randn(2, 4, { dtype = "f64" })).dtype)
    assert.equal("f32", net:to("f32").fc.weight.dtype)
  end)
  it("a module without forward says so", function()
    local Empty = nn.Module:extend("Empty")
    H.raises(function() Empty()(ds.zeros(1)) end, "Empty", "forward")
  end)
end)

describe("layer defaults", function()
  it("Linear and Conv2d use PyTorch's default bounds", function()
    ds.manual_seed(1)
    local l = nn.Linear(100, 50)
    local bound = 1 / math.sqrt(100)
    assert.is_true(l.weight:abs():max():item() <= bound)
    assert.is_true(l.weight:abs():max():item() > 0.9 * bound)
    assert.is_true(l.bias:abs():max():item() <= bound)
    local c = nn.Conv2d(4, 8, 3)
    assert.is_true(c.weight:abs():max():item() <= 1 / math.sqrt(36))
  end)
  it("Embedding draws N(0, 1) and zeroes the padding row", function()
    ds.manual_seed(2)
    local e = nn.Embedding(200, 50, { padding_idx = -1 })
    assert.equal(200, e.padding_idx)
    assert.equal(0, e.weight[200]:abs():sum():item())
    local w = e.weight:narrow(1, 1, 199)
    assert.is_true(math.abs(w:mean():item()) < 0.05)
    assert.is_true(math.abs(w:std():item() - 1) < 0.05)
  end)
  it("Dropout is identity in eval mode and scales kept values in training", function()
    local d = nn.Dropout(0.5)
    local x = ds.ones(1000)
    d:eval()
    assert(H.bitwise(d(x), x))
    d:train()
    local y = d(x)
    local s = y:sum():item()
    assert.is_true(s > 800 and s < 1200)
    assert.is_true(y:max():item() == 2)
  end)
  it("layers name the shapes on bad input", function()
    H.raises(function() nn.Linear(5, 3)(ds.zeros(4, 6)) end, "linear", "(4,6)", "(3,5)")
    H.raises(function() nn.Conv2d(3, 4, 3)(ds.zeros(1, 2, 8, 8)) end, "conv2d", "(1,2,8,8)")
    H.raises(function() nn.Embedding(4, 2)(ds.zeros(3)) end, "embedding")
    H.raises(function() nn.MultiheadAttention(8, 2)(ds.zeros(2, 3, 6)) end, "MultiheadAttention", "(2,3,6)")
    H.raises(function() nn.MultiheadAttention(8, 3) end, "divisible")
    H.raises(function() nn.Linear() end, "Linear(in_features, out_features")
  end)
  it("BatchNorm checks the input rank and channels", function()
    H.raises(function() nn.BatchNorm2d(3)(ds.zeros(2, 3)) end, "BatchNorm2d", "4-D")
    H.raises(function() nn.BatchNorm1d(3)(ds.zeros(2, 4)) end, "BatchNorm1d", "4 channels")
  end)
end)

describe("training", function()
  it("loss falls on a small classification problem", function()
    ds.manual_seed(22)
    local x = ds.randn(64, 2)
    local y = x:select(2, 1):mul(x:select(2, 2)):gt(0):astype("i64") + 1 -- XOR-like quadrants
    local model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2))
    local opt = ds.optim.Adam(model:parameters(), { lr = 0.05 })
    local first, last
    for step = 1, 60 do
      opt:zero_grad()
      local loss = F.cross_entropy(model(x), y)
      loss:backward()
      opt:step()
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    assert.is_true(last < 0.3 * first, string.format("loss %g -> %g", first, last))
  end)
end)
