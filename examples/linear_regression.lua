-- examples/linear_regression.lua: fit y = w x + b by SGD on noisy samples of y = 3x - 2; prints the fitted w, b.
--   luajit examples/linear_regression.lua [--steps N]
local ds = require("ds")

local steps = 300
if arg and arg[1] == "--steps" then steps = tonumber(arg[2]) or error("--steps needs a number", 0) end

ds.manual_seed(22)
local N, true_w, true_b = 256, 3, -2
local x = ds.rand(N, 1) * 4 - 2                              -- x: (N,1) in [-2, 2)
local y = x * true_w + true_b + ds.randn(N, 1) * 0.1         -- y: (N,1)

local model = ds.nn.Linear(1, 1)
local opt = ds.optim.SGD(model:parameters(), { lr = 0.1 })
local loader = ds.data.DataLoader({ x, y }, { batch_size = 32, shuffle = true })

local step, loss = 0, nil
while step < steps do
  for xb, yb in loader:iter() do
    loss = ds.nn.functional.mse_loss(model(xb), yb)
    opt:zero_grad()
    loss:backward()
    opt:step()
    step = step + 1
    if step % 100 == 0 then print(string.format("step %4d  loss %.5f", step, loss:item())) end
    if step == steps then break end
  end
end

local w, b = model.weight:item(), model.bias:item()
print(string.format("fitted w = %.4f, b = %.4f  (true w = %g, b = %g)", w, b, true_w, true_b))
return { w = w, b = b, loss = loss:item() }
