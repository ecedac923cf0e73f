-- bench/lenet_bench.lua: LeNet-5 on Fashion-MNIST, eager ds vs PyTorch (bench/torch/lenet.py) in one run:
-- seconds per training epoch (the loop only), train loss and test accuracy, same recipe and threads.
-- PyTorch also runs in its best configurations here (1 thread; 2 threads with OMP_WAIT_POLICY=PASSIVE).
--   luajit bench/lenet_bench.lua [--threads 2] [--epochs 1] [--limit N]   (from the repo root)
-- As a module: require("lenet_bench")({threads =, epochs =, limit =}) -> results table (see the end).
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")

local PYTHON = "/usr/bin/python3"


local function best_seconds(epochs)
  local best
  for _, e in ipairs(epochs) do best = best and math.min(best, e.seconds) or e.seconds end
  return best
end

-- a PyTorch run: env prefix, thread count
local function torch_run(env, threads, opts)
  local cmd = string.format("%s %s bench/torch/lenet.py --threads %d --epochs %d %s 2>/dev/null", env, PYTHON, threads,
    opts.epochs, opts.limit and ("--limit " .. opts.limit) or "")
  local res = stats.json_of(cmd)
  if not res then return nil end
  res.best_seconds = best_seconds(res.epochs)
  return res
end

local function run(opts)
  opts = opts or {}
  opts.threads, opts.epochs = opts.threads or 2, opts.epochs or 1
  local lenet = dofile("examples/lenet_fashion_mnist.lua")
  local argv = { "--threads", tostring(opts.threads), "--epochs", tostring(opts.epochs), "--quiet" }
  if opts.limit then argv[#argv + 1] = "--limit"; argv[#argv + 1] = tostring(opts.limit) end
  io.stderr:write(string.format("lenet bench: ds, %d threads, %d epoch(s)...\n", opts.threads, opts.epochs))
  local ds_epochs = lenet.main(argv)
  io.stderr:write("lenet bench: ds compiled training steps...\n")
  argv[#argv + 1] = "--compile"
  local compiled_epochs = lenet.main(argv)
  local res = { ds = { epochs = ds_epochs, best_seconds = best_seconds(ds_epochs), threads = opts.threads },
                ds_compiled = { epochs = compiled_epochs, best_seconds = best_seconds(compiled_epochs) },
                torch = {}, blas_core = ds.info().blas_core, coretype_env = os.getenv("OPENBLAS_CORETYPE") }
  local configs = {
    { name = "1 thread", env = "", threads = 1 },
    { name = "2 threads, OMP_WAIT_POLICY=PASSIVE", env = "OMP_WAIT_POLICY=PASSIVE", threads = 2 },
  }
  if opts.threads ~= 1 then
    table.insert(configs, 1, { name = string.format("%d threads", opts.threads), env = "", threads = opts.threads })
  end
  for _, c in ipairs(configs) do
    io.stderr:write("lenet bench: PyTorch, " .. c.name .. "...\n")
    res.torch[c.name] = torch_run(c.env, c.threads, opts) or false
  end
  local best, best_name
  for name, r in pairs(res.torch) do
    if r and (not best or r.best_seconds < best) then best, best_name = r.best_seconds, name end
  end
  res.torch_best_seconds, res.torch_best_config = best, best_name
  return res
end

-- the lines of the comparison table
local function report(res)
  local lines = {}
  local function out(fmt, ...) lines[#lines + 1] = string.format(fmt, ...) end
  out("LeNet-5 Fashion-MNIST training epoch (batch 256, Adam 1e-3), OpenBLAS core %s (OPENBLAS_CORETYPE=%s)",
    res.blas_core, res.coretype_env or "unset")
  out("%-40s %10s %10s %10s", "run", "s/epoch", "loss", "test acc")
  local function row(name, r)
    if not r then out("%-40s %10s", name, "n/a"); return end
    local last = r.epochs[#r.epochs]
    out("%-40s %10.2f %10.4f %10.4f", name, r.best_seconds, last.loss, last.accuracy)
  end
  row(string.format("ds eager, %d threads", res.ds.threads), res.ds)
  row(string.format("ds compiled, %d threads", res.ds.threads), res.ds_compiled)
  local names = {}
  for name in pairs(res.torch) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do row("torch, " .. name, res.torch[name]) end
  if res.torch_best_seconds then
    local ratio = res.ds.best_seconds / res.torch_best_seconds
    out("target: ds epoch <= 0.8x PyTorch's best (%s, %.2f s): %s (ds/torch = %.2f)", res.torch_best_config,
      res.torch_best_seconds, ratio <= 0.8 and "met" or "MISSED", ratio)
    local cratio = res.ds_compiled.best_seconds / res.torch_best_seconds
    out("target: ds compiled epoch <= 0.4x PyTorch's best: %s (ds compiled/torch = %.2f)", cratio <= 0.4 and "met" or "MISSED", cratio)
  end
  return lines
end

local M = setmetatable({ run = run, report = report }, { __call = function(_, opts) return run(opts) end })

if arg and arg[0] and arg[0]:match("lenet_bench%.lua$") then
  local opts, i = {}, 1
  while i <= #arg do
    local k, v = arg[i]:match("^%-%-(%w+)$"), tonumber(arg[i + 1])
    if not (k == "threads" or k == "epochs" or k == "limit") or not v then
      error("usage: luajit bench/lenet_bench.lua [--threads N] [--epochs N] [--limit N]", 0)
    end
    opts[k] = v; i = i + 2
  end
  print(table.concat(report(run(opts)), "\n"))
end

return M
