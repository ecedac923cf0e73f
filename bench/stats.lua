-- bench/stats.lua: timing helpers for the benchmarks (monotonic wall clock, medians).
local ds = require("ds")
local M = {}

function M.median(xs)
  local s = {}
  for i, v in ipairs(xs) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

-- median over samples of the mean time of one call (in microseconds), after a warm-up
function M.median_per_call_us(fn, iters, samples)
  for _ = 1, math.floor(iters / 10) do fn() end
  local times = {}
  for s = 1, samples do
    local t0 = ds.clock()
    for _ = 1, iters do fn() end
    times[s] = (ds.clock() - t0) / iters * 1e6
  end
  return M.median(times)
end

return M
