-- examples/onnx_import.lua: a LeNet-5 trained in PyTorch (tests/onnx/train_lenet_torch.py, torch.onnx.export)
-- imported with ds.onnx.load, checked against the Fashion-MNIST test set, compiled with a softmax on top and
-- saved as OUT/lenet, which ds.serve serves by its specs (bin/ds-serve /tmp/ngx 8089 OUT start; docs/SERVING.md).
-- usage: luajit examples/onnx_import.lua [--onnx lenet.onnx] [--batches 235] [--out DIR]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")

local onnx_path, batches, out = nil, 235, "out/onnx_import"
local i = 1
while i <= #arg do
  if arg[i] == "--onnx" then onnx_path = arg[i + 1]; i = i + 2
  elseif arg[i] == "--batches" then batches = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--out" then out = arg[i + 1]; i = i + 2
  else error("unknown argument " .. arg[i]) end
end
os.execute("mkdir -p " .. out)
if not onnx_path then
  onnx_path = out .. "/lenet_torch.onnx"
  assert(os.execute(string.format("/usr/bin/python3 tests/onnx/train_lenet_torch.py %q %d", onnx_path, batches)) == 0,
    "training in PyTorch failed")
end

local g = ds.onnx.load(onnx_path)
print(g)
-- image (batch,1,28,28) in [0,1] -> class probabilities; served by its specs: {"inputs": {"image": [...]}}
local probs = ds.compile(function(image) return ds.softmax(g(image), -1) end,
  { ds.spec({ "batch", 1, 28, 28 }, "f32", "image") })
local test = ds.data.fashion_mnist { split = "test" }
local loader = ds.data.DataLoader(test, { batch_size = 500 })
local right, total = 0, 0
for _, x, y in loader:batches() do
  local p = probs((x:astype("f32") * (1 / 255)):unsqueeze(2))
  right = right + p:argmax(-1):eq(y):sum():item()
  total = total + y:size(1)
end
print(string.format("imported PyTorch LeNet-5: test accuracy %.4f on %d images (ds compiled)", right / total, total))
ds.save(probs, out .. "/lenet")
print("saved " .. out .. "/lenet; serve it with: bin/ds-serve /tmp/ngx 8089 " .. out .. " start")
