-- tests/onnx_signal_spec.lua: the ONNX signal ops (Hann/Hamming/Blackman windows, DFT, STFT, MelWeightMatrix)
-- imported by ds equal ONNX Runtime's results, eagerly and compiled. (ONNX 1.12's own window cases compute
-- their expected values with pi = 3.1415: tests/onnx/conformance_skip.txt.)
local H = require("helpers")
local ds = require("ds")
local one = require("onnx.one_node")

describe("ONNX signal ops against ONNX Runtime", function()
  local dir = H.tmp_dir()
  local function i64(v) return ds.tensor(v, { dtype = "i64" }) end

  it("windows, periodic and symmetric, of several sizes (the size a graph input or a constant)", function()
    for _, op in ipairs({ "HannWindow", "HammingWindow", "BlackmanWindow" }) do
      for _, periodic in ipairs({ 0, 1 }) do
        for _, n in ipairs({ 1, 7, 16 }) do
          one.agrees({ name = op .. periodic .. "_" .. n, op = op, opset = 17, attrs = { periodic = periodic },
            inputs = { { "size", i64(n) } } }, dir, 1e-6, 1e-6)
          one.agrees({ name = op .. periodic .. "_c" .. n, op = op, opset = 17, attrs = { periodic = periodic,
            output_datatype = 11 }, inputs = { { "size", i64(n), const = true } } }, dir, 1e-6, 1e-6) -- ORT: in f32
        end
      end
    end
  end)

  it("DFT: real and complex, forward and inverse, onesided, dft_length padding and cutting, any axis", function()
    ds.manual_seed(5)
    local real, complex = ds.randn(2, 12, 3, 1), ds.randn(2, 12, 3, 2)
    local cases = {
      { "real_axis1", real, {}, nil }, { "complex_axis1", complex, {}, nil },
      { "inverse", complex, { inverse = 1 }, nil }, { "onesided", real, { onesided = 1 }, nil },
      { "axis2", complex, { axis = 2 }, nil }, { "pad", real, { onesided = 1 }, 16 }, { "cut", complex, {}, 7 },
    }
    for _, c in ipairs(cases) do
      local inputs = { { "x", c[2] } }
      if c[4] then inputs[2] = { "n", i64(c[4]), const = true } end
      one.agrees({ name = "dft_" .. c[1], op = "DFT", opset = 17, attrs = c[3], inputs = inputs }, dir, 1e-4, 1e-5)
    end
  end)

  it("STFT with and without a window, onesided and two-sided", function()
    ds.manual_seed(6)
    local x = ds.randn(2, 64, 1)
    local window = ds.rand(16)
    one.agrees({ name = "stft", op = "STFT", opset = 17, inputs = { { "x", x }, { "step", i64(8), const = true },
      { "" }, { "len", i64(16), const = true } } }, dir, 1e-4, 1e-5)
    one.agrees({ name = "stft_window", op = "STFT", opset = 17, attrs = { onesided = 0 },
      inputs = { { "x", x }, { "step", i64(5), const = true }, { "w", window } } }, dir, 1e-4, 1e-5)
  end)

  it("MelWeightMatrix", function()
    one.agrees({ name = "mel", op = "MelWeightMatrix", opset = 17, inputs = { { "bins", i64(8), const = true },
      { "len", i64(64), const = true }, { "rate", i64(16000), const = true },
      { "lo", ds.tensor(100.0), const = true }, { "hi", ds.tensor(6000.0), const = true } } }, dir, 1e-6, 1e-6)
  end)
end)
