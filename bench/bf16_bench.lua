-- bench/bf16_bench.lua: bf16 compute (issue 31). The bf16 GEMM (M = 128, K = N = 1024: matmul_bf16 packing a and
-- b on each call, and x @ W compiled {dtype = "bf16"} with W frozen, so packed once) in GFLOP/s against this
-- host's bf16 peak (bench/peak_bf16.c) and ds's f32 matmul; the
-- BERT-style classifier (examples/bert_sentiment.lua, padded to 128, batch 1) compiled frozen in f32 and with
-- {dtype = "bf16"}: per-prediction times, argmax agreement and max |dprob| of bf16 against f32 on the example's
-- evaluation texts and on random inputs (the inputs of bench/bert_bench.lua); LeNet-5
-- (examples/lenet_fashion_mnist.lua, batch 64) likewise, with its two convolutions timed step by step.
-- usage (repo root): luajit bench/bf16_bench.lua [--threads 2] [--n 200] [--reps 50] [--smoke]
package.path = "./bench/?.lua;./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")
local bert = dofile("examples/bert_sentiment.lua")

local args = { threads = 2, n = 200, reps = 50, smoke = false }
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--threads" then args.threads = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--n" then args.n = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--reps" then args.reps = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--smoke" then args.smoke = true
  else error("bf16_bench: unknown argument " .. a, 0) end
  i = i + 1
end
if args.smoke then args.n, args.reps = 4, 2 end
ds.set_num_threads(args.threads)
local path = ds.info().bf16_path

-- ---- the GEMM against the peak ----
local peak_probe = os.getenv("PEAK_BF16") or "build/peak_bf16"
-- the best of 3 probe runs, as the GEMM below is the best of 5 rounds
local peak_g
for _ = 1, 3 do
  local peak = stats.json_of(peak_probe .. " " .. args.threads .. (args.smoke and " 1000000" or ""))
  if peak and type(peak.bf16) == "number" then peak_g = math.max(peak_g or 0, peak.bf16) end
end
local M, K, N = 128, 1024, 1024
ds.manual_seed(1)
local a, b = ds.randn(M, K):astype("bf16"), ds.randn(K, N):astype("bf16")
local a32, b32 = ds.randn(M, K), ds.randn(K, N)
-- the rate of the best of 5 rounds of --reps calls
local function gflops(fn)
  return 2 * M * N * K * args.reps / stats.best_round_s(fn, args.reps, 5) / 1e9
end
local g_bf16 = gflops(function() return ds.matmul_bf16(a, b) end)
-- x @ W with W a frozen constant, compiled {dtype = "bf16"}: W cast and packed once, x cast and packed per call
local W = b:astype("f32")
local prod = ds.compile(function(x) return x:matmul(W) end, { ds.spec({ M, K }) }, { dtype = "bf16", freeze = true })
local x32 = a:astype("f32")
local g_packed = gflops(function() return prod(x32) end)
local g_f32 = gflops(function() return a32:matmul(b32) end)
print(string.format("bf16 GEMM path %s, %d threads, M=%d K=%d N=%d", path, args.threads, M, K, N))
print(string.format("  bf16 peak (peak_bf16)   %s GFLOP/s", peak_g and string.format("%.1f", peak_g) or "n/a"))
print(string.format("  matmul_bf16             %.1f GFLOP/s%s", g_bf16,
  peak_g and string.format("  (%.0f%% of the bf16 peak)", 100 * g_bf16 / peak_g) or ""))
print(string.format("  compiled, W prepacked   %.1f GFLOP/s%s", g_packed,
  peak_g and string.format("  (%.0f%% of the bf16 peak)", 100 * g_packed / peak_g) or ""))
print(string.format("  matmul f32              %.1f GFLOP/s", g_f32))

