-- bench/nn_ops_bench.lua: LeNet-5's conv/pool layers at batch 256 (forward, forward+backward), ds vs PyTorch, ms (median).
-- usage: luajit bench/nn_ops_bench.lua [--threads N] [--reps N] [--cpu]   (runs bench/torch/nn_ops.py for the torch column)
-- --cpu times process CPU time instead of wall time (both sides): steadier on a shared machine, meaningful with 1 thread.
package.path = "./bench/?.lua;./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")

local threads, reps, cpu = 2, 15, false
for i = 1, #arg do
  if arg[i] == "--threads" then threads = tonumber(arg[i + 1]) end
  if arg[i] == "--reps" then reps = tonumber(arg[i + 1]) end
  if arg[i] == "--cpu" then cpu = true end
end
local clock = cpu and os.clock or ds.clock
ds.set_num_threads(threads)

local function ms(fn)
  fn()
  local t = {}
  for i = 1, reps do
    local t0 = clock()
    fn()
    t[i] = (clock() - t0) * 1e3
  end
  table.sort(t)
  return t[math.floor((reps + 1) / 2)]
end

ds.manual_seed(0)
local x = ds.randn(256, 1, 28, 28)
local w1, b1 = ds.randn(6, 1, 5, 5):requires_grad_(), ds.randn(6):requires_grad_()
local w2, b2 = ds.randn(16, 6, 5, 5):requires_grad_(), ds.randn(16):requires_grad_()
local p1, h1 = ds.randn(256, 6, 14, 14), ds.randn(256, 6, 28, 28)

local function stack()
  local a = ds.max_pool2d(ds.conv2d(x, w1, b1, { padding = 2 }):relu(), 2)
  return ds.max_pool2d(ds.conv2d(a, w2, b2):relu(), 2)
end

local res, order = {}, {}
local function add(name, v) res[name] = v; order[#order + 1] = name end
ds.no_grad(function()
  add("conv1 fwd", ms(function() return ds.conv2d(x, w1, b1, { padding = 2 }) end))
  add("conv2 fwd", ms(function() return ds.conv2d(p1, w2, b2) end))
  add("max_pool 28->14 fwd", ms(function() return ds.max_pool2d(h1, 2) end))
  add("lenet conv stack fwd", ms(stack))
end)
add("conv2 fwd+bwd", ms(function()
  local p = p1:detach():requires_grad_()
  local y = ds.conv2d(p, w2, b2)
  y:backward(ds.ones_like(y))
end))
add("max_pool 28->14 fwd+bwd", ms(function()
  local h = h1:detach():requires_grad_()
  local y = ds.max_pool2d(h, 2)
  y:backward(ds.ones_like(y))
end))
add("lenet conv stack fwd+bwd", ms(function()
  local y = stack()
  y:backward(ds.ones_like(y))
end))

local torch_cmd = string.format("/usr/bin/python3 bench/torch/nn_ops.py --threads %d --reps %d%s", threads, reps, cpu and " --cpu" or "")
local torch = stats.json_of(torch_cmd) or error("nn_ops bench: " .. torch_cmd .. " printed no JSON result", 0)

local info = ds.info()
print(string.format("LeNet-5 conv/pool layers, batch 256, %d threads, OpenBLAS core %s (median of %d, ms of %s time)", threads,
  info.blas_core, reps, cpu and "CPU" or "wall"))
print(string.format("%-28s %9s %9s %7s", "", "ds", "torch", "ratio"))
for _, name in ipairs(order) do
  print(string.format("%-28s %9.3f %9.3f %7.2f", name, res[name], torch[name], res[name] / torch[name]))
end
