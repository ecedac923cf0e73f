-- tests/rewrite_spec.lua: the rewrite pass (lua/ds/passes/rewrite.lua and its rules passes/rewrite_*.lua): each
-- idiom, written with ds primitives and imported from ONNX, becomes its fused op (visible in the printed IR and
-- in the stats line) within the rule's tolerance; the default compile keeps the unrewritten bits; options; the
-- imported BERT-style PyTorch export gets attention, gelu and the [CLS] row pruning.
local ds = require("ds")
local H = require("helpers")
local nn = ds.nn

local ALL = { rewrite = "all" }

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

local function tmp(name) return H.tmp_dir() .. "/" .. name end

-- f traced on specs and compiled with the rules (opts) and without: the rewritten graph shows `op`, agrees with
-- eager within rtol/atol; the default compile shows no `op` and gives the eager bits. Returns the printed IR.
local function check(f, specs, inputs, op, rtol, atol, opts)
  local g = ds.trace(f, specs)
  local on, off = ds.compile(g, opts or ALL), ds.compile(g)
  local eager = ds.no_grad(function() return f(unpack(inputs)) end)
  H.close(on(unpack(inputs)), eager, rtol, atol)
  assert.is_true(H.bitwise(off(unpack(inputs)), eager), "the default compile differs from eager")
  local text = tostring(on)
  assert.is_true(count(text, "= " .. op .. "%(") >= 1, "no " .. op .. " in\n" .. text)
  assert.equal(0, off.stats.rewrite)
  return text, g
end

-- the same graph through ONNX: exported, imported, frozen; the rules find the idiom in the imported form too
local function via_onnx(g, inputs, op, rtol, atol, name)
  local path = tmp(name .. ".onnx")
  ds.onnx.export(g, path)
  local back = ds.onnx.load(path)
  local on = ds.compile(back, { freeze = true, rewrite = "all" })
  H.close(on(unpack(inputs)), back(unpack(inputs)), rtol, atol)
  local text = tostring(on)
  assert.is_true(count(text, "= " .. op .. "%(") >= 1, "no " .. op .. " in the imported graph\n" .. text)
  return text
end

describe("rewrite: LayerNorm written out -> layer_norm", function()
  ds.manual_seed(3)
  local w, b = ds.randn(16), ds.randn(16)
  local x = ds.randn(2, 5, 16) * 3 + 1
  local specs = { ds.spec({ "batch", 5, 16 }, "f32", "x") }
  local forms = {
    ["mean/sub/pow/sqrt/div + affine"] = function(t)
      local d = t - t:mean(-1, true)
      return d / ((d ^ 2):mean(-1, true) + 1e-5):sqrt() * w + b
    end,
    ["d*d, rsqrt, weight only"] = function(t)
      local d = t - t:mean(-1, true)
      return d * ds.rsqrt((d * d):mean(-1, true) + 1e-6) * w
    end,
    ["no affine, bias first"] = function(t)
      local d = t - t:mean(3, true)
      return b + d / (1e-5 + (d ^ 2):mean(3, true)):sqrt()
    end,
  }
  for name, f in pairs(forms) do
    it(name, function()
      local text, g = check(f, specs, { x }, "layer_norm", 1e-5, 1e-5)
      assert.equal(0, count(text, "= mean%("))
      assert.matches("rewrite 1 %[layer_norm 1%]", text)
      via_onnx(g, { x }, "layer_norm", 1e-5, 1e-5, "ln")
    end)
  end

  it("over the last two dims; a mean over another dim is left alone", function()
    local w2 = ds.randn(5, 16)
    check(function(t)
      local d = t - t:mean({ 2, 3 }, true)
      return d / ((d ^ 2):mean({ 2, 3 }, true) + 1e-5):sqrt() * w2
    end, specs, { x }, "layer_norm", 1e-5, 1e-5)
    local g = ds.trace(function(t)
      local d = t - t:mean(2, true)
      return d / ((d ^ 2):mean(2, true) + 1e-5):sqrt()
    end, specs)
    assert.equal(0, ds.compile(g, ALL).stats.rewrite)
  end)

  it("an intermediate read elsewhere (the centered value returned too) keeps the written-out form", function()
    local g = ds.trace(function(t)
      local d = t - t:mean(-1, true)
      return d / ((d ^ 2):mean(-1, true) + 1e-5):sqrt(), d
    end, specs)
    local cg = ds.compile(g, ALL)
    assert.equal(0, cg.stats.rewrite)
    local a1, a2 = cg(x)
    local b1, b2 = g(x)
    assert.is_true(H.bitwise(a1, b1) and H.bitwise(a2, b2))
  end)
end)

