-- tests/onnx_rnn_control_spec.lua: ONNX import of recurrent layers (LSTM, GRU, RNN with every attribute) and
-- control flow (If on a runtime scalar, Loop, Scan), and PyTorch's exports of nn.LSTM / nn.GRU / nn.RNN: each
-- model (written by tests/onnx/rnn_control_models.py) compared with ONNX Runtime, eagerly and compiled.
local H = require("helpers")
local ds = require("ds")
local ort = require("onnx.ort")
local one = require("onnx.one_node")

local RTOL, ATOL = 1e-4, 1e-5
local dir = H.tmp_dir()
local made = os.execute(string.format("env -u LD_PRELOAD %s tests/onnx/rnn_control_models.py %q 2>%q/gen.err",
  ort.PYTHON, dir, dir))
assert(made == 0 or made == true, "rnn_control_models.py failed: " .. (io.open(dir .. "/gen.err") and
  H.read_file(dir .. "/gen.err") or ""))

-- each feed list ({{name, tensor}, ...}) through ONNX Runtime and through ds (eager, compiled and, when
-- given, loaded); outputs compared by the model's output order
local function agrees(file, feeds_list, loaded_too)
  local path = dir .. "/" .. file .. ".onnx"
  return (one.agrees_feeds(path, feeds_list, { rtol = RTOL, atol = ATOL,
    loaded = loaded_too and dir .. "/" .. file .. ".ds" or nil }))
end

local function i32(t) return ds.tensor(t, { dtype = "i32" }) end

