-- examples/onnx_bert.lua: the documents' workflow with ONNX: the BERT-style sentiment classifier exported to
-- ONNX, checked (onnx.checker, shape inference), then N predictions in ONNX Runtime and in ds (eager, compiled,
-- loaded), with the totals and the largest difference from ds. Needs `make onnx` (protobuf-c, ONNX Runtime).
-- usage: luajit examples/onnx_bert.lua [--n 1000] [--out DIR]
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;./tests/?.lua;" .. package.path
local ds = require("ds")
local ort = require("onnx.ort")
local bert_ex = require("bert_sentiment")

local n, out = 1000, "out/onnx_bert"
local i = 1
while i <= #arg do
  if arg[i] == "--n" then n = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--out" then out = arg[i + 1]; i = i + 2
  else error("unknown argument " .. arg[i]) end
end
os.execute("mkdir -p " .. out)

ds.manual_seed(22)
local model = bert_ex.Bert(bert_ex.CFG)
model:eval()
local specs = { ds.spec({ 1, bert_ex.CFG.max_len }, "i64", "ids"), ds.spec({ 1, bert_ex.CFG.max_len }, "f32", "mask") }
local compiled = ds.compile(model, specs)
local path = out .. "/bert.onnx"
ds.onnx.export(compiled, path)
local verdict = ort.check({ path })[path]
print("exported " .. path .. "; onnx.checker (full) and shape inference: " .. tostring(verdict))
assert(verdict == "ok", verdict)

local inputs, feeds = {}, {}
for k = 1, n do
  local ids, mask = bert_ex.encode(bert_ex.TEXTS[(k - 1) % #bert_ex.TEXTS + 1], true)
  inputs[k] = { ids, mask }
  feeds[k] = { ids = ids, mask = mask }
end
local function predict_all(fn)
  local t0 = ds.clock()
  local probs = {}
  for k, inp in ipairs(inputs) do probs[k] = fn(inp[1], inp[2]) end
  return ds.clock() - t0, probs
end
local eager_s, eager = ds.no_grad(function() return predict_all(function(a, b) return model(a, b) end) end)
local comp_s, comp = predict_all(compiled)
ds.save(compiled, out .. "/bert")
local loaded = ds.load(out .. "/bert")
local load_s, load = predict_all(loaded)
local r = ort.run({ { model = path, feeds = feeds, threads = 1, optimization = "all", warmup = 1 } })[1]
assert(not r.error, r.error)
local maxdiff, agree = 0, 0
for k = 1, n do
  local o = r.outputs[k][r.names[1]]
  maxdiff = math.max(maxdiff, (o - comp[k]):abs():max():item())
  if o:argmax(-1):item() == comp[k]:argmax(-1):item() then agree = agree + 1 end
  assert(eager[k]:eq(comp[k]):all():item() and comp[k]:eq(load[k]):all():item(), "ds eager/compiled/loaded differ at " .. k)
end
print(string.format("%d predictions, padded to %d; ONNX Runtime agrees on %d labels, max |p_ort - p_ds| = %.2g",
  n, bert_ex.CFG.max_len, agree, maxdiff))
print(string.format("ds eager          total %.3f s", eager_s))
print(string.format("ds compiled       total %.3f s", comp_s))
print(string.format("ds loaded         total %.3f s", load_s))
print(string.format("ONNX Runtime (1 thread, optimization all) total %.3f s", r.seconds))