-- ---- the BERT-style classifier: f32 vs bf16, compiled frozen ----
local T = bert.CFG.max_len
ds.manual_seed(22)
local model = bert.Bert(bert.CFG)
model:eval()
local specs = { ds.spec({ 1, T }, "i64", "ids"), ds.spec({ 1, T }, "f32", "mask") }
local c32 = ds.compile(model, specs, { freeze = true })
local c16 = ds.compile(model, specs, { freeze = true, dtype = "bf16" })

local texts, random = {}, {}
for k, t in ipairs(bert.TEXTS) do texts[k] = { bert.encode(t, true) } end
ds.manual_seed(23)
for k = 1, args.n do
  local len = 8 + (k * 7) % 14
  local ids = (ds.rand(1, T) * 55):astype("i64") + 5
  local mask = ds.zeros(1, T)
  mask:narrow(2, 1, len):fill_(1)
  ids:narrow(2, len + 1, T - len):fill_(1)
  random[k] = { ids, mask }
end

local function ms_per(fn, data)
  for k = 1, math.min(5, #data) do fn(data[k][1], data[k][2]) end
  local t0 = ds.clock()
  for _, d in ipairs(data) do fn(d[1], d[2]):argmax(-1) end
  return (ds.clock() - t0) / #data * 1e3
end
local ta, _, td = stats.agreement(c32, c16, texts)
local ra, _, rd = stats.agreement(c32, c16, random)
print(string.format("BERT-style classifier, padded to %d, batch 1, %d threads", T, args.threads))
print(string.format("  accuracy of bf16 against f32: argmax agreement %d/%d on the evaluation texts, %d/%d on random "
  .. "inputs; max |dprob| %.3g (texts), %.3g (random)", ta, #texts, ra, #random, td, rd))
local m32, m16 = ms_per(c32, random), ms_per(c16, random)
print(string.format("  compiled frozen f32     %.3f ms per prediction", m32))
print(string.format("  compiled frozen bf16    %.3f ms per prediction  (%.2fx f32)", m16, m16 / m32))

-- ---- LeNet-5 (examples/lenet_fashion_mnist.lua, untrained, Glorot weights): f32 vs bf16, batch 64 ----
local lenet = dofile("examples/lenet_fashion_mnist.lua")
ds.manual_seed(24)
local net = lenet.LeNet()
net:eval()
local lspecs = { ds.spec({ 64, 1, 28, 28 }) }
local l32 = ds.compile(net, lspecs, { freeze = true })
local l16 = ds.compile(net, lspecs, { freeze = true, dtype = "bf16" })
local batches = {}
for k = 1, math.max(2, math.floor(args.n / 20)) do batches[k] = { ds.rand(64, 1, 28, 28) } end
local agree, total, dmax = stats.agreement(l32, l16, batches)
local function ms_batch(fn)
  fn(batches[1][1])
  local t0 = ds.clock()
  for _, bt in ipairs(batches) do fn(bt[1]) end
  return (ds.clock() - t0) / #batches * 1e3
end
print(string.format("LeNet-5, batch 64, %d threads", args.threads))
print(string.format("  accuracy of bf16 against f32: argmax agreement %d/%d on random images; max |dlogit| %.3g",
  agree, total, dmax))
local b32, b16 = ms_batch(l32), ms_batch(l16)
print(string.format("  compiled frozen f32     %.3f ms per batch", b32))
print(string.format("  compiled frozen bf16    %.3f ms per batch  (%.2fx f32)", b16, b16 / b32))
-- the two convolutions per batch (cg:profile's steps, in plan order), f32 beside bf16
local function conv_steps(cg)
  local rows, out = cg:profile(math.max(2, args.reps), batches[1][1]), {}
  for _, r in ipairs(rows) do if r.op:find("conv2d", 1, true) then out[#out + 1] = r end end
  table.sort(out, function(x, y) return x.step < y.step end)
  return out
end
local s32, s16 = conv_steps(l32), conv_steps(l16)
for k = 1, math.min(#s32, #s16) do
  print(string.format("  conv%d: f32 %.3f ms, bf16 %.3f ms per batch  (%.2fx)", k, s32[k].ms, s16[k].ms,
    s16[k].ms / s32[k].ms))
end
