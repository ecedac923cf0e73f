-- bench/mlp_bench.lua: MLP 784-128-10 training step (batch 64, Adam 1e-3), ds eager and compiled vs
-- PyTorch (bench/torch/mlp.py) in one run; median ms per step, PyTorch at 1 thread and at ds's thread count.
--   luajit bench/mlp_bench.lua [--threads 1]   (from the repo root)
-- As a module: require("mlp_bench")({threads =}) -> results table.
local ds = require("ds")
local stats = require("stats")
local nn, F = ds.nn, ds.nn.functional

local function ds_step_fn(compiled)
  ds.manual_seed(22)
  local model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
  local opt = ds.optim.Adam(model:parameters(), { lr = 1e-3 })
  local x, y = ds.rand(64, 784), ds.randint(1, 11, { 64 })
  local function step(xb, yb)
    opt:zero_grad()
    local loss = F.cross_entropy(model(xb), yb)
    loss:backward()
    opt:step()
    return loss
  end
  if compiled then
    step = ds.compile(step, { ds.spec({ 64, 784 }, "f32", "x"), ds.spec({ 64 }, "i64", "y") })
  end
  return function() step(x, y) end
end

local function torch_ms(threads, env)
  local r = stats.json_of(string.format("%s /usr/bin/python3 bench/torch/mlp.py --threads %d 2>/dev/null", env or "", threads))
  return r and r.ms_per_step
end

local function run(opts)
  opts = opts or {}
  local threads = opts.threads or 1
  ds.set_num_threads(threads)
  local res = {
    threads = threads,
    ds_eager = stats.median_per_call_us(ds_step_fn(false), 500, 5) / 1e3,
    ds_compiled = stats.median_per_call_us(ds_step_fn(true), 500, 5) / 1e3,
    torch = { ["1 thread"] = torch_ms(1) },
  }
  if threads ~= 1 then
    res.torch[threads .. " threads"] = torch_ms(threads)
    res.torch[threads .. " threads, OMP_WAIT_POLICY=PASSIVE"] = torch_ms(threads, "OMP_WAIT_POLICY=PASSIVE")
  end
  local best
  for _, v in pairs(res.torch) do if v and (not best or v < best) then best = v end end
  res.torch_best = best
  return res
end

if arg and arg[0] and arg[0]:match("mlp_bench%.lua$") then
  local threads = 1
  if arg[1] == "--threads" then threads = tonumber(arg[2]) end
  local r = run({ threads = threads })
  print(string.format("MLP 784-128-10 step (batch 64, Adam), %d thread(s): ds eager %.3f ms, ds compiled %.3f ms, "
    .. "PyTorch best %.3f ms -> eager ratio %.2fx (target <= 0.8x)", threads, r.ds_eager, r.ds_compiled, r.torch_best,
    r.ds_eager / r.torch_best))
end
return run