describe("rewrite: GELU written out -> gelu / gelu_tanh", function()
  local x = ds.linspace(-6, 6, 97):reshape(1, 97)
  local specs = { ds.spec({ "n", 97 }, "f32", "x") }
  local forms = {
    ["x * 0.5 * (1 + erf(x / sqrt 2))"] = function(t) return t * 0.5 * (1 + ds.erf(t / math.sqrt(2))) end,
    ["PyTorch's export: (x * (erf(x / sqrt 2) + 1)) * 0.5"] = function(t)
      return (t * (ds.erf(t / 1.4142135623730951) + 1)) * 0.5 end,
    ["x * (0.5 * (1 + erf(x * 0.7071)))"] = function(t) return t * ((1 + ds.erf(t * 0.7071067811865476)) * 0.5) end,
    ["x * (1 + erf(...)) / 2"] = function(t) return t * (1 + ds.erf(t / math.sqrt(2))) / 2 end,
  }
  for name, f in pairs(forms) do
    it(name, function()
      local _, g = check(f, specs, { x }, "gelu", 1e-6, 1e-7)
      via_onnx(g, { x }, "gelu", 1e-6, 1e-7, "gelu")
    end)
  end

  it("the tanh form (HuggingFace's NewGELU) -> gelu_tanh", function()
    local c = math.sqrt(2 / math.pi)
    local f = function(t) return 0.5 * t * (1 + ds.tanh(c * (t + 0.044715 * t ^ 3))) end
    local _, g = check(f, specs, { x }, "gelu_tanh", 1e-6, 1e-7)
    via_onnx(g, { x }, "gelu_tanh", 1e-6, 1e-7, "gelu_tanh")
  end)

  it("another constant is not GELU", function()
    local g = ds.trace(function(t) return t * 0.5 * (1 + ds.erf(t / 1.5)) end, specs)
    assert.equal(0, ds.compile(g, ALL).stats.rewrite)
  end)

  it("a GELU after a product joins its epilogue", function()
    local W = ds.randn(97, 8)
    local text = check(function(t)
      local y = t:matmul(W)
      return y * 0.5 * (1 + ds.erf(y / math.sqrt(2)))
    end, specs, { x }, "matmul_ep%[gelu%]", 1e-6, 1e-6)
    assert.equal(0, count(text, "erf"))
  end)
end)

