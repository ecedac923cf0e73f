-- bench/call_overhead.lua: where a compiled call's time goes outside its kernel steps (issues 27 and 31). For
-- compiled frozen models (PyTorch's exports of bench/torch_exports.py through ds.onnx.load; ds's LeNet-5 in f32,
-- {dtype = "bf16"} and ds.quantize'd int8) at batch 1 and 64, 1 thread: the whole call (wall and os.clock CPU,
-- best and median of rounds), the plan's C steps run directly (ds_plan_run_range over the bound plan: the C
-- runtime without the Lua wrapper), and the sum of cg:profile's steps (the kernels alone).
-- usage (repo root): luajit bench/call_overhead.lua [--n 200] [--rounds 9] [--only NAME] [--smoke]
package.path = "./bench/?.lua;./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")
local C = require("ds.ffi").C

local args = { n = 200, rounds = 9, smoke = false }
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--n" then args.n = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--rounds" then args.rounds = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--only" then args.only = arg[i + 1]; i = i + 1
  elseif a == "--smoke" then args.smoke = true
  else error("call_overhead: unknown argument " .. a, 0) end
  i = i + 1
end
if args.smoke then args.n, args.rounds = 4, 2 end
ds.set_num_threads(1)

-- best and median of `rounds` rounds, each the mean per call (us) of n calls: wall and CPU
local function per_call(fn, n, rounds)
  local wall, cpu = {}, {}
  for r = 1, rounds do
    local t0, c0 = ds.clock(), os.clock()
    for _ = 1, n do fn() end
    wall[r] = (ds.clock() - t0) / n * 1e6
    cpu[r] = (os.clock() - c0) / n * 1e6
  end
  local bw, bc = math.huge, math.huge
  for r = 1, rounds do bw = math.min(bw, wall[r]); bc = math.min(bc, cpu[r]) end
  return bw, stats.median(wall), bc, stats.median(cpu)
end

local rows = {}
local function measure(label, cg, input)
  if args.only and not label:find(args.only, 1, true) then return end
  collectgarbage("collect") -- the models measured before (dropped) are not swept in this one's rounds
  -- calls scaled so a round takes a few ms whatever the model
  for _ = 1, 5 do cg(input) end
  local t0 = ds.clock()
  cg(input)
  local one = ds.clock() - t0
  local n = math.max(2, math.min(args.n, math.floor(0.02 / math.max(one, 1e-6))))
  if args.smoke then n = 2 end
  local bw, mw, bc, mc = per_call(function() cg(input) end, n, args.rounds)
  -- the same with the collector stopped (its work on the calls' garbage left out; collected after)
  collectgarbage("collect"); collectgarbage("stop")
  local sw = per_call(function() cg(input) end, n, args.rounds)
  collectgarbage("restart"); collectgarbage("collect")
  -- the C runtime alone: the last call's plan, still bound to its inputs and outputs
  cg(input)
  local p = cg._last_plan
  local plan, nsteps = p.plan, C.ds_plan_num_steps(p.plan)
  local single = #p.segments == 1 and not p.segments[1].lua
  local pw = single and per_call(function() C.ds_plan_run_range(plan, 0, nsteps) end, n, args.rounds) or 0 / 0
  -- the kernels alone (best of the rounds: cg:profile sums each step over its runs)
  local ksum = math.huge
  for _ = 1, math.max(3, math.floor(args.rounds / 3)) do
    local _, total = cg:profile(n, input)
    ksum = math.min(ksum, total * 1e3)
  end
  rows[#rows + 1] = { label, nsteps, bw, mw, bc, mc, pw, ksum, sw }
  io.stderr:write(string.format("call_overhead: %s done\n", label))
end

local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
assert(os.execute("/usr/bin/python3 bench/torch_exports.py " .. dir .. " >/dev/null 2>&1") == 0,
  "bench/torch_exports.py failed")
ds.manual_seed(1)
local function frozen(file) return ds.compile(ds.onnx.load(dir .. "/" .. file .. ".onnx"), { freeze = true }) end
for _, b in ipairs({ 1, 64 }) do
  measure("torch LeNet-5 b" .. b, frozen("lenet"), ds.rand(b, 1, 28, 28))
  measure("torch MobileNet b" .. b, frozen("mobilenet"), ds.rand(b, 3, 96, 96))
  measure("torch keyword head b" .. b, frozen("keyword_head"), ds.randn(b, 24, 96))
end
do -- the BERT-style classifier at a real length (16 tokens), batch 1
  local bert = frozen("bert")
  local ids, mask = ds.randint(0, 1000, { 1, 16 }, { dtype = "i64" }), ds.ones(1, 16)
  local cg = setmetatable({}, { __index = bert, __call = function(_, x) return bert(x[1], x[2]) end })
  cg.profile = function(_, n, x) return bert:profile(n, x[1], x[2]) end
  measure("torch BERT len 16 b1", cg, { ids, mask })
end
os.execute("rm -rf " .. dir)

local lenet = dofile("examples/lenet_fashion_mnist.lua")
ds.manual_seed(24)
local net = lenet.LeNet()
net:eval()
for _, b in ipairs({ 1, 64 }) do
  local specs = { ds.spec({ b, 1, 28, 28 }) }
  local x = ds.rand(b, 1, 28, 28)
  measure("ds LeNet-5 f32 b" .. b, ds.compile(net, specs, { freeze = true }), x)
  measure("ds LeNet-5 bf16 b" .. b, ds.compile(net, specs, { freeze = true, dtype = "bf16" }), x)
  measure("ds LeNet-5 int8 b" .. b, ds.quantize(net, { ops = { "linear", "conv2d" }, specs = specs }), x)
end

print(string.format("1 thread, isa %s; us per call: the whole call (wall best/median, CPU best/median; no GC: wall best "
  .. "with the collector stopped), the plan's C steps run directly (wall best), the sum of cg:profile's steps (best); "
  .. "wrapper = whole - C plan, over = whole - kernels (best of each; indicative)", ds.info().isa))
print(string.format("%-24s %5s %17s %17s %9s %9s %9s %8s %8s %6s", "model", "steps", "wall best/med", "cpu best/med",
  "no GC", "C plan", "kernels", "wrapper", "over", "over%"))
for _, r in ipairs(rows) do
  print(string.format("%-24s %5d %8.1f/%8.1f %8.1f/%8.1f %9.1f %9.1f %9.1f %8.1f %8.1f %5.0f%%", r[1], r[2], r[3], r[4],
    r[5], r[6], r[9], r[7], r[8], r[3] - r[7], r[3] - r[8], 100 * (r[3] - r[8]) / r[3]))
end
