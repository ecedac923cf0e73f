-- examples/pipeline.lua: the main job, end to end with timings: train LeNet-5 on Fashion-MNIST eagerly,
-- trace and compile its predictor, save it, load it in a fresh process without the model code, predict.
--   luajit examples/pipeline.lua [--epochs N] [--limit N batches] [--out DIR]   (make example runs it)
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;" .. package.path
local ds = require("ds")
local F = ds.nn.functional
local lenet = require("lenet_fashion_mnist")

local epochs, limit, out = 1, nil, "out"
local i = 1
while i <= #arg do
  if arg[i] == "--epochs" then epochs = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--limit" then limit = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--out" then out = arg[i + 1]; i = i + 2
  else error("unknown argument " .. arg[i] .. " (--epochs N, --limit N, --out DIR)", 0) end
end
os.execute("mkdir -p '" .. out .. "'")
io.stdout:setvbuf("line")

-- each stage starts from a collected heap, so one stage's garbage is not collected in the next one's time
local function stage(name, fn)
  collectgarbage("collect")
  local t0 = ds.clock()
  local r = { fn() }
  print(string.format("[%6.3f s] %s", ds.clock() - t0, name))
  return unpack(r)
end

-- 1. train (the LeNet example's own loop: Adam 1e-3, batch 256, seed 22)
local weights = out .. "/lenet.safetensors"
local argv = { "--epochs", tostring(epochs), "--out", weights, "--plot", out .. "/lenet_training.svg" }
if limit then argv[#argv + 1] = "--limit"; argv[#argv + 1] = tostring(limit) end
stage(string.format("trained LeNet-5 for %d epoch(s)", epochs), function() lenet.main(argv) end)

local model = lenet.LeNet()
model:load_state_dict(ds.load_state(weights))
model:eval()
local predict = function(x) return F.softmax(model(x), -1) end   -- x: (batch,1,28,28) -> probs (batch,10)

-- 2. trace and compile with a dynamic batch dim
local spec = { ds.spec({ "batch", 1, 28, 28 }, "f32", "image") }
local graph = stage("traced the predictor", function() return ds.trace(predict, spec) end)
print(string.format("         graph: %d nodes, %d state tensors", #graph.nodes, #graph.state))
local compiled = stage("compiled (fusion, memory plan)", function() return ds.compile(graph) end)

-- 3. predict the test set three ways and time it
local test = ds.data.fashion_mnist { split = "test" }
local loader = ds.data.DataLoader(test, { batch_size = 1000, transform = lenet.scale })
local function run_all(fn)
  local correct, outputs = 0, {}
  for x, y in loader:iter() do
    local p = fn(x)
    outputs[#outputs + 1] = p
    correct = correct + p:argmax(-1):eq(y):sum():item()
  end
  return correct / test:len(), outputs
end
local eager_acc, eager_out = stage("eager predictions on 10000 test images", function()
  return ds.no_grad(function() return run_all(predict) end)
end)
-- a plan per batch size: built once (lowering, memory plan, C plan) and run once (its arena's pages are touched
-- for the first time), then every batch of 1000 runs it
stage("planned the compiled graph for batches of 1000 and ran it once", function()
  compiled:plan_for({ batch = 1000 })
  compiled(ds.zeros(1000, 1, 28, 28))
end)
local comp_acc, comp_out = stage("compiled predictions on 10000 test images", function() return run_all(compiled) end)
local mem = compiled:memory()
print(string.format("         accuracy eager %.4f, compiled %.4f; arena %d KiB vs eager peak %d KiB",
  eager_acc, comp_acc, math.floor(mem.arena_bytes / 1024), math.floor(mem.eager_bytes / 1024)))
for k = 1, #eager_out do assert(ds.equal(eager_out[k], comp_out[k]), "compiled differs from eager") end
print("         compiled == eager, bit for bit")

-- 4. save, then load and predict in a fresh process that has no model code
stage("saved " .. out .. "/lenet_predict.{json,safetensors}", function() ds.save(compiled, out .. "/lenet_predict") end)
ds.save_state({ probs = ds.cat(comp_out, 1) }, out .. "/expected.safetensors")
local child = [[
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")
local t0 = ds.clock()
local m = ds.load("OUT/lenet_predict")
local t1 = ds.clock()
local test = ds.data.fashion_mnist { split = "test" }
local outs = {}
for i = 1, test:len(), 1000 do   -- the same batches as the first process
  local x = test.images:narrow(1, i, 1000)
  outs[#outs + 1] = m((x:astype("f32") * (1 / 255)):unsqueeze(2))
end
local p = ds.cat(outs, 1)
local t2 = ds.clock()
local expected = ds.load_state("OUT/expected.safetensors").probs
print(string.format("[%6.3f s] fresh process: ds.load (%.1f ms), predicted 10000 images, equal to the first process: %s",
  t2 - t0, (t1 - t0) * 1e3, tostring(ds.equal(p, expected))))
]]
local f = assert(io.open(out .. "/load_and_predict.lua", "wb"))
f:write((child:gsub("OUT", out))); f:close()
assert(os.execute("luajit " .. out .. "/load_and_predict.lua") == 0, "the fresh process failed")