describe("rewrite: softmax(q k^T * s + mask) v -> scaled_dot_product_attention", function()
  ds.manual_seed(4)
  local B, Hh, T, E = 2, 3, 6, 8
  local q, k, v = ds.randn(B, Hh, T, E), ds.randn(B, Hh, T, E), ds.randn(B, Hh, T, E)
  local fmask = (ds.rand(B, 1, 1, T):gt(0.3):astype("f32") - 1) * 10000
  local bmask = ds.rand(B, 1, T, T):gt(0.2)
  bmask:select(4, 1):fill_(true) -- every query sees a key
  local S4 = function(name, dt) return ds.spec({ B, Hh, T, E }, dt or "f32", name) end
  local specs = { S4("q"), S4("k"), S4("v") }
  local s = 1 / math.sqrt(E)
  local forms = {
    ["divided scores, additive mask"] = { function(q_, k_, v_, m)
      return ds.softmax(q_:matmul(k_:transpose(-1, -2)) / math.sqrt(E) + m, -1):matmul(v_) end, fmask },
    ["multiplied scores, no mask"] = { function(q_, k_, v_)
      return ds.softmax(q_:matmul(k_:transpose(3, 4)) * s, 4):matmul(v_) end },
    ["scaled q, k^T as a permute"] = { function(q_, k_, v_)
      return ds.softmax((q_ * s):matmul(k_:permute(1, 2, 4, 3)), -1):matmul(v_) end },
    ["boolean mask (masked_fill of the hidden keys)"] = { function(q_, k_, v_, m)
      local sc = q_:matmul(k_:transpose(-1, -2)) * s
      return ds.softmax(sc:masked_fill(m:logical_not(), -math.huge), -1):matmul(v_) end, bmask },
    ["boolean mask (where(mask, scores, -inf))"] = { function(q_, k_, v_, m)
      return ds.softmax(ds.where(m, q_:matmul(k_:transpose(-1, -2)) * s, -math.huge), -1):matmul(v_) end, bmask },
  }
  for name, case in pairs(forms) do
    it(name, function()
      local f, mask = case[1], case[2]
      local sp, ins = { specs[1], specs[2], specs[3] }, { q, k, v }
      if mask then
        sp[4] = ds.spec(mask._shape, mask.dtype, "mask")
        ins[4] = mask
      end
      local text, g = check(f, sp, ins, "scaled_dot_product_attention", 1e-5, 1e-6)
      assert.equal(0, count(text, "softmax"))
      via_onnx(g, ins, "scaled_dot_product_attention", 1e-5, 1e-6, "attn")
    end)
  end

  it("the weights read elsewhere (returned) keep the written-out form", function()
    local g = ds.trace(function(q_, k_, v_)
      local p = ds.softmax(q_:matmul(k_:transpose(-1, -2)) * s, -1)
      return p:matmul(v_), p
    end, specs)
    assert.equal(0, ds.compile(g, ALL).stats.rewrite)
  end)

  it("softmax over another dim is not attention", function()
    local g = ds.trace(function(q_, k_, v_) return ds.softmax(q_:matmul(k_:transpose(-1, -2)), 3):matmul(v_) end, specs)
    assert.equal(0, ds.compile(g, ALL).stats.rewrite)
  end)
end)

describe("rewrite: a primitive-written encoder gets attention, gelu, layer_norm and the [CLS] pruning", function()
  ds.manual_seed(6)
  local Hd, heads, T = 32, 4, 12
  local qp, kp, vp, op = nn.Linear(Hd, Hd), nn.Linear(Hd, Hd), nn.Linear(Hd, Hd), nn.Linear(Hd, Hd)
  local f1, f2 = nn.Linear(Hd, 64), nn.Linear(64, Hd)
  local n1, n2 = nn.LayerNorm(Hd), nn.LayerNorm(Hd)
  local function layer(x)
    local function split(t) return t:reshape(1, T, heads, Hd / heads):transpose(2, 3) end
    local q, k, v = split(qp(x)), split(kp(x)), split(vp(x))
    local p = ds.softmax(q:matmul(k:transpose(-1, -2)) / math.sqrt(Hd / heads), -1)
    x = n1(x + op(p:matmul(v):transpose(2, 3):reshape(1, T, Hd)))
    local h = f1(x)
    return n2(x + f2(h * 0.5 * (1 + ds.erf(h / math.sqrt(2)))))
  end
  local function model(x) return layer(layer(x)):select(2, 1) end

  it("the last layer runs on one row; within tolerance of the unrewritten graph", function()
    local x = ds.randn(1, T, Hd)
    local specs = { ds.spec({ 1, T, Hd }, "f32", "x") }
    local text = check(model, specs, { x }, "scaled_dot_product_attention", 1e-5, 1e-5,
      { freeze = true, rewrite = "all" })
    assert.equal(1, count(text, "scaled_dot_product_attention%([^\n]*f32%(1,4,1,8%)"))
    assert.equal(2, count(text, "matmul_packed_ep%[add, gelu%]"))
  end)
end)

