-- bench/onnx_bench.lua: ONNX Runtime (optimization "all", 1 and 2 intra-op threads) against ds compiled, same
-- machine, same run: the BERT-style classifier (padded to 128 and real length, single predictions) and LeNet-5
-- inference (batch 256). ds compiles with freeze = true (weights as constants, as ds.load does and as ONNX
-- Runtime treats initializers). Prints one table of per-call milliseconds (median of REPS timed passes over N calls).
-- usage: make bench-onnx   (or luajit bench/onnx_bench.lua [N])
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;./tests/?.lua;./bench/?.lua;" .. package.path
local ds = require("ds")
local timing = require("onnx_timing")
local bert_ex = require("bert_sentiment")
local lenet_ex = require("lenet_fashion_mnist")

local N = tonumber(arg[1]) or 200
local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)

local ds_ms, ort_ms = timing.ds_ms, timing.ort_ms

local rows = {}
local function bench(label, g, inputs)
  local path = dir .. "/" .. label:gsub("%W", "_") .. ".onnx"
  ds.onnx.export(g, path)
  local names = {}
  for i, s in ipairs(g.specs) do names[i] = s.name end
  local cg = ds.compile(g, { freeze = true })
  rows[#rows + 1] = { label, ds_ms(cg, inputs), ort_ms(path, names, inputs, 1), ort_ms(path, names, inputs, 2) }
end

ds.manual_seed(22)
local bert = bert_ex.Bert(bert_ex.CFG)
bert:eval()
local padded, real = {}, {}
for k = 1, N do
  local t = bert_ex.TEXTS[(k - 1) % #bert_ex.TEXTS + 1]
  padded[k] = { bert_ex.encode(t, true) }
  real[k] = { bert_ex.encode(t, false) }
end
bench("BERT padded 128", ds.trace(bert, { ds.spec({ 1, 128 }, "i64", "ids"), ds.spec({ 1, 128 }, "f32", "mask") }), padded)
bench("BERT real length", ds.trace(bert, { ds.spec({ 1, "seq" }, "i64", "ids"), ds.spec({ 1, "seq" }, "f32", "mask") }), real)
local lenet = lenet_ex.LeNet()
lenet:eval()
local batches = {}
for k = 1, math.max(5, math.floor(N / 20)) do batches[k] = { ds.rand(256, 1, 28, 28) } end
bench("LeNet-5 batch 256", ds.trace(lenet, { ds.spec({ "batch", 1, 28, 28 }, "f32", "image") }), batches)

print(string.format("ds.info: isa %s, threads %d; ONNX Runtime %s", ds.info().isa, ds.get_num_threads(), "1.30.0"))
print(string.format("%-20s %14s %16s %16s %10s", "workload (ms/call)", "ds frozen", "ORT all, 1 thr", "ORT all, 2 thr", "ds/best"))
for _, r in ipairs(rows) do
  print(string.format("%-20s %14.3f %16.3f %16.3f %10.2f", r[1], r[2], r[3], r[4], r[2] / math.min(r[3], r[4])))
end
os.execute("rm -rf " .. dir)
