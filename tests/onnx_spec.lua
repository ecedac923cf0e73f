-- tests/onnx_spec.lua: ds.onnx against the real runtime: every op of the table has an ONNX form or a stated
-- reason it has none; every row of tests/diff_cases.txt whose ops export is traced, exported, passes the ONNX
-- checker (full check) and strict shape inference, and runs in ONNX Runtime with ds's results (tolerance per
-- op, below); example models likewise.
local ds = require("ds")
local D = require("ds.dispatch")
local H = require("helpers")
local ort = require("onnx.ort")
local export_ops = require("ds.onnx.export_ops")
local FORMS = require("ds.onnx.export").FORMS -- export_ops.lua's and export_control.lua's

-- Tolerance (rtol, atol) of ONNX Runtime's result against ds's, per op; a row takes the loosest of its ops.
-- 0: ORT computes the same IEEE operations in the same order (movement, indexing, compare, select, exact
-- arithmetic). Others: ORT's own kernels (MLAS's vectorized exp/tanh/erf, its GEMM's summation order,
-- its LayerNormalization's one-pass variance) round differently from ds's, by a few ulps of the result.
local EXACT = 0
local ULPS = { f32 = { 4e-6, 1e-6 }, f64 = { 1e-13, 1e-14 } }    -- one correctly-rounded op vs another
local MATH = { f32 = { 2e-5, 2e-6 }, f64 = { 1e-12, 1e-13 } }    -- transcendental approximations, chains of them
local SUMS = { f32 = { 1e-4, 1e-5 }, f64 = { 1e-11, 1e-12 } }    -- long sums in another order (matmul, conv, norms)
local TOL = {
  exp = MATH, log = MATH, log2 = MATH, sin = MATH, cos = MATH, tanh = MATH, sigmoid = MATH, silu = MATH, erf = MATH,
  gelu = MATH, gelu_tanh = MATH, softplus = MATH, pow = MATH, rsqrt = ULPS, sqrt = ULPS, div = ULPS,
  softmax = MATH, log_softmax = MATH, logsumexp = MATH, tan = MATH, asin = MATH, acos = MATH, atan = MATH, sinh = MATH,
  cosh = MATH, asinh = MATH, acosh = MATH, atanh = MATH,
  sum = SUMS, mean = SUMS, prod = SUMS, var = SUMS, std = SUMS, cumsum = SUMS, matmul = SUMS, conv2d = SUMS,
  avg_pool2d = SUMS, layer_norm = SUMS,
  -- ORT's optimizer folds the scale into a FusedMatMul whose alpha is an f32 attribute, so in f64 the result
  -- carries the scale's f32 rounding (0.3 -> 0.300000012: 4e-8 relative in the scores, up to ~1e-7 absolute
  -- after softmax and the weighted sum of values of size ~1)
  scaled_dot_product_attention = { f32 = SUMS.f32, f64 = { 1e-7, 1e-7 } }, index_add = SUMS, scatter_add = SUMS,
  arange = ULPS,
  -- ONNX Runtime computes HardSwish as x * clamp(x / 6 + 0.5, 0, 1) (ONNX's definition), ds as PyTorch does,
  -- x * clamp(x + 3, 0, 6) / 6 (HardSigmoid alike)
  hardswish = ULPS, hardsigmoid = ULPS,
}
local function tol_of(ops, dt)
  local rt, at = 0, 0
  for op in pairs(ops) do
    local t = TOL[op]
    if t and t ~= EXACT and t[dt] then rt, at = math.max(rt, t[dt][1]), math.max(at, t[dt][2]) end
  end
  return rt, at
end

-- got (from ONNX Runtime or a reimport) against ds's exp: dtype, shape, NaNs and infinities exactly, the rest
-- within rtol/atol
local function same(got, exp, rt, at, what)
  assert(got.dtype == exp.dtype, what .. ": dtype " .. got.dtype .. " vs ds " .. exp.dtype)
  assert(table.concat(got.shape, ",") == table.concat(exp.shape, ","), what .. ": shape (" ..
    table.concat(got.shape, ",") .. ") vs ds (" .. table.concat(exp.shape, ",") .. ")")
  if exp.dtype == "f32" or exp.dtype == "f64" then
    local g, e = got:reshape(-1):totable(), exp:reshape(-1):totable()
    for i = 1, #e do
      if (g[i] ~= g[i]) ~= (e[i] ~= e[i]) or (math.abs(e[i]) == math.huge and g[i] ~= e[i]) then
        error(string.format("%s: element %d is %s, ds has %s", what, i, tostring(g[i]), tostring(e[i])), 0)
      end
    end
  end
  H.close(got, exp, rt, at)