describe("ONNX recurrent layers against ONNX Runtime", function()
  -- static: the time loop unrolled over T = 4; dynamic: a ds loop over the dim "seq" (two lengths)
  -- layout 1 (batchwise): X (N, T, I) and states (N, D, H)
  local function feeds(extra, N, I, D, H_, T, layout)
    local f = { { "X", layout == 1 and ds.randn(N, T, I) or ds.randn(T, N, I) } }
    for _, e in ipairs(extra) do
      if e == "lens" then f[#f + 1] = { "lens", i32({ T, math.max(T - 2, 1) }) } -- padded: shorter second sequence
      else f[#f + 1] = { e, layout == 1 and ds.randn(N, D, H_) or ds.randn(D, N, H_) } end
    end
    return f
  end
  local CASES = {
    { "lstm_bidirectional", { "lens", "h0", "c0" }, 4, 2, 3 }, -- clip, peepholes, initial states, sequence_lens
    { "lstm_reverse_forget", {}, 4, 1, 3 },                    -- input_forget, HardSigmoid/ScaledTanh alpha, beta
    { "gru_bidirectional", { "lens", "h0" }, 4, 2, 5 },        -- linear_before_reset, Softsign, HardSigmoid
    { "gru_reverse", { "h0" }, 4, 1, 5 },                       -- clip, linear_before_reset 0
    { "rnn_reverse", { "lens" }, 3, 1, 4 },                    -- LeakyRelu alpha, sequence_lens
    { "rnn_bidirectional", { "h0" }, 3, 2, 4 },                -- Relu forward, Softplus backward
  }
  for _, c in ipairs(CASES) do
    local name, extra, I, D, H_, layout = c[1], c[2], c[3], c[4], c[5], c[6]
    it(name .. ": unrolled over a static length, eager and compiled", function()
      ds.manual_seed(1)
      agrees(name .. "_static", { feeds(extra, 2, I, D, H_, 4, layout) })
    end)
    it(name .. ": a loop over a dynamic length, eager, compiled and loaded", function()
      ds.manual_seed(2)
      local two_lengths = { feeds(extra, 2, I, D, H_, 5, layout), feeds(extra, 2, I, D, H_, 3, layout) }
      local m = agrees(name .. "_dynamic", two_lengths, true)
      assert.equal("seq", tostring(m.specs[1].shape[layout == 1 and 2 or 1]))
    end)
  end

  -- ONNX Runtime refuses layout 1: the reference is the layout-0 twin (same weights) on transposed data
  for _, tag in ipairs({ "static", "dynamic" }) do
    it("layout 1 (batchwise) equals its layout-0 twin in ONNX Runtime, " .. tag, function()
      ds.manual_seed(6)
      local m = ds.onnx.load(dir .. "/lstm_batchwise_" .. tag .. ".onnx")
      local cm = ds.compile(m, { freeze = true })
      for _, T in ipairs(tag == "static" and { 4 } or { 5, 2 }) do
        local x, h0, c0 = ds.randn(2, T, 4), ds.randn(2, 2, 3), ds.randn(2, 2, 3)
        local lens = i32({ math.max(T - 1, 1), T })
        local ref = ort.run({ { model = dir .. "/lstm_batchwise_twin_" .. tag .. ".onnx", feeds = { {
          X = x:transpose(1, 2):contiguous(), lens = lens, h0 = h0:transpose(1, 2):contiguous(),
          c0 = c0:transpose(1, 2):contiguous() } } } })[1]
        assert(not ref.error, ref.error)
        local want = ref.outputs[1]
        for _, got in ipairs({ { m(x, lens, h0, c0) }, { cm(x, lens, h0, c0) } }) do
          H.close(got[1], want.Y:permute(3, 1, 2, 4), RTOL, ATOL) -- (T, D, N, H) -> (N, T, D, H)
          assert.same({ 2, T, 2, 3 }, got[1].shape)
          H.close(got[2], want.Y_h:transpose(1, 2), RTOL, ATOL)
          H.close(got[3], want.Y_c:transpose(1, 2), RTOL, ATOL)
        end
      end
    end)
  end

  it("an activation function ONNX's layers do not define is refused by name", function()
    local ok, err = pcall(ds.onnx.load, dir .. "/lstm_unknown_activation.onnx")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("LSTM: the activation function Gelu is not supported", 1, true), err)
  end)
end)

describe("PyTorch's exports of nn.LSTM, nn.GRU and nn.RNN (dynamic batch and sequence)", function()
  for _, opset in ipairs({ 13, 17 }) do
    for _, kind in ipairs({ "lstm", "gru", "rnn" }) do
      it(string.format("%s at opset %d agrees with ONNX Runtime eagerly, compiled and loaded", kind, opset), function()
        ds.manual_seed(opset)
        -- lstm is batch_first (batch, seq, 5); gru and rnn take (seq, batch, 5)
        local m = agrees(string.format("torch_%s%d", kind, opset),
          { { { "x", ds.randn(2, 6, 5) } }, { { "x", ds.randn(3, 1, 5) } }, { { "x", ds.randn(1, 4, 5) } } }, true)
        local shape = m.specs[1].shape
        assert.equal("string", type(tostring(shape[1])))
        assert.is_not.equal("number", type(shape[1]))
        assert.is_not.equal("number", type(shape[2]))
      end)
    end
  end
end)

describe("ONNX control flow against ONNX Runtime", function()
  it("If on a runtime scalar: both branches traced (ds.cond), outer values captured", function()
    ds.manual_seed(3)
    local x = ds.randn(4, 3)
    agrees("if_runtime", { { { "x", x }, { "c", ds.tensor(true) } }, { { "x", x }, { "c", ds.tensor(false) } },
      { { "x", ds.randn(2, 3) }, { "c", ds.tensor(false) } } }, true)
  end)

  it("Loop whose body computes its condition (ds.while_loop)", function()
    local x = ds.tensor({ 0.5, 1, 0.25 })
    agrees("loop_while", { { { "x", x }, { "c", ds.tensor(true) }, { "limit", ds.tensor(20.0) } },
      { { "x", x }, { "c", ds.tensor(false) }, { "limit", ds.tensor(20.0) } },
      { { "x", x }, { "c", ds.tensor(true) }, { "limit", ds.tensor(1000.0) } } }, true)
  end)

  it("Loop over a dynamic dim with a scan output (ds.fori_loop, rows stacked)", function()
    ds.manual_seed(4)
    agrees("loop_rows", { { { "x", ds.randn(5, 3) }, { "acc0", ds.randn(3) } },
      { { "x", ds.randn(2, 3) }, { "acc0", ds.randn(3) } } }, true)
  end)

  it("Scan with scan axes and directions, unrolled and as a loop over a dynamic dim", function()
    ds.manual_seed(5)
    agrees("scan_axes_static", { { { "s0", ds.randn(2) }, { "xa", ds.randn(2, 5) }, { "xb", ds.randn(5, 2) } } })
    agrees("scan_axes_dynamic", { { { "s0", ds.randn(2) }, { "xa", ds.randn(2, 5) }, { "xb", ds.randn(5, 2) } },
      { { "s0", ds.randn(2) }, { "xa", ds.randn(2, 2) }, { "xb", ds.randn(2, 2) } } }, true)
  end)

  it("sequence and optional ops on sequences known at import time, SequenceMap", function()
    ds.manual_seed(7)
    agrees("sequences", { { { "x", ds.randn(3, 4) }, { "y", ds.randn(4) } } }, true)
  end)

  it("a Loop with a constant trip count growing a sequence (unrolled)", function()
    agrees("loop_sequence", { { { "x", ds.randn(5) } } }, true)
  end)
end)
