-- tests/onnx_index_spec.lua: ONNX import of indexing, sorting, reductions and losses, against ONNX Runtime on
-- one-node models the conformance suite does not cover: ties in TopK and ArgMax, negative runtime indices,
-- integer dtypes kept by reductions and scans, empty-set reductions, both opset forms of axes, dynamic dims;
-- each model run eagerly and compiled (freeze) and compared exactly (integers) or at 1e-5 (floats).
local H = require("helpers")
local ds = require("ds")
local one = require("onnx.one_node")

local dir = H.tmp_dir()
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

-- ds's outputs of c (tests/onnx/one_node.lua's model table), eagerly and compiled, equal ONNX Runtime's
local function agrees(c) one.agrees(c, dir) end

local function f32(data, shape) return ds.tensor(data, { dtype = "f32" }):reshape(shape or { #data }) end
local function i64(data, shape) return ds.tensor(data, { dtype = "i64" }):reshape(shape or { #data }) end
local function i32(data, shape) return ds.tensor(data, { dtype = "i32" }):reshape(shape or { #data }) end

describe("ONNX import of indexing, sorting, reductions and losses agrees with ONNX Runtime", function()
  local ties = f32({ 3, 1, 3, 2, 3, 1, 2, 2, 1, 1, 5, 5 }, { 3, 4 })

  it("TopK: ties in index order, largest and smallest, k as an input and as a constant", function()
    agrees { name = "topk_ties", op = "TopK", opset = 11, attrs = { axis = 1 }, outputs = 2,
      inputs = { { "x", ties }, { "k", i64({ 3 }), const = true } } }
    agrees { name = "topk_smallest", op = "TopK", opset = 11, attrs = { axis = 0, largest = 0 }, outputs = 2,
      inputs = { { "x", ties }, { "k", i64({ 2 }) } } }
    agrees { name = "topk_attr", op = "TopK", opset = 9, attrs = { k = 2 }, outputs = 2, inputs = { { "x", ties } } }
  end)

  it("ArgMax/ArgMin: first or last of equal values, keepdims, negative axis", function()
    for _, op in ipairs({ "ArgMax", "ArgMin" }) do
      for _, last in ipairs({ 0, 1 }) do
        agrees { name = op .. last, op = op, opset = 13, attrs = { axis = -1, keepdims = 0, select_last_index = last },
          inputs = { { "x", ties } } }
      end
      agrees { name = op .. "_i32", op = op, opset = 13, attrs = { axis = 0 }, inputs = { { "x", i32({ 4, 1, 4, 7 }, { 2, 2 }) } } }
    end
  end)

  it("Gather, GatherElements, GatherND: negative runtime indices, dynamic dims, batch_dims", function()
    local x = f32({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }, { 3, 4 })
    agrees { name = "gather_neg", op = "Gather", opset = 13, attrs = { axis = 1 },
      inputs = { { "x", x, dims = { "n", 4 } }, { "i", i64({ -1, 0, -4, 2 }, { 2, 2 }) } } }
    agrees { name = "gather_elements_neg", op = "GatherElements", opset = 13, attrs = { axis = 0 },
      inputs = { { "x", x, dims = { "n", 4 } }, { "i", i64({ -1, 0, 1, -3 }, { 1, 4 }) } } }
    agrees { name = "gathernd_batch", op = "GatherND", opset = 13, attrs = { batch_dims = 1 },
      inputs = { { "x", x:reshape(3, 2, 2) }, { "i", i64({ 1, 0, -1, -2, 0, 1 }, { 3, 2 }) } } }
    agrees { name = "gathernd_slices", op = "GatherND", opset = 13,
      inputs = { { "x", x:reshape(3, 2, 2) }, { "i", i64({ 2, -1, 0 }, { 3, 1 }) } } }
  end)

  it("ScatterElements and ScatterND: negative indices, every reduction with duplicates, i32 data", function()
    local x = f32({ 1, 2, 3, 4, 5, 6 }, { 2, 3 })
    agrees { name = "scatter_elements_add", op = "ScatterElements", opset = 16, attrs = { axis = 1, reduction = "add" },
      inputs = { { "x", x }, { "i", i64({ -1, -1, 0, 2 }, { 2, 2 }) }, { "u", f32({ 10, 20, 30, 40 }, { 2, 2 }) } } }
    agrees { name = "scatter_elements_i32", op = "ScatterElements", opset = 13, attrs = { axis = 0 },
      inputs = { { "x", i32({ 1, 2, 3, 4, 5, 6 }, { 2, 3 }) }, { "i", i64({ 1, -2 }, { 1, 2 }) }, { "u", i32({ 7, 8 }, { 1, 2 }) } } }
    for _, r in ipairs({ "add", "mul", "max", "min" }) do
      agrees { name = "scatternd_" .. r, op = "ScatterND", opset = 18, attrs = { reduction = r },
        inputs = { { "x", x }, { "i", i64({ 1, 1, -1 }, { 3, 1 }) }, { "u", f32({ 1, 2, 3, 4, 5, 6, 7, 8, 9 }, { 3, 3 }) } } }
      agrees { name = "scatter_elements_" .. r, op = "ScatterElements", opset = 18, attrs = { axis = 0, reduction = r },
        inputs = { { "x", i32({ 1, 2, 3, 4, 5, 6 }, { 2, 3 }) }, { "i", i64({ 1, -1, 0, 0, 1, 1 }, { 2, 3 }) },
          { "u", i32({ 7, -8, 2, 3, 4, 5 }, { 2, 3 }) } } }
    end
  end)

  it("OneHot with negative indices and axis; Trilu with a constant k; EyeLike off the diagonal", function()
    agrees { name = "onehot", op = "OneHot", opset = 11, attrs = { axis = 0 },
      inputs = { { "i", i64({ 0, -1, 2, 7 }) }, { "d", f32({ 4 }), const = true }, { "v", f32({ -1, 5 }) } } }
    agrees { name = "tril_k", op = "Trilu", opset = 14, attrs = { upper = 0 },
      inputs = { { "x", f32({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 }, { 3, 4 }) }, { "k", i64({ -1 }, {}), const = true } } }
    agrees { name = "eyelike", op = "EyeLike", opset = 9, attrs = { k = -1, dtype = 7 }, inputs = { { "x", f32({ 0, 0, 0, 0, 0, 0 }, { 3, 2 }) } } }
  end)

  it("Reduce*: integers keep their dtype, axes as attribute (opset 13) and input (18), empty sets", function()
    local x = i32({ 1, -2, 3, 4, 5, -6 }, { 2, 3 })
    for _, op in ipairs({ "ReduceSum", "ReduceSumSquare", "ReduceL1", "ReduceProd", "ReduceMax", "ReduceMin" }) do
      agrees { name = op .. "_i32_18", op = op, opset = 18, attrs = { keepdims = 0 },
        inputs = { { "x", x }, { "a", i64({ -1 }), const = true } } }
    end
    local y = f32({ 0.5, 1, 2, 3, 0.25, 8 }, { 3, 2 })
    for _, op in ipairs({ "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean" }) do
      agrees { name = op .. "_13", op = op, opset = 13, attrs = { axes = { 0 } }, inputs = { { "x", y } } }
    end
    local empty = ds.zeros({ 2, 0 }, { dtype = "f32" })
    for _, op in ipairs({ "ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceLogSumExp", "ReduceL2" }) do
      agrees { name = op .. "_empty", op = op, opset = 18, inputs = { { "x", empty }, { "a", i64({ 1 }), const = true } } }
    end
  end)

  it("CumSum: i32 kept, exclusive and reverse together", function()
    agrees { name = "cumsum_i32", op = "CumSum", opset = 14, attrs = { exclusive = 1, reverse = 1 },
      inputs = { { "x", i32({ 1, 2, 3, 4, 5, 6 }, { 2, 3 }) }, { "a", i32({ 1 }, {}), const = true } } }
  end)

  it("Einsum with an implicit output over '...', and a diagonal", function()
    local a, b = f32({ 1, 2, 3, 4, 5, 6, 7, 8 }, { 2, 2, 2 }), f32({ 1, 0, 2, 1, -1, 3, 0.5, 2 }, { 2, 2, 2 })
    agrees { name = "einsum_ellipsis", op = "Einsum", opset = 12, attrs = { equation = "...ij,...jk" },
      inputs = { { "a", a }, { "b", b } } }
    agrees { name = "einsum_trace", op = "Einsum", opset = 12, attrs = { equation = "bii->b" }, inputs = { { "a", a } } }
  end)

  it("ReverseSequence along dim 1 with batch 0; Tile; Unique with axis, unsorted", function()
    agrees { name = "reverse_sequence", op = "ReverseSequence", opset = 10, attrs = { batch_axis = 0, time_axis = 1 },
      inputs = { { "x", f32({ 1, 2, 3, 4, 5, 6, 7, 8 }, { 2, 4 }) }, { "l", i64({ 3, 1 }) } } }
    agrees { name = "tile", op = "Tile", opset = 13,
      inputs = { { "x", i64({ 1, 2, 3 }, { 1, 3 }) }, { "r", i64({ 2, 2 }), const = true } } }
    agrees { name = "unique_axis", op = "Unique", opset = 11, attrs = { axis = 0, sorted = 0 }, outputs = 4,
      inputs = { { "x", f32({ 2, 1, 0, 1, 2, 1, 0, 1 }, { 4, 2 }) } } }
  end)

  it("Det: pivoting, a singular matrix, a batch", function()
    agrees { name = "det", op = "Det", opset = 11, inputs = { { "x", f32({ 0, 2, 1, 1, 3, -1, 4, 0.5, 2, 1, 2, 3, 2, 4, 6, 0, 1, 5 },
      { 2, 3, 3 }) } } }
  end)

  it("losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with i32 labels, weights, ignore_index", function()
    local scores = f32({ 0.1, -1, 2, 0.5, 0.3, 0.2, -0.7, 1.5, 0, 1, 2, 3 }, { 2, 3, 2 })
    local labels = i32({ 0, 2, -1, 1 }, { 2, 2 })
    local w = f32({ 0.5, 2, 1 })
    for _, reduction in ipairs({ "none", "sum", "mean" }) do
      agrees { name = "nll_" .. reduction, op = "NegativeLogLikelihoodLoss", opset = 13,
        attrs = { reduction = reduction, ignore_index = -1 }, inputs = { { "x", scores }, { "t", labels }, { "w", w } } }
      agrees { name = "sce_" .. reduction, op = "SoftmaxCrossEntropyLoss", opset = 13, outputs = 2,
        attrs = { reduction = reduction, ignore_index = -1 }, inputs = { { "x", scores }, { "t", labels } } }
    end
  end)
end)
