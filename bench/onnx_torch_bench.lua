-- bench/onnx_torch_bench.lua: models as PyTorch exports them (bench/torch_exports.py), imported by ds.onnx.load and
-- compiled frozen (default passes, and with rewrite = "all": fused attention, GELU, LayerNorm, Conv+BN) against
-- ONNX Runtime (optimization "all", 1 and 2 intra-op threads), same machine, same run: BERT-style classifier
-- padded to 128 and at real lengths (8-21 tokens), LeNet-5 at batch 1 and 256, a MobileNet-style CNN at batch 1,
-- a three-Gemm keyword head at batch 1. Prints per-call milliseconds (best of 3 passes over N calls) and ratios.
-- usage: make bench-onnx   (or luajit bench/onnx_torch_bench.lua [N])
package.path = "./lua/?.lua;./lua/?/init.lua;./tests/?.lua;./bench/?.lua;" .. package.path
local ds = require("ds")
local timing = require("onnx_timing")

local N = tonumber(arg[1]) or 200
local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
assert(os.execute("/usr/bin/python3 bench/torch_exports.py " .. dir .. " >/dev/null 2>&1") == 0,
  "bench/torch_exports.py failed")

local ds_ms, ort_ms = timing.ds_ms, timing.ort_ms

local rows = {}
local function bench(label, file, names, inputs)
  local path = dir .. "/" .. file .. ".onnx"
  local g = ds.onnx.load(path)
  local frozen = ds.compile(g, { freeze = true })
  local fused = ds.compile(g, { freeze = true, rewrite = "all" })
  rows[#rows + 1] = { label, ds_ms(frozen, inputs), ds_ms(fused, inputs), ort_ms(path, names, inputs, 1),
    ort_ms(path, names, inputs, 2) }
  io.stderr:write("bench: " .. label .. " done\n")
end

ds.manual_seed(1)
local padded, real = {}, {}
for k = 1, N do
  local len = 8 + (k - 1) % 14
  local ids = ds.randint(0, 1000, { 1, 128 }, { dtype = "i64" })
  local mask = ds.cat({ ds.ones(1, len), ds.zeros(1, 128 - len) }, 2)
  padded[k] = { ids, mask }
  real[k] = { ids:narrow(2, 1, len):contiguous(), ds.ones(1, len) }
end
bench("BERT padded 128", "bert", { "ids", "mask" }, padded)
bench("BERT real length", "bert", { "ids", "mask" }, real)
local one, many = {}, {}
for k = 1, N do one[k] = { ds.rand(1, 1, 28, 28) } end
for k = 1, math.max(5, math.floor(N / 20)) do many[k] = { ds.rand(256, 1, 28, 28) } end
bench("LeNet-5 batch 1", "lenet", { "image" }, one)
bench("LeNet-5 batch 256", "lenet", { "image" }, many)
local mobile, kws = {}, {}
for k = 1, N do mobile[k] = { ds.rand(1, 3, 96, 96) }; kws[k] = { ds.randn(1, 24, 96) } end
bench("MobileNet batch 1", "mobilenet", { "image" }, mobile)
bench("keyword head batch 1", "keyword_head", { "feats" }, kws)

local info = ds.info()
print(string.format("ds: isa %s, %d threads; ONNX Runtime 1.30.0; PyTorch exports (opset 14); starved regions %d, "
  .. "holds on one thread %d", info.isa, ds.get_num_threads(), info.starved_regions, info.starved_holds))
print(string.format("%-22s %10s %12s %12s %12s %9s", "workload (ms/call)", "ds frozen", "ds +rewrite", "ORT 1 thr",
  "ORT 2 thr", "ds/ORT"))
for _, r in ipairs(rows) do
  print(string.format("%-22s %10.3f %12.3f %12.3f %12.3f %9.2f", r[1], r[2], r[3], r[4], r[5],
    math.min(r[2], r[3]) / math.min(r[4], r[5])))
end
os.execute("rm -rf " .. dir)
