-- bench/small_ops.lua: microseconds per small eager op (median of samples), no grad: the cost of dispatch.
-- usage: luajit bench/small_ops.lua CASE [iters samples]; prints {"CASE": us} as JSON. bench/run.lua runs one
-- process per case: LuaJIT's traces of the shared op code would otherwise carry over from case to case.
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")

-- the same cases as bench/torch/small_ops.py
local function cases()
  ds.manual_seed(0)
  local a1, b1 = ds.rand(1), ds.rand(1)
  local a, b = ds.rand(10, 10), ds.rand(10, 10)
  local acc = ds.zeros(10, 10)
  return {
    add_1 = function() return a1 + b1 end,
    add_10x10 = function() return a + b end,
    add_inplace_10x10 = function() return acc:add_(b) end,
    relu_10x10 = function() return a:relu() end,
    chain10_10x10 = function() return ((a + b) * b - a):relu():neg():exp():tanh():sigmoid():abs():sqrt() end,
  }
end

local name, iters, samples = arg[1], tonumber(arg[2]) or 20000, tonumber(arg[3]) or 15
local fn = cases()[name]
if not fn then error("small_ops.lua: unknown case " .. tostring(name), 0) end
ds.set_grad_enabled(false)
io.write(string.format('{"%s": %.6f}\n', name, stats.median_per_call_us(fn, iters, samples)))
