-- bench/onnx_timing.lua: per-call milliseconds of a ds callable and of ONNX Runtime (through tests/onnx/ort.lua,
-- timed inside Node around session.run) on the same list of inputs: best of 3 passes.
local ds = require("ds")
local ort = require("onnx.ort")

local M = {}

-- fn(unpack(inputs[k])) for every k; a few warm-up calls first
function M.ds_ms(fn, inputs)
  for k = 1, math.min(3, #inputs) do fn(unpack(inputs[k])) end
  local best = math.huge
  for _ = 1, 3 do
    local t0 = ds.clock()
    for k = 1, #inputs do fn(unpack(inputs[k])) end
    best = math.min(best, (ds.clock() - t0) / #inputs * 1e3)
  end
  return best
end

-- the model at path in ONNX Runtime (optimization "all", `threads` intra-op threads); names: the input names
function M.ort_ms(path, names, inputs, threads)
  local feeds = {}
  for k, inp in ipairs(inputs) do
    feeds[k] = {}
    for j, nm in ipairs(names) do feeds[k][nm] = inp[j] end
  end
  local best = math.huge
  for _ = 1, 3 do
    local r = ort.run({ { model = path, feeds = feeds, threads = threads, optimization = "all", warmup = 3,
      keep = false } })[1]
    assert(not r.error, r.error)
    best = math.min(best, r.seconds / #inputs * 1e3)
  end
  return best
end

return M
