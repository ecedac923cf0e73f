-- bench/stats.lua: helpers for the benchmarks: medians, timing loops, the output of a child process.
local ds = require("ds")
local cjson = require("cjson")
local M = {}

-- what a shell command prints on stdout
function M.output(cmd)
  local p = io.popen(cmd)
  local s = p:read("*a")
  p:close()
  return s
end

-- the JSON object a command prints (a PyTorch twin, a probe), or nil if it failed
function M.json_of(cmd)
  local ok, res = pcall(cjson.decode, M.output(cmd))
  return ok and type(res) == "table" and res or nil
end

function M.median(xs)
  local s = {}
  for i, v in ipairs(xs) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

-- The timing loop is compiled afresh for every case: a loop shared by several closures gets side
-- traces (or falls back to the interpreter) in LuaJIT, which would slow down the cases timed later.
local LOOP = "local fn, n = ...; for _ = 1, n do fn() end"

-- median over samples of the mean time of one call (in microseconds), after a warm-up
function M.median_per_call_us(fn, iters, samples)
  local loop = assert(loadstring(LOOP, "=timing loop"))
  loop(fn, math.floor(iters / 10))
  local times = {}
  for s = 1, samples do
    local t0 = ds.clock()
    loop(fn, iters)
    times[s] = (ds.clock() - t0) / iters * 1e6
  end
  return M.median(times)
end

-- the best of `rounds` rounds of `reps` calls, in seconds per round, after one warm-up call (on a shared host a
-- round may lose its core: the best round is the one that kept it)
function M.best_round_s(fn, reps, rounds)
  fn()
  local best = math.huge
  for _ = 1, rounds do
    local t0 = ds.clock()
    for _ = 1, reps do fn() end
    best = math.min(best, ds.clock() - t0)
  end
  return best
end

-- two models' outputs (..., classes) on the same inputs (data: a list of argument lists): the rows whose argmax
-- agree, the rows compared, and the largest |difference| of any output value
function M.agreement(f, g, data)
  local agree, total, dmax = 0, 0, 0
  for _, args in ipairs(data) do
    local p, q = f(unpack(args)), g(unpack(args))
    local a, b = p:argmax(-1), q:argmax(-1)
    agree, total = agree + a:eq(b):sum():item(), total + a:numel()
    dmax = math.max(dmax, (p - q):abs():max():item())
  end
  return agree, total, dmax
end

-- calls per timed batch of fn: enough for `seconds` (~0.5 ms by default)
local function batch_size(fn, seconds)
  fn()
  local t0, n = ds.clock(), 0
  repeat fn(); n = n + 1 until ds.clock() - t0 > (seconds or 0.0005)
  return n
end

-- each function's own timing loop (a loop shared by several closures slows the ones timed later)
local LOOP = "local fn, n = ...; for _ = 1, n do fn() end"

-- microseconds per call of each function in fns: `rounds` rounds (15 by default), each timing one batch (~`seconds`)
-- of every function in turn (the order reversed every other round), the best batch of each. Other processes on the
-- host only ever add time to a batch, and all the functions face them alike; a median of a few samples per
-- function, taken one function after the other, put frozen above unfrozen in ~30 of 425 shapes of
-- bench/frozen_sweep.lua when a busy host slowed one function's samples.
function M.us_per_call(fns, rounds, seconds)
  local n, loops, best = {}, {}, {}
  for i, fn in ipairs(fns) do
    n[i], loops[i], best[i] = batch_size(fn, seconds), assert(loadstring(LOOP, "=timing loop")), math.huge
  end
  for r = 1, rounds or 15 do
    for j = 1, #fns do
      local i = r % 2 == 1 and j or #fns + 1 - j
      local t0 = ds.clock()
      loops[i](fns[i], n[i])
      best[i] = math.min(best[i], (ds.clock() - t0) / n[i] * 1e6)
    end
  end
  return best
end

return M
