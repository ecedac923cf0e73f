-- tests/onnx_nn_spec.lua: ONNX import of convolutions, pools, normalizations and resampling against ONNX
-- Runtime: torch.nn layers exported by PyTorch at test time (tests/onnx/gen_nn_torch_models.py; dynamic batch,
-- run at another batch size) and one-node models the conformance suite does not cover (N-D, asymmetric and
-- ceil pads, dilations, groups, integer pools, Indices, antialias, axes, ...); eagerly and compiled (freeze).
local H = require("helpers")
local ds = require("ds")
local one = require("onnx.one_node")

local dir = H.tmp_dir()
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

local function randn(shape, seed)
  ds.manual_seed(seed or 1)
  return ds.randn(shape)
end
local function f32(data, shape) return ds.tensor(data, { dtype = "f32" }):reshape(shape or { #data }) end
local function i64(data) return ds.tensor(data, { dtype = "i64" }) end

describe("ONNX import of PyTorch's exports of spatial layers", function()
  local models = {}
  setup(function()
    local cmd = string.format("env -u LD_PRELOAD /usr/bin/python3 tests/onnx/gen_nn_torch_models.py %q 2>/dev/null", dir)
    local p = assert(io.popen(cmd))
    for line in p:lines() do
      local name, opset, dims = line:match("^(%S+) (%d+) (.+)$")
      local shape = { 3 } -- exported at batch 2, run at batch 3 (dynamic batch)
      for d in dims:gmatch("%d+") do shape[#shape + 1] = tonumber(d) end
      models[#models + 1] = { name = name .. "_" .. opset, shape = shape }
    end
    p:close()
  end)

  it("exports every layer at opsets 13 and 17", function() assert.equal(30, #models) end)

  it("agrees with ONNX Runtime on each, eagerly and compiled", function()
    for i, m in ipairs(models) do
      one.agrees_at(dir .. "/" .. m.name .. ".onnx", { { "x", randn(m.shape, i) } }, 1, m.name, 1e-4, 1e-5)
    end
  end)
end)

-- a one-node model of op on input x (dims: dim_params allowed) with constant inputs, checked against ORT
local function check(name, op, opset, attrs, inputs, outputs)
  one.agrees({ name = name, op = op, opset = opset, attrs = attrs, inputs = inputs, outputs = outputs }, dir,
    1e-4, 1e-5)
end

describe("ONNX import of Conv and ConvTranspose", function()
  it("Conv 1-D, 2-D and 3-D with auto_pad, asymmetric pads, groups, dilations and strides", function()
    check("conv1d_same_lower", "Conv", 13, { auto_pad = "SAME_LOWER", strides = { 2 } },
      { { "x", randn({ 2, 4, 11 }) }, { "w", randn({ 6, 4, 4 }, 2), const = true }, { "b", randn({ 6 }, 3), const = true } })
    check("conv2d_asymmetric", "Conv", 13, { pads = { 0, 2, 1, 0 }, strides = { 2, 1 }, dilations = { 1, 2 }, group = 2 },
      { { "x", randn({ 2, 4, 7, 9 }) }, { "w", randn({ 6, 2, 3, 3 }, 2), const = true } })
    check("conv2d_same_upper_dynamic", "Conv", 17, { auto_pad = "SAME_UPPER", strides = { 2, 3 } },
      { { "x", randn({ 3, 2, 8, 7 }), dims = { "n", 2, 8, 7 } }, { "w", randn({ 4, 2, 2, 4 }, 2), const = true } })
    check("conv3d", "Conv", 13, { pads = { 1, 0, 2, 0, 1, 1 }, strides = { 2, 1, 2 }, dilations = { 2, 1, 1 }, group = 2 },
      { { "x", randn({ 2, 4, 7, 5, 6 }) }, { "w", randn({ 4, 2, 2, 3, 2 }, 2), const = true },
        { "b", randn({ 4 }, 3), const = true } })
    check("conv3d_valid", "Conv", 13, { auto_pad = "VALID" },
      { { "x", randn({ 1, 2, 4, 5, 6 }) }, { "w", randn({ 3, 2, 2, 2, 3 }, 2), const = true } })
  end)

  it("ConvTranspose 1-D, 2-D and 3-D with pads, output_padding, output_shape, auto_pad, groups, dilations", function()
    check("convt1d", "ConvTranspose", 13, { strides = { 3 }, pads = { 2, 1 }, output_padding = { 1 } },
      { { "x", randn({ 2, 4, 5 }) }, { "w", randn({ 4, 3, 4 }, 2), const = true }, { "b", randn({ 3 }, 3), const = true } })
    check("convt2d_groups_dilations", "ConvTranspose", 13, { strides = { 2, 3 }, dilations = { 2, 1 }, group = 2,
      pads = { 1, 0, 0, 2 } }, { { "x", randn({ 2, 4, 4, 5 }) }, { "w", randn({ 4, 3, 3, 3 }, 2), const = true } })
    check("convt2d_output_shape", "ConvTranspose", 13, { strides = { 2, 2 }, output_shape = { 10, 9 } },
      { { "x", randn({ 1, 2, 4, 4 }) }, { "w", randn({ 2, 3, 3, 2 }, 2), const = true } })
    check("convt2d_same_lower", "ConvTranspose", 13, { strides = { 2, 2 }, auto_pad = "SAME_LOWER" },
      { { "x", randn({ 1, 2, 3, 4 }) }, { "w", randn({ 2, 2, 3, 3 }, 2), const = true } })
    check("convt3d", "ConvTranspose", 13, { strides = { 2, 1, 2 }, dilations = { 1, 2, 1 }, pads = { 1, 0, 1, 0, 1, 0 },
      output_padding = { 1, 0, 1 }, group = 2 },
      { { "x", randn({ 2, 4, 3, 4, 3 }) }, { "w", randn({ 4, 1, 3, 2, 2 }, 2), const = true },
        { "b", randn({ 2 }, 3), const = true } })
  end)
end)

describe("ONNX import of pooling", function()
  it("MaxPool and AveragePool in 1-D, 2-D and 3-D with ceil_mode, dilations, asymmetric pads", function()
    check("maxpool1d_dilated", "MaxPool", 13, { kernel_shape = { 3 }, dilations = { 2 }, strides = { 2 }, pads = { 2, 1 },
      ceil_mode = 1 }, { { "x", randn({ 2, 3, 12 }) } })
    check("maxpool2d_big_pads", "MaxPool", 13, { kernel_shape = { 3, 2 }, pads = { 2, 0, 1, 1 }, strides = { 1, 2 } },
      { { "x", randn({ 2, 3, 6, 7 }) } })
    check("maxpool3d_ceil", "MaxPool", 13, { kernel_shape = { 2, 3, 2 }, strides = { 2, 2, 2 }, ceil_mode = 1 },
      { { "x", randn({ 1, 2, 5, 6, 7 }) } })
    check("avgpool2d_exclude_pad", "AveragePool", 13, { kernel_shape = { 3, 3 }, pads = { 1, 2, 2, 0 },
      strides = { 2, 2 } }, { { "x", randn({ 2, 3, 7, 8 }) } })
    check("avgpool2d_include_pad_ceil", "AveragePool", 13, { kernel_shape = { 3, 3 }, pads = { 1, 1, 1, 1 },
      strides = { 2, 2 }, ceil_mode = 1, count_include_pad = 1 }, { { "x", randn({ 2, 3, 8, 8 }) } })
    check("avgpool1d_same_upper", "AveragePool", 13, { kernel_shape = { 4 }, auto_pad = "SAME_UPPER", strides = { 3 } },
      { { "x", randn({ 2, 3, 10 }) } })
    check("avgpool3d_dilated", "AveragePool", 19, { kernel_shape = { 2, 2, 2 }, dilations = { 2, 1, 2 },
      pads = { 0, 1, 1, 1, 0, 1 } }, { { "x", randn({ 1, 2, 5, 4, 6 }) } })
  end)

  it("MaxPool keeps integer dtypes", function()
    local x = (randn({ 2, 3, 6, 6 }) * 40 + 100):astype("u8")
    check("maxpool_u8_pads", "MaxPool", 13, { kernel_shape = { 3, 3 }, pads = { 1, 1, 1, 1 }, strides = { 2, 2 } },
      { { "x", x } })
    check("maxpool_u8_1d_dilated", "MaxPool", 13, { kernel_shape = { 2 }, strides = { 2 }, ceil_mode = 1,
      dilations = { 2 } }, { { "x", (randn({ 2, 3, 8 }) * 40 + 100):astype("u8") } })
  end)

  it("MaxPool's Indices in 1-D and 2-D, both storage orders, with explicit padding", function()
    check("maxpool_indices_asymmetric", "MaxPool", 13, { kernel_shape = { 3, 3 }, pads = { 0, 2, 1, 0 },
      strides = { 2, 1 } }, { { "x", randn({ 2, 3, 6, 5 }) } }, 2)
    check("maxpool_indices_column_major", "MaxPool", 13, { kernel_shape = { 2, 3 }, storage_order = 1,
      strides = { 2, 2 }, ceil_mode = 1 }, { { "x", randn({ 2, 2, 5, 7 }) } }, 2)
    check("maxpool_indices_1d", "MaxPool", 13, { kernel_shape = { 3 }, pads = { 1, 1 } }, { { "x", randn({ 2, 2, 9 }) } },
      2)
  end)

  it("LpPool, GlobalLpPool, GlobalMaxPool, MaxUnpool", function()
    check("lppool2d", "LpPool", 13, { kernel_shape = { 2, 3 }, p = 3, pads = { 1, 0, 0, 1 }, strides = { 2, 2 } },
      { { "x", randn({ 2, 3, 6, 7 }) } })
    check("lppool1d_p1", "LpPool", 13, { kernel_shape = { 3 }, p = 1 }, { { "x", randn({ 2, 3, 8 }) } })
    check("globallppool", "GlobalLpPool", 13, { p = 2 }, { { "x", randn({ 2, 3, 4, 5 }) } })
    check("globalmaxpool_3d", "GlobalMaxPool", 13, {}, { { "x", randn({ 2, 3, 4, 2, 3 }) } })
    check("maxunpool", "MaxUnpool", 13, { kernel_shape = { 2, 2 }, strides = { 2, 2 } },
      { { "x", randn({ 1, 2, 2, 3 }) }, { "i", i64({ 0, 3, 5, 9, 10, 15, 24, 27, 29, 33, 42, 46 }):reshape(1, 2, 2, 3) } })
  end)
end)

describe("ONNX import of normalizations", function()
  it("InstanceNormalization, GroupNormalization (opset 18), LpNormalization, LRN, MeanVarianceNormalization",
    function()
      check("instancenorm_3d", "InstanceNormalization", 13, { epsilon = 1e-3 },
        { { "x", randn({ 2, 3, 4, 2, 5 }) }, { "s", randn({ 3 }, 2), const = true }, { "b", randn({ 3 }, 3), const = true } })
      check("groupnorm", "GroupNormalization", 18, { num_groups = 2, epsilon = 1e-4 },
        { { "x", randn({ 2, 6, 3, 4 }) }, { "s", randn({ 2 }, 2), const = true }, { "b", randn({ 2 }, 3), const = true } })
      check("lpnorm_l1", "LpNormalization", 13, { axis = 1, p = 1 }, { { "x", randn({ 3, 4, 5 }) } })
      check("lpnorm_l2", "LpNormalization", 13, { axis = -1, p = 2 }, { { "x", randn({ 3, 4, 5 }) } })
      check("lrn", "LRN", 13, { size = 5, alpha = 1e-2, beta = 0.6, bias = 1.5 }, { { "x", randn({ 2, 7, 3, 3 }) } })
      check("mvn_axes", "MeanVarianceNormalization", 13, { axes = { 1, 3 } }, { { "x", randn({ 2, 3, 4, 5 }) } })
    end)

  it("LayerNormalization's Mean and InvStdDev, and BatchNormalization's per-activation form (opset 7)", function()
    check("layernorm_outputs", "LayerNormalization", 17, { axis = -2, epsilon = 1e-3 },
      { { "x", randn({ 2, 3, 4, 5 }) }, { "s", randn({ 4, 5 }, 2), const = true }, { "b", randn({ 4, 5 }, 3), const = true } },
      3)
    local var = randn({ 3, 2, 2 }, 5):abs() + 0.5
    check("batchnorm_not_spatial", "BatchNormalization", 7, { spatial = 0 },
      { { "x", randn({ 2, 3, 2, 2 }) }, { "s", randn({ 3, 2, 2 }, 2), const = true },
        { "b", randn({ 3, 2, 2 }, 3), const = true }, { "m", randn({ 3, 2, 2 }, 4), const = true },
        { "v", var, const = true } })
  end)

  it("refuses BatchNormalization in training mode", function()
    local path = dir .. "/bn_training.onnx"
    H.write_file(path, one.model_bytes({ op = "BatchNormalization", opset = 15, attrs = { training_mode = 1 },
      inputs = { { "x", randn({ 2, 3, 2 }) }, { "s", randn({ 3 }), const = true }, { "b", randn({ 3 }), const = true },
        { "m", randn({ 3 }), const = true }, { "v", randn({ 3 }):abs(), const = true } } }))
    local ok, err = pcall(ds.onnx.load, path)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("BatchNormalization in training mode is not supported", 1, true))
  end)
end)

describe("ONNX import of Resize, DepthToSpace, SpaceToDepth, GridSample", function()
  local x = randn({ 2, 3, 6, 8 })
  local function scales(list) return { "scales", f32(list), const = true } end
  local function sizes(list) return { "sizes", i64(list), const = true } end
  it("Resize with antialias, axes, keep_aspect_ratio_policy and half_pixel_symmetric (opsets 18, 19)", function()
    check("resize_antialias_linear", "Resize", 18, { mode = "linear", antialias = 1 },
      { { "x", x }, { "" }, scales({ 1, 1, 0.5, 0.3 }) })
    check("resize_antialias_cubic", "Resize", 18, { mode = "cubic", antialias = 1 },
      { { "x", x }, { "" }, { "" }, sizes({ 2, 3, 4, 3 }) })
    check("resize_axes", "Resize", 18, { mode = "linear", axes = { 3, 2 } }, { { "x", x }, { "" }, scales({ 1.5, 0.5 }) })
    check("resize_not_larger", "Resize", 18, { mode = "nearest", axes = { 2, 3 }, keep_aspect_ratio_policy = "not_larger" },
      { { "x", x }, { "" }, { "" }, sizes({ 9, 20 }) })
    check("resize_not_smaller", "Resize", 18, { mode = "cubic", axes = { 2, 3 }, keep_aspect_ratio_policy = "not_smaller" },
      { { "x", x }, { "" }, { "" }, sizes({ 9, 20 }) })
    check("resize_symmetric", "Resize", 19, { mode = "linear", coordinate_transformation_mode = "half_pixel_symmetric" },
      { { "x", x }, { "" }, scales({ 1, 1, 1.7, 0.6 }) })
    check("resize_tf_crop_extrapolation", "Resize", 13, { mode = "linear",
      coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 5.5 },
      { { "x", x }, { "roi", f32({ 0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4 }), const = true }, { "" }, sizes({ 2, 3, 5, 4 }) })
    check("resize_nearest_u8", "Resize", 13, { mode = "nearest", nearest_mode = "ceil" },
      { { "x", (x * 30 + 100):astype("u8") }, { "" }, scales({ 1, 1, 1.5, 0.7 }) })
    check("resize_opset10_linear", "Resize", 10, { mode = "linear" }, { { "x", x }, scales({ 1, 1, 2, 1.5 }) })
    check("resize_dynamic_batch", "Resize", 13, { mode = "cubic" },
      { { "x", x, dims = { "n", 3, 6, 8 } }, { "" }, scales({ 1, 1, 2, 0.5 }) })
  end)

  it("Upsample: scales as an attribute (opset 7) or an input (opset 9)", function()
    check("upsample7_nearest", "Upsample", 7, { mode = "nearest", scales = { floats = { 1, 1, 2, 1.5 } } }, { { "x", x } })
    check("upsample9_linear", "Upsample", 9, { mode = "linear" }, { { "x", x }, scales({ 1, 1, 1.5, 2 }) })
  end)

  it("DepthToSpace (DCR, CRD) and SpaceToDepth", function()
    check("depthtospace_dcr", "DepthToSpace", 13, { blocksize = 2 }, { { "x", randn({ 2, 8, 3, 4 }) } })
    check("depthtospace_crd", "DepthToSpace", 13, { blocksize = 2, mode = "CRD" }, { { "x", randn({ 2, 8, 3, 4 }) } })
    check("spacetodepth", "SpaceToDepth", 13, { blocksize = 3 }, { { "x", randn({ 2, 2, 6, 9 }) } })
  end)

  it("GridSample in every mode and padding mode", function()
    local grid = (randn({ 2, 4, 5, 2 }, 9) * 0.8)
    for _, mode in ipairs { "bilinear", "nearest", "bicubic" } do
      for _, pm in ipairs { "zeros", "border", "reflection" } do
        for _, align in ipairs { 0, 1 } do
          check(string.format("gridsample_%s_%s_%d", mode, pm, align), "GridSample", 16,
            { mode = mode, padding_mode = pm, align_corners = align }, { { "x", randn({ 2, 3, 4, 6 }) }, { "g", grid } })
        end
      end
    end
  end)
end)
