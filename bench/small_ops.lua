-- bench/small_ops.lua: microseconds per small eager op (median of samples), no grad: the cost of dispatch.
local ds = require("ds")
local stats = require("stats")

-- the same cases as bench/torch/small_ops.py
return function(opts)
  local iters, samples = opts.iters or 20000, opts.samples or 15
  ds.manual_seed(0)
  local a1, b1 = ds.rand(1), ds.rand(1)
  local a, b = ds.rand(10, 10), ds.rand(10, 10)
  local acc = ds.zeros(10, 10)
  local cases = {
    { "add_1", function() return a1 + b1 end },
    { "add_10x10", function() return a + b end },
    { "add_inplace_10x10", function() return acc:add_(b) end },
    { "relu_10x10", function() return a:relu() end },
    { "chain10_10x10", function() return ((a + b) * b - a):relu():neg():exp():tanh():sigmoid():abs():sqrt() end },
  }
  local out = {}
  ds.no_grad(function()
    for _, case in ipairs(cases) do
      local name, fn = case[1], case[2]
      out[name] = stats.median_per_call_us(fn, iters, samples)
    end
  end)
  return out
end