describe("rewrite: Conv + BatchNorm folded into the conv's weight and bias (frozen)", function()
  ds.manual_seed(8)
  local conv, bn = nn.Conv2d(3, 6, 3, { padding = 1 }), nn.BatchNorm2d(6)
  ds.no_grad(function()
    bn.running_mean:copy_(ds.randn(6) * 0.3)
    bn.running_var:copy_(ds.rand(6) + 0.5)
    bn.weight:copy_(ds.rand(6) + 0.5)
    bn.bias:copy_(ds.randn(6) * 0.2)
  end)
  bn:eval()
  local function f(x) return ds.relu(bn(conv(x))) end
  local x = ds.randn(2, 3, 8, 8)
  local specs = { ds.spec({ "batch", 3, 8, 8 }, "f32", "x") }

  it("ds's BatchNorm2d (eval) after a conv2d: one conv2d remains", function()
    -- (no epilogue: the relu would join the conv as conv2d_ep, tests/conv_epilogue_spec.lua)
    local text = check(f, specs, { x }, "conv2d", 1e-5, 1e-5, { freeze = true, rewrite = "all", epilogue = false })
    assert.matches("conv_bn 1", text)
    assert.equal(1, count(text, "\n  %%%d+ = [^\n]*conv2d"))
    assert.equal(0, count(text, "rsqrt"))
  end)

  it("ONNX Conv + BatchNormalization + Relu: one conv2d remains", function()
    local proto = require("ds.onnx.proto")
    local function init(name, t)
      return { name = name, dims = t._shape, data_type = 1, float_data = t:reshape(-1):totable() }
    end
    local function vi(name) return { name = name, type = { tensor_type = { elem_type = 1 } } } end
    local path = tmp("convbn.onnx")
    H.write_file(path, proto.encode("ModelProto", { ir_version = 8, opset_import = { { domain = "", version = 17 } },
      graph = { name = "convbn",
        node = { { op_type = "Conv", input = { "x", "w", "b" }, output = { "c" }, name = "conv",
                   attribute = { { name = "pads", type = 7, ints = { 1, 1, 1, 1 } } } },
                 { op_type = "BatchNormalization", input = { "c", "g", "beta", "mean", "var" }, output = { "n" },
                   name = "bn" },
                 { op_type = "Relu", input = { "n" }, output = { "y" }, name = "relu" } },
        initializer = { init("w", conv.weight), init("b", conv.bias), init("g", bn.weight), init("beta", bn.bias),
                        init("mean", bn.running_mean), init("var", bn.running_var) },
        input = { { name = "x", type = { tensor_type = { elem_type = 1, shape = { dim = {
          { dim_param = "batch" }, { dim_value = 3 }, { dim_value = 8 }, { dim_value = 8 } } } } } } },
        output = { vi("y") } } }))
    local g = ds.onnx.load(path)
    local on = ds.compile(g, { freeze = true, rewrite = "all" })
    local text = tostring(on)
    assert.matches("conv_bn 1", text)
    assert.equal(1, count(text, "\n  %%%d+ = [^\n]*conv2d"))
    H.close(on(x), g(x), 1e-5, 1e-5)
    H.close(on(x), ds.no_grad(function() return f(x) end), 1e-5, 1e-5)
    assert.equal(0, ds.compile(g, { freeze = true }).stats.rewrite)
  end)

  it("parameters that are state (not frozen) are not folded", function()
    local g = ds.trace(f, specs)
    assert.equal(0, ds.compile(g, ALL).stats.rewrite)
  end)
end)