end

local function from_json(j) return ds.tensor(j.data, { dtype = j.dtype }):reshape(j.shape) end

local function eval(expr, env)
  local f = setfenv(assert(ds.loadstring("return " .. expr, "=" .. expr)), env) -- its text kept: ds.trace converts it
  local out = {}
  local function flat(res)
    for _, r in ipairs(res) do if type(r) == "table" and not ds.is_tensor(r) then flat(r) else out[#out + 1] = r end end
  end
  flat({ f() })
  return out
end

-- one exportable model per diff row (and an f32 twin of rows with f64 inputs: ORT lacks many f64 kernels)
local function build_cases(dir)
  local cases = {}
  for i, case in ipairs(H.fixture("diff.json")) do
    if not case.skip then
      for _, as_f32 in ipairs({ false, true }) do
        local names, list, has_f64 = {}, {}, false
        for _, j in ipairs(case.inputs) do
          local x = from_json(j)
          if j.index then x = x + 1 end
          if j.transposed then x = x:transpose(-1, -2) end
          if x.dtype == "f64" then has_f64 = true; if as_f32 then x = x:astype("f32") end end
          names[#names + 1], list[#list + 1] = j.name, x
        end
        if not as_f32 or has_f64 then
          local function fn(...)
            local e = { ds = ds, F = ds.nn.functional, math = math }
            for k, nm in ipairs(names) do e[nm] = (select(k, ...)) end
            return unpack(eval(case.ds, e))
          end
          local label = string.format("row %d%s: %s", i, as_f32 and " (f32)" or "", case.ds)
          local ok, g = pcall(ds.trace, fn, { n = #list, unpack(list) })
          if ok and #list > 0 then
            local path = string.format("%s/row%d%s.onnx", dir, i, as_f32 and "f32" or "")
            local eok, err = pcall(ds.onnx.export, g, path)
            local ops = {}
            for _, node in ipairs(g.nodes) do ops[node.op] = true end
            local c = { label = label, path = path, ops = ops, graph = g, inputs = list, names = names }
            if not eok then
              c.export_error = tostring(err)
              -- an op with a stated reason, or a graph that writes state (a module made inside the traced
              -- function draws its initial weights: the generator state advances), is a skip; else a failure
              local op = c.export_error:match("op (%S+) has no ONNX form")
              c.skip = (op and export_ops.NO_FORM[op] ~= nil) or
                c.export_error:find("only inference graphs export to ONNX", 1, true) ~= nil
            end
            cases[#cases + 1] = c
          end
        end
      end
    end
  end
  return cases
end

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir) == 0)

describe("ds.onnx export", function()
  it("every op of the table has an ONNX form or a stated reason it has none", function()
    local missing = {}
    for _, def in ipairs(D.list) do
      if not def.internal and not FORMS[def.name] and not export_ops.NO_FORM[def.name] then
        missing[#missing + 1] = def.name
      end
    end
    assert(#missing == 0, "no ONNX mapping and no 'no ONNX form' mark in lua/ds/onnx/export_ops.lua: " ..
      table.concat(missing, ", "))
    for name in pairs(FORMS) do assert(D.by_name[name], "export_ops.lua maps the unknown op " .. name) end
    for name in pairs(export_ops.NO_FORM) do assert(D.by_name[name], "export_ops.lua marks the unknown op " .. name) end
  end)

  local cases, verdicts, results
  it("exports the rows of the differential harness, checks and runs them in ONNX Runtime", function()
    cases = build_cases(dir)
    local paths, runs = {}, {}
    for _, c in ipairs(cases) do
      if not c.export_error then
        paths[#paths + 1] = c.path
        local feed = {}
        for k, nm in ipairs(c.names) do feed[c.graph.specs[k].name] = c.inputs[k] end
        c.run = #runs + 1
        runs[#runs + 1] = { model = c.path, feeds = { feed } }
      end
    end
    verdicts = ort.check(paths)
    results = ort.run(runs)
    assert(#cases > 150, "only " .. #cases .. " rows traced")
  end)

  it("every row exports (or names an op without an ONNX form), passes the checker and matches ds in ORT", function()
    assert(cases, "the export step failed")
    local failures, covered = {}, {}
    for _, c in ipairs(cases) do
      local function fail(msg) failures[#failures + 1] = c.label .. ": " .. msg end
      if c.export_error then
        if not c.skip then fail("export: " .. c.export_error) end
      elseif verdicts[c.path] ~= "ok" then
        fail("checker: " .. tostring(verdicts[c.path]))
      else
        local r = results[c.run]
        local want = { c.graph(unpack(c.inputs)) }
        if r.error then
          -- ORT lacks kernels for some types (f64 Erf, ...): a valid model it cannot run; the f32 twin runs
          if not (r.error:find("Could not find an implementation for", 1, true) or
                  r.error:find("Failed to find kernel", 1, true)) then fail("ONNX Runtime: " .. r.error) end
        else
          local ok, err = pcall(function()
            for k, name in ipairs(r.names) do
              local rt, at = tol_of(c.ops, want[k].dtype)
              same(r.outputs[1][name], want[k], rt, at, "ONNX Runtime's " .. name)
            end
          end)
          if ok then for op in pairs(c.ops) do covered[op] = true end else fail(tostring(err)) end
        end
        -- every op ds writes, ds reads: the file loads back and computes ds's results
        local ok, err = pcall(function()
          local back = { ds.onnx.load(c.path)(unpack(c.inputs)) }
          for k, exp in ipairs(want) do
            local rt, at = tol_of(c.ops, exp.dtype)
            same(back[k], exp, rt, at, "reimported output " .. k)
          end
        end)
        if not ok then fail(tostring(err)) end
      end
    end
    local uncovered = {}
    for name in pairs(FORMS) do if not covered[name] then uncovered[#uncovered + 1] = name end end
    table.sort(uncovered)
    assert(#failures == 0, #failures .. " rows failed:\n" .. table.concat(failures, "\n"))
    assert(#uncovered == 0, "ops with an ONNX form that no row ran in ONNX Runtime: " .. table.concat(uncovered, ", "))
  end)
end)

describe("ds.onnx export of dynamic dims and special values", function()
  -- exported, run by ONNX Runtime (graph optimizations off: the graph as written) and reimported, on each feed
  local function check(name, f, specs, feeds)
    local g = ds.trace(f, specs)
    local path = dir .. "/" .. name .. ".onnx"
    ds.onnx.export(g, path)
    local runs = { { model = path, feeds = {} } }
    for k, feed in ipairs(feeds) do
      runs[1].feeds[k] = {}
      for i, t in ipairs(feed) do runs[1].feeds[k][g.specs[i].name] = t end
    end
    local r = ort.run(runs)[1]
    assert(not r.error, r.error)
    local back = ds.onnx.load(path)
    for k, feed in ipairs(feeds) do
      local want, again = { g(unpack(feed)) }, { back(unpack(feed)) }
      for j, name in ipairs(r.names) do
        same(r.outputs[k][name], want[j], 0, 0, name .. " in ONNX Runtime")
        same(again[j], want[j], 0, 0, name .. " reimported")
      end
    end
  end

  it("shapes computed from dynamic dims (a coefficient was applied twice: (4*batch, 2) for 2*batch)", function()
    check("sym_reshape", function(x) return x:reshape(x:size(1) * 2, -1) end, { ds.spec({ "batch", 4 }, "f32", "x") },
      { { ds.randn(3, 4) }, { ds.randn(1, 4) } })
    check("sym_poly", function(x, y)
      local z = ds.cat({ x, y, y }, 1)                                   -- (n + 2*m, 3)
      return z:reshape(3, -1) + 1, z:reshape(z:size(1) * 3 + 0, 1) * 2    -- (3*(n+2m)/3 ...), (3n + 6m, 1)
    end, { ds.spec({ "n", 3 }, "f32", "x"), ds.spec({ "m", 3 }, "f32", "y") },
      { { ds.randn(2, 3), ds.randn(5, 3) }, { ds.randn(1, 3), ds.randn(1, 3) } })
  end)

  it("NaN and inf cross to ONNX Runtime and back exactly", function()
    local x = ds.tensor({ 0 / 0, math.huge, -math.huge, 1, -0.0, 3e-45 })
    check("special", function(a) return a * 2, a:gt(0), ds.where(a:ne(a), a:abs(), a - 1), a:exp() end,
      { ds.spec({ "n" }, "f32", "a") }, { { x }, { x:astype("f32"):flip(1) } })
  end)
end)

describe("ds.onnx export of the example models", function()
  package.path = "./examples/?.lua;" .. package.path
  local F = ds.nn.functional

  -- export (dynamic dims), check, run in ORT on two inputs each, compare with ds
  local function roundtrip(name, g, feeds, rtol, atol)
    local path = dir .. "/" .. name .. ".onnx"
    ds.onnx.export(g, path)
    assert.equal("ok", ort.check({ path })[path])
    local runs = { { model = path, feeds = {} } }
    for k, f in ipairs(feeds) do
      local feed = {}
      for i, t in ipairs(f) do feed[g.specs[i].name] = t end
      runs[1].feeds[k] = feed
    end
    local r = ort.run(runs)[1]
    assert(not r.error, r.error)
    local back = ds.onnx.load(path)
    for k, f in ipairs(feeds) do
      local want = g(unpack(f))
      same(r.outputs[k][r.names[1]], want, rtol, atol, name .. " in ONNX Runtime")
      same(back(unpack(f)), want, rtol, atol, name .. " reimported")
    end
  end

  it("LeNet-5 (batch dynamic) matches ds in ONNX Runtime", function()
    ds.manual_seed(3)
    local lenet = require("lenet_fashion_mnist").LeNet()
    lenet:eval()
    local g = ds.trace(function(x) return F.softmax(lenet(x), -1) end, { ds.spec({ "batch", 1, 28, 28 }, "f32", "image") })
    roundtrip("lenet", g, { { ds.rand(1, 1, 28, 28) }, { ds.rand(5, 1, 28, 28) } }, SUMS.f32[1], SUMS.f32[2])
  end)

  it("the BERT-style classifier (sequence length dynamic, padding mask) matches ds in ONNX Runtime", function()
    local bert_ex = require("bert_sentiment")
    ds.manual_seed(22)
    local bert = bert_ex.Bert(bert_ex.CFG)
    bert:eval()
    local g = ds.trace(bert, { ds.spec({ 1, "seq" }, "i64", "ids"), ds.spec({ 1, "seq" }, "f32", "mask") })
    local a_ids, a_mask = bert_ex.encode(bert_ex.TEXTS[1], false)
    local b_ids, b_mask = bert_ex.encode(bert_ex.TEXTS[2], true)
    roundtrip("bert", g, { { a_ids, a_mask }, { b_ids, b_mask } }, SUMS.f32[1], SUMS.f32[2])
  end)
end)

describe("ds.onnx.load", function()
  local cjson = require("cjson")
  local proto = require("ds.onnx.proto")
  local FIX = "tests/fixtures/onnx/" -- written by tests/onnx/gen_torch_models.py (torch.onnx.export, opset 17)

  local function inputs_of(case)
    local ins = {}
    for i, j in ipairs(case.inputs) do ins[i] = ds.tensor(j.data, { dtype = j.dtype }):reshape(j.shape) end
    return ins
  end

  -- PyTorch's f32 results against ds's: different kernels (summation order, erf/exp/tanh), same math
  for _, name in ipairs({ "lenet", "resblock", "bert" }) do
    it(name .. " (torch.onnx.export) imports, agrees with PyTorch, compiles bitwise and saves", function()
      local g = ds.onnx.load(FIX .. name .. ".onnx")
      assert.equal("batch", tostring(g.specs[1].shape[1])) -- dim_param kept dynamic
      local cg = ds.compile(g)
      local fx = cjson.decode(H.read_file(FIX .. name .. ".json"))
      ds.save(cg, dir .. "/" .. name)
      local loaded = ds.load(dir .. "/" .. name)
      for _, case in ipairs(fx.cases) do
        local ins = inputs_of(case)
        local y = g(unpack(ins))
        local want = ds.tensor(case.output.data):reshape(case.output.shape)
        H.close(y, want, 1e-5, 1e-6)
        assert(H.bitwise(cg(unpack(ins)), y), "compiled differs from eager")
        assert(H.bitwise(loaded(unpack(ins)), y), "loaded differs from eager")
      end
    end)
  end

  it("a ds export loads back into the same function", function()
    ds.manual_seed(5)
    local lenet = require("lenet_fashion_mnist").LeNet()
    lenet:eval()
    local g = ds.trace(lenet, { ds.spec({ "batch", 1, 28, 28 }, "f32", "image") })
    ds.onnx.export(g, dir .. "/lenet_ds.onnx")
    local back = ds.onnx.load(dir .. "/lenet_ds.onnx")
    local x = ds.rand(3, 1, 28, 28)
    assert(H.bitwise(back(x), g(x)), "the reimported graph differs")
  end)

  local function model_with(node, opset)
    return proto.encode("ModelProto", { ir_version = 8, opset_import = { { domain = "", version = opset or 17 } },
      graph = { name = "g", node = { node },
        input = { { name = "x", type = { tensor_type = { elem_type = 1, shape = { dim = { { dim_value = 2 } } } } } } },
        output = { { name = "y", type = { tensor_type = { elem_type = 1 } } } } } })
  end

  it("refuses unknown ops, unsupported attributes and opsets, naming the node", function()
    local p = dir .. "/bad.onnx"
    H.write_file(p, model_with({ op_type = "FooBar", input = { "x" }, output = { "y" }, name = "f" }))
    H.raises(function() ds.onnx.load(p) end, "bad.onnx", "node 1 (FooBar 'f')", "not supported")
    H.write_file(p, model_with({ op_type = "Relu", input = { "x" }, output = { "y" },
      attribute = { { name = "alpha", type = 1, f = 2 } } }))
    H.raises(function() ds.onnx.load(p) end, "Relu", "attribute alpha is not supported")
    H.write_file(p, model_with({ op_type = "LpNormalization", input = { "x" }, output = { "y" },
      attribute = { { name = "p", type = 2, i = 3 } } }))
    H.raises(function() ds.onnx.load(p) end, "LpNormalization", "p must be 1 or 2, got 3")
    H.write_file(p, model_with({ op_type = "Relu", input = { "x" }, output = { "y" } }, 22))
    H.raises(function() ds.onnx.load(p) end, "opset 22")
    H.write_file(p, model_with({ op_type = "Relu", input = { "nothing" }, output = { "y" } }))
    H.raises(function() ds.onnx.load(p) end, "reads nothing, which no node or input defines")
  end)

  it("refuses malformed and hostile files with an error, never a crash", function()
    local good = H.read_file(FIX .. "resblock.onnx")
    local p = dir .. "/hostile.onnx"
    H.write_file(p, good:sub(1, #good - 7))
    H.raises(function() ds.onnx.load(p) end, "hostile.onnx")
    H.write_file(p, "\255\255\255\255")
    H.raises(function() ds.onnx.load(p) end, "not a valid protobuf")
    -- graphs nested in node attributes 2000 deep (protobuf-c's unpacker recurses once per level)
    local varint = H.protobuf_varint
    local s = ""
    for _ = 1, 2000 do
      s = "\50" .. varint(#s) .. s -- AttributeProto.g
      s = "\42" .. varint(#s) .. s -- NodeProto.attribute
      s = "\10" .. varint(#s) .. s -- GraphProto.node
    end
    H.write_file(p, "\58" .. varint(#s) .. s) -- ModelProto.graph
    H.raises(function() ds.onnx.load(p) end, "hostile.onnx", "nested deeper than 64")
    H.raises(function() ds.onnx.load(dir .. "/missing.onnx") end, "missing.onnx")
  end)
end)
