-- bench/busy_host.lua: ds on a busy host: an eager MLP training step (784-512-512-10, batch 256, Adam) and a
-- compiled LeNet-5-sized CNN forward at batch 1, on 1 and 2 threads, on a quiet machine and with another process
-- spinning on one core (a busy loop started here), as ds runs by default and with OMP_WAIT_POLICY=passive.
-- Each configuration runs in a process of its own; prints ms per step (best of 5 passes).
-- usage: make bench-busy   (or luajit bench/busy_host.lua; `luajit bench/busy_host.lua work` is the child)
local ds = require("ds")

if arg[1] == "work" then
  local nn, F = ds.nn, ds.nn.functional
  ds.manual_seed(1)
  local mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
  local opt = ds.optim.Adam(mlp:parameters(), { lr = 1e-3 })
  local x, y = ds.rand(256, 784), ds.randint(1, 11, { 256 })
  local function train()
    opt:zero_grad()
    F.cross_entropy(mlp(x), y):backward()
    opt:step()
  end
  local cnn = nn.Sequential(nn.Conv2d(1, 16, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 5),
    nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 5 * 5, 10))
  cnn:eval()
  local predict = ds.compile(cnn, { ds.spec({ 1, 1, 28, 28 }) })
  local img = ds.rand(1, 1, 28, 28)
  local function best_ms(fn, n)
    fn()
    local best = math.huge
    for _ = 1, 5 do
      local t0 = ds.clock()
      for _ = 1, n do fn() end
      best = math.min(best, (ds.clock() - t0) / n * 1e3)
    end
    return best
  end
  print(string.format("%.3f %.4f %d", best_ms(train, 20), best_ms(function() return predict(img) end, 500),
    ds.info().starved_regions))
  os.exit(0)
end

local function run(threads, env)
  local p = io.popen(string.format("env OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d %s luajit bench/busy_host.lua work",
    threads, threads, env or ""))
  local out = p:read("*a")
  p:close()
  local train, predict, starved = out:match("([%d.]+) ([%d.]+) (%d+)")
  return tonumber(train), tonumber(predict), tonumber(starved)
end

local rows = {}
local function row(label, threads, env) rows[#rows + 1] = { label, run(threads, env) } end
row("quiet, 1 thread", 1)
row("quiet, 2 threads", 2)
-- one core kept busy by a shell loop started in the background; its pid is read back to stop it
local pid_file = os.tmpname()
os.execute("sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $! > " .. pid_file)
local f = assert(io.open(pid_file))
local pid = f:read("*l")
f:close()
os.remove(pid_file)
row("busy, 1 thread", 1)
row("busy, 2 threads", 2)
row("busy, 2 threads, passive", 2, "OMP_WAIT_POLICY=passive")
os.execute("kill " .. pid)

print(string.format("ds %s, isa %s", ds.version, ds.info().isa))
print(string.format("%-28s %14s %16s %16s", "configuration", "MLP train ms", "CNN predict ms", "starved regions"))
for _, r in ipairs(rows) do
  print(string.format("%-28s %14.3f %16.4f %16d", r[1], r[2] or -1, r[3] or -1, r[4] or -1))
end
