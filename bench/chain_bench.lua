-- bench/chain_bench.lua: a chain of 10 adds (z = x; z = z + y, ten times), eager vs compiled (one fused
-- step), small (10x10: the cost of a call) and large (1000x1000: memory traffic), with PyTorch eager and
-- jit.trace in one run. Microseconds per call, median of samples.
-- usage (repo root): luajit bench/chain_bench.lua [--threads N] [--no-torch]
package.path = "./bench/?.lua;./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")

local threads, torch = 1, true
for i = 1, #arg do
  if arg[i] == "--threads" then threads = tonumber(arg[i + 1])
  elseif arg[i] == "--no-torch" then torch = false end
end
ds.set_num_threads(threads)
ds.set_grad_enabled(false)

local function chain(x, y)
  local z = x
  for _ = 1, 10 do z = z + y end
  return z
end

local TORCH = [[
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
def chain(x, y):
    z = x
    for _ in range(10):
        z = z + y
    return z
out = {}
for n, iters in ((10, 20000), (1000, 50)):
    x, y = torch.rand(n, n), torch.rand(n, n)
    traced = torch.jit.trace(chain, (x, y))
    for name, f in (("eager", chain), ("jit.trace", traced)):
        with torch.no_grad():
            for _ in range(max(10, iters // 10)): f(x, y)
            best = []
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(iters): f(x, y)
                best.append((time.perf_counter() - t0) / iters * 1e6)
        out["%s %dx%d" % (name, n, n)] = sorted(best)[3]
print(json.dumps(out))
]]

local rows = {}
for _, n in ipairs { 10, 1000 } do
  local iters = n == 10 and 20000 or 50
  local x, y = ds.rand(n, n), ds.rand(n, n)
  local compiled = ds.compile(chain, { x, y })
  assert(require("ffi").string(compiled(x, y):data_ptr(), n * n * 4) == require("ffi").string(chain(x, y):data_ptr(), n * n * 4),
    "compiled chain differs from eager")
  rows[#rows + 1] = { string.format("ds eager %dx%d", n, n), stats.median_per_call_us(function() return chain(x, y) end, iters, 7) }
  rows[#rows + 1] = { string.format("ds compiled %dx%d", n, n), stats.median_per_call_us(function() return compiled(x, y) end, iters, 7) }
end
if torch then
  local f = io.open("/tmp/ds_chain_bench.py", "w")
  f:write(TORCH); f:close()
  local res = stats.json_of("/usr/bin/python3 /tmp/ds_chain_bench.py " .. threads .. " 2>/dev/null")
  os.remove("/tmp/ds_chain_bench.py")
  if res then
    for _, k in ipairs { "eager 10x10", "jit.trace 10x10", "eager 1000x1000", "jit.trace 1000x1000" } do
      rows[#rows + 1] = { "torch " .. k, res[k] }
    end
  end
end
print(string.format("10-add chain, %d thread(s), microseconds per call (median)", threads))
for _, r in ipairs(rows) do print(string.format("%-32s %12.2f", r[1], r[2])) end