describe("rewrite: options", function()
  local f = function(t) return t * 0.5 * (1 + ds.erf(t / math.sqrt(2))) end
  local g = ds.trace(f, { ds.spec({ 4 }, "f32", "x") })

  it("rewrite = false: none; {gelu = true}: that rule; \"all\": every rule", function()
    assert.equal(0, ds.compile(g, { rewrite = false }).stats.rewrite or 0)
    assert.equal(0, ds.compile(g, { rewrite = { layer_norm = true } }).stats.rewrite)
    assert.equal(1, ds.compile(g, { rewrite = { gelu = true } }).stats.rewrite)
    assert.equal(1, ds.compile(g, ALL).stats.rewrite)
    assert.equal(0, ds.compile(g, { rewrite = true }).stats.rewrite)   -- the exact rules only (the default)
    assert.matches("rewrite 0, prune", tostring(ds.compile(g)))
  end)

  it("names a bad value or an unknown rule", function()
    H.raises(function() ds.compile(g, { rewrite = "fast" }) end, "option 'rewrite' must be")
    H.raises(function() ds.compile(g, { rewrite = { gleu = true } }) end, "unknown rewrite rule 'gleu'", "gelu")
  end)

  it("every rule names its tolerance or promises the exact bits", function()
    for _, r in ipairs(require("ds.passes.rewrite").RULES) do
      assert.is_true(r.exact or type(r.tolerance) == "string", r.name)
      assert.is_true(#r.patterns > 0 and type(r.rewrite) == "function", r.name)
    end
  end)
end)

describe("rewrite + prune: the BERT-style PyTorch export (tests/fixtures/onnx/bert.onnx)", function()
  local cjson = require("cjson")
  local g = ds.onnx.load("tests/fixtures/onnx/bert.onnx")
  local fx = cjson.decode(H.read_file("tests/fixtures/onnx/bert.json"))
  local function inputs_of(case)
    local ins = {}
    for i, j in ipairs(case.inputs) do ins[i] = ds.tensor(j.data, { dtype = j.dtype }):reshape(j.shape) end
    return ins
  end

  it("frozen with every rule: attention and gelu fused, the last layer pruned to the [CLS] row", function()
    local cg = ds.compile(g, { freeze = true, rewrite = "all" })
    local text = tostring(cg)
    assert.matches("rewrite 4 %[attention 2, gelu 2%]", text)
    assert.equal(0, count(text, "= softmax%([^\n]*dim=4"))
    assert.equal(0, count(text, "erf"))
    assert.equal(1, count(text, "scaled_dot_product_attention%([^\n]*f32%(batch,4,seq,8%)"))
    assert.equal(1, count(text, "scaled_dot_product_attention%([^\n]*f32%(batch,4,1,8%)"))
    assert.equal(2, count(text, "matmul_packed_ep%[add, gelu%]"))
    assert.equal(2, count(text, "layer_norm%([^\n]*f32%(batch,1,32%)")) -- n1 and n2 of the last layer
    for _, case in ipairs(fx.cases) do
      local ins = inputs_of(case)
      H.close(cg(unpack(ins)), g(unpack(ins)), 1e-5, 1e-6)
      H.close(cg(unpack(ins)), ds.tensor(case.output.data):reshape(case.output.shape), 1e-5, 1e-6)
    end
  end)

  it("the default compile prunes the written-out attention too, with the eager bits", function()
    local cg, plain = ds.compile(g, { freeze = true }), ds.compile(g, { freeze = true, prune = false })
    local text = tostring(cg)
    assert.equal(1, count(text, "softmax%([^\n]*f32%(batch,4,1,seq%)"))
    assert.equal(1, count(text, "softmax%([^\n]*f32%(batch,4,seq,seq%)"))
    for _, case in ipairs(fx.cases) do
      local ins = inputs_of(case)
      assert.is_true(H.bitwise(cg(unpack(ins)), g(unpack(ins))), "pruned differs from eager")
      assert.is_true(H.bitwise(plain(unpack(ins)), g(unpack(ins))), "unpruned differs from eager")
    end
  end)
end)
