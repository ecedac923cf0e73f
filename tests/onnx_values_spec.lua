-- tests/onnx_values_spec.lua: ONNX models whose shapes, starts, pads or axes arrive as values: folded when
-- the importer can compute them, a graph per input value when they are graph inputs (onnx/specialized.lua);
-- Pad in every mode and Slice with any step. Each model is compared with ONNX Runtime on the same inputs,
-- eagerly and compiled.
local H = require("helpers")
local ds = require("ds")
local one = require("onnx.one_node")
local proto = require("ds.onnx.proto")

local ELEM = { f32 = 1, i64 = 7 }
local function vi(name, dims, dt)
  local d = {}
  for i, v in ipairs(dims or {}) do d[i] = type(v) == "string" and { dim_param = v } or { dim_value = v } end
  return { name = name, type = { tensor_type = { elem_type = ELEM[dt or "f32"], shape = dims and { dim = d } or nil } } }
end
local function attr_ints(name, v) return { name = name, type = 7, ints = v } end
local function attr_s(name, v) return { name = name, type = 3, s = v } end

-- writes a one-graph model: nodes, inputs {name, dims, dtype}, output names, opset
local function model(dir, file, nodes, inputs, outputs, opset, inits)
  local ins, outs = {}, {}
  for i, x in ipairs(inputs) do ins[i] = vi(x[1], x[2], x[3]) end
  for i, nm in ipairs(outputs) do outs[i] = vi(nm) end
  local path = dir .. "/" .. file
  H.write_file(path, proto.encode("ModelProto", { ir_version = 8, opset_import = { { domain = "", version = opset or 17 } },
    graph = { name = "g", node = nodes, input = ins, output = outs, initializer = inits } }))
  return path
end

-- ds (eager and compiled) equals ONNX Runtime exactly on each feed list ({{name, tensor}, ...})
local function agrees(path, feeds_list) return one.agrees_feeds(path, feeds_list, { rtol = 0, atol = 0 }) end

