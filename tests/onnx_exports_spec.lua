-- tests/onnx_exports_spec.lua: real exports imported by ds.onnx.load: PyTorch models (torch.onnx.export, opsets
-- 13/14 and 17, dynamic batch and sequence dims) and hand-built graphs in other converters' style, generated at
-- test time by tests/onnx/gen_export_models.py; each runs eagerly, compiled (freeze) and after ds.save/ds.load
-- on two input sizes and must agree with ONNX Runtime and with PyTorch (rtol 1e-4, atol 1e-5; integers exact).
local ds = require("ds")
local H = require("helpers")
local ort = require("onnx.ort")
local conformance = require("onnx.conformance") -- differs(): dtype, shape, rtol 1e-4 / atol 1e-5, NaN, integers exact
local cjson = require("cjson")

local GENERATOR = "tests/onnx/gen_export_models.py"
local UNSANITIZED = "env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS " -- the references run without ASan

local function tensor_of(j)
  if #j.shape == 0 then return ds.tensor(j.data[1], { dtype = j.dtype }) end
  return ds.tensor(j.data, { dtype = j.dtype }):reshape(j.shape)
end

-- generates the models into dir: the manifest's model list, or nil and the generator's output
local function generate(dir)
  local log = dir .. "/generate.log"
  local ok = os.execute(string.format(UNSANITIZED .. "timeout 300 %s %q %q > %q 2>&1", ort.PYTHON, GENERATOR, dir, log))
  if not (ok == 0 or ok == true) then return nil, H.read_file(log):sub(-3000) end
  return cjson.decode(H.read_file(dir .. "/manifest.json")).models
end

-- ONNX Runtime's outputs of every model on its feeds, in one run: {name = {outputs per feed} | {error = msg}}
local function reference_outputs(dir, models)
  local runs = {}
  for i, m in ipairs(models) do
    runs[i] = { model = dir .. "/" .. m.file, feeds = {} }
    for k, feed in ipairs(m.feeds) do
      local f = {}
      for _, j in ipairs(feed.inputs) do f[j.name] = tensor_of(j) end
      runs[i].feeds[k] = f
    end
  end
  local res, by_name = ort.run(runs), {}
  for i, m in ipairs(models) do
    local r = res[i]
    if r.error then by_name[m.name] = { error = r.error }
    else
      by_name[m.name] = {}
      for k, outs in ipairs(r.outputs) do
        by_name[m.name][k] = {}
        for n, name in ipairs(r.names) do by_name[m.name][k][n] = outs[name] end
      end
    end
  end
  return by_name
end

-- the dims of input k that differ between the model's feeds (they must stay dynamic in ds)
local function varying_dims(m, k)
  local a, b, dims = m.feeds[1].inputs[k].shape, m.feeds[2].inputs[k].shape, {}
  for d = 1, #a do if a[d] ~= b[d] then dims[#dims + 1] = d end end
  return dims
end

-- g's inputs are the manifest's, and every dim that varies between the feeds is symbolic in g (checked on a
-- ds.Graph; a model specialized on input values traces one graph per value, on its first call)
local function assert_dynamic(m, g)
  if not g.values then return end
  for k, j in ipairs(m.feeds[1].inputs) do
    assert.equal(j.name, g.specs[k].name)
    for _, d in ipairs(varying_dims(m, k)) do
      local size = g.specs[k].shape[d]
      assert(type(size) ~= "number", j.name .. " dim " .. d .. " is fixed at " .. tostring(size) .. " in ds")
    end
  end
end

-- appends to failures what differs between outs and expected (count, dtype, shape, values)
local function disagreements(failures, label, outs, expected)
  if #outs ~= #expected then
    failures[#failures + 1] = string.format("%s: %d outputs, expected %d", label, #outs, #expected)
  end
  for n, e in ipairs(expected) do
    local d = conformance.differs(outs[n], e)
    if d then failures[#failures + 1] = string.format("%s: output %d: %s", label, n, d) end
  end
end

local dir = H.tmp_dir()
local models, gen_error = generate(dir)
local reference, ort_error
if models then
  local ok, res = pcall(reference_outputs, dir, models)
  if ok then reference = res else ort_error = tostring(res) end
end

describe("real exports (PyTorch and other converters' style) in ds.onnx.load", function()
  teardown(function() os.execute("rm -rf " .. dir) end)

  it("the generator writes the models and ONNX Runtime runs them", function()
    assert(models, "gen_export_models.py failed:\n" .. tostring(gen_error))
    assert(reference, "ONNX Runtime: " .. tostring(ort_error))
    assert(#models >= 25, "only " .. #models .. " models")
    for _, m in ipairs(models) do assert(not reference[m.name].error, m.name .. ": " .. tostring(reference[m.name].error)) end
  end)

  for _, m in ipairs(models or {}) do
    local refs = m.source == "torch" and "ONNX Runtime and PyTorch" or "ONNX Runtime"
    it(m.name .. " loads; eager, compiled and loaded agree with " .. refs .. " on two sizes", function()
      local want = assert(reference and reference[m.name], "no ONNX Runtime reference")
      assert(not want.error, "ONNX Runtime: " .. tostring(want.error))
      local g = ds.onnx.load(dir .. "/" .. m.file)
      assert_dynamic(m, g)
      local compiled = ds.compile(g, { freeze = true })
      local saved = dir .. "/" .. m.name .. ".ds"
      assert(os.execute("mkdir -p " .. saved) == 0)
      ds.save(compiled, saved .. "/m")
      local loaded = ds.load(saved .. "/m")
      local failures = {}
      for k, feed in ipairs(m.feeds) do
        local ins = {}
        for i, j in ipairs(feed.inputs) do ins[i] = tensor_of(j) end
        local torch_outs
        if feed.torch then
          torch_outs = {}
          for n, j in ipairs(feed.torch) do torch_outs[n] = tensor_of(j) end
        end
        for _, run in ipairs({ { "eager", g }, { "compiled", compiled }, { "loaded", loaded } }) do
          local label = string.format("%s (%s)", run[1], table.concat(feed.inputs[1].shape, "x"))
          local ok, outs = pcall(function() return { run[2](unpack(ins)) } end)
          if not ok then failures[#failures + 1] = label .. ": " .. tostring(outs)
          else
            disagreements(failures, label .. " vs ONNX Runtime", outs, want[k])
            if torch_outs then disagreements(failures, label .. " vs PyTorch", outs, torch_outs) end
          end
        end
      end
      assert(#failures == 0, #failures .. " disagreements:\n" .. table.concat(failures, "\n"))
    end)
  end
end)