describe("ONNX values computed at run time", function()
  local dir = H.tmp_dir()
  local x234 = ds.arange(1, 25):reshape(2, 3, 4):astype("f32")
  local function i64(t) return ds.tensor(t, { dtype = "i64" }) end

  it("a Reshape whose shape is a graph input: one graph per shape value, eager and compiled", function()
    local path = model(dir, "reshape.onnx", { { op_type = "Reshape", input = { "x", "shape" }, output = { "y" } } },
      { { "x", { 2, 3, 4 } }, { "shape", { 3 }, "i64" } }, { "y" })
    local m, cm = agrees(path, {
      { { "x", x234 }, { "shape", i64({ 4, -1, 2 }) } },
      { { "x", x234 }, { "shape", i64({ 0, 3, 4 }) } },  -- 0 copies the input's dim
      { { "x", x234 }, { "shape", i64({ 4, -1, 2 }) } },
    })
    assert.truthy(tostring(m):find("shape", 1, true) and tostring(m):find("2 traced", 1, true), tostring(m))
    assert.equal(2, #(function() local l = {}; for k in pairs(cm.compiled) do l[#l + 1] = k end; return l end)())
  end)

  it("Slice with runtime starts, ends, axes and negative steps", function()
    local path = model(dir, "slice.onnx", { { op_type = "Slice", input = { "x", "s", "e", "a", "st" }, output = { "y" } } },
      { { "x", { 2, 3, 4 } }, { "s", { 2 }, "i64" }, { "e", { 2 }, "i64" }, { "a", { 2 }, "i64" }, { "st", { 2 }, "i64" } },
      { "y" })
    agrees(path, {
      { { "x", x234 }, { "s", i64({ -1, 0 }) }, { "e", i64({ -100, 3 }) }, { "a", i64({ 2, 1 }) }, { "st", i64({ -2, 2 }) } },
      { { "x", x234 }, { "s", i64({ 0, 5 }) }, { "e", i64({ 2, -100 }) }, { "a", i64({ 0, -1 }) }, { "st", i64({ 1, -1 }) } },
      { { "x", x234 }, { "s", i64({ 1, 1 }) }, { "e", i64({ 1, 3 }) }, { "a", i64({ 0, 1 }) }, { "st", i64({ 1, 1 }) } },
    })
  end)

  it("Pad in constant, reflect, edge and wrap modes, with negative pads and axes", function()
    for _, mode in ipairs({ "constant", "reflect", "edge", "wrap" }) do
      local path = model(dir, "pad_" .. mode .. ".onnx", { { op_type = "Pad", input = { "x", "p", "", "axes" },
        output = { "y" }, attribute = { attr_s("mode", mode) } } },
        { { "x", { 2, 3, 4 } }, { "p", { 4 }, "i64" }, { "axes", { 2 }, "i64" } }, { "y" }, 19)
      agrees(path, {
        { { "x", x234 }, { "p", i64({ 1, 2, 2, 0 }) }, { "axes", i64({ 1, 2 }) } },
        { { "x", x234 }, { "p", i64({ 0, 1, -1, 1 }) }, { "axes", i64({ -1, 0 }) } },
      })
    end
  end)

  it("shape computations over dynamic dims stay symbolic: Shape -> Slice -> Concat -> Reshape", function()
    local path = model(dir, "dyn.onnx", {
      { op_type = "Shape", input = { "x" }, output = { "s" } },
      { op_type = "Slice", input = { "s", "zero", "two" }, output = { "s01" } },
      { op_type = "Concat", input = { "s01", "minus1" }, output = { "target" }, attribute = { { name = "axis", type = 2, i = 0 } } },
      { op_type = "Reshape", input = { "x", "target" }, output = { "y" } },
    }, { { "x", { "batch", 3, 2, 2 } } }, { "y" }, 17, {
      { name = "zero", dims = { 1 }, data_type = 7, int64_data = { 0 } },
      { name = "two", dims = { 1 }, data_type = 7, int64_data = { 2 } },
      { name = "minus1", dims = { 1 }, data_type = 7, int64_data = { -1 } },
    })
    local m = ds.onnx.load(path)
    assert.is_true(ds.Graph.is_graph(m)) -- no value input: one graph for every batch size
    agrees(path, { { { "x", ds.randn(5, 3, 2, 2) } }, { { "x", ds.randn(1, 3, 2, 2) } } })
  end)

  it("NonMaxSuppression over boxes given as inputs: one graph per value, as ONNX Runtime selects", function()
    ds.manual_seed(8)
    for _, center in ipairs({ 0, 1 }) do
      local boxes = (ds.rand(2, 7, 4) * 4):astype("f32")
      local scores = ds.rand(2, 3, 7)
      one.agrees({ name = "nms" .. center, op = "NonMaxSuppression", opset = 11, attrs = { center_point_box = center },
        inputs = { { "boxes", boxes }, { "scores", scores }, { "limit", i64({ 3 }) },
          { "iou", ds.tensor({ 0.3 }) }, { "score", ds.tensor({ 0.2 }) } } }, dir)
    end
  end)

  it("names each ONNX node (name and op) in the printed IR and the profile of the imported model", function()
    local g = ds.onnx.load("tests/fixtures/onnx/resblock.onnx")
    local ir = tostring(ds.compile(g, { freeze = true }))
    assert.truthy(ir:find("-- onnx /conv1/Conv (Conv)", 1, true), ir)
    assert.truthy(ir:find("-- onnx /short/Conv (Conv)", 1, true), ir)
    local cg = ds.compile(g)
    local rows = cg:profile(2, ds.randn(1, 3, 8, 8))
    local named = false
    for _, r in ipairs(rows) do if tostring(r.line):find("onnx /conv1/Conv (Conv)", 1, true) then named = true end end
    assert.is_true(named, "no profile row names the ONNX node")
  end)

  it("float constants fold step by step in f32, as ONNX Runtime computes them", function()
    local function c(name, v) return { op_type = "Constant", output = { name }, attribute = { { name = "value", type = 4,
      t = { dims = {}, data_type = 1, float_data = { v } } } } } end
    local path = model(dir, "fold.onnx", { c("a", 0.1), c("b", 0.2), c("k", 3.7),
      { op_type = "Add", input = { "a", "b" }, output = { "s" } },
      { op_type = "Mul", input = { "s", "k" }, output = { "m" } },
      { op_type = "Div", input = { "m", "k" }, output = { "q" } },
      { op_type = "Sub", input = { "q", "a" }, output = { "d" } },
      { op_type = "Add", input = { "x", "d" }, output = { "y" } } }, { { "x", { 3 } } }, { "y" })
    agrees(path, { { { "x", ds.tensor({ 1e-9, 0, -3 }) } } })
  end)

  it("a value input that cannot be given names the node and what it needs", function()
    local path = model(dir, "bad.onnx", { { op_type = "Reshape", input = { "x", "shape" }, output = { "y" } } },
      { { "x", { 2, 3, 4 } }, { "shape", { 3 }, "i64" } }, { "y" })
    local m = ds.onnx.load(path)
    H.raises(function() m(x234, i64({ 5, 5, 5 })) end, "node 1 (Reshape)")
    H.raises(function() m(x234, "not a tensor") end, "input 2 (shape) must be a tensor")
  end)
end)
