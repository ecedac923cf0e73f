-- examples/tour.lua: a short eager tour: tensors, views, broadcasting ops, reductions, matmul, autograd, random.
local ds = require("ds")

local function section(title) print(("\n-- %s %s"):format(title, ("-"):rep(60 - #title))) end
local function show(...) for i = 1, select("#", ...) do print((select(i, ...))) end end

local info = ds.info()
print(("ds %s: %d threads, OpenBLAS core %s"):format(ds.version, info.threads, info.blas_core))

section("tensors")
local x = ds.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })        -- f32 by default
print(x)
print("shape", table.concat(x.shape, "x"), "dtype", x.dtype, "x:size(-1)", x:size(-1))
show(ds.arange(1, 7):reshape(2, 3), ds.zeros(2, 2, { dtype = "f64" }))

section("views share storage")
local t = x:t()                                           -- (3,2), no copy
t[1]:fill_(0)                                             -- writes column 1 of x
print(x)
show(x:narrow(2, 2, 2), x[2])

section("elementwise ops and broadcasting")
local row = ds.tensor({ 10, 20, 30 })
show(x + row, 2 * x - 1, (x / 10):exp(), x:gt(2))

section("reductions")
show(x:sum(), x:sum(2), x:mean(1))
local values, indices = x:max(2)                          -- indices are 1-based
show(values, indices)
print(x:softmax(-1))

section("matmul")
print(x:matmul(x:t()))                                    -- (2,3) @ (3,2) -> (2,2)

section("autograd")
local w = ds.tensor({ { 1, -1 }, { 0.5, 2 }, { -1, 1 } }):requires_grad_()
local loss = x:matmul(w):relu():sum()
loss:backward()
print("loss", loss:item())
print("d loss / d w:")
print(w.grad)

section("random numbers (Philox, same stream eager and compiled)")
ds.manual_seed(22)
show(ds.rand(2, 3), ds.randn({ 2, 3 }, { dtype = "f64" }), ds.randint(1, 7, { 6 }))

section("fit y = 2x + 1 by gradient descent")
local xs = ds.linspace(-1, 1, 32):reshape(32, 1)
local ys = 2 * xs + 1 + 0.01 * ds.randn(32, 1)
local a = ds.zeros(1, 1):requires_grad_()
local b = ds.zeros(1):requires_grad_()
for step = 1, 200 do
  local err = xs:matmul(a) + b - ys
  local mse = (err * err):mean()
  a.grad, b.grad = nil, nil
  mse:backward()
  ds.no_grad(function()
    a:sub_(0.5 * a.grad)
    b:sub_(0.5 * b.grad)
  end)
  if step % 50 == 0 then print(("step %3d  mse %.6f"):format(step, mse:item())) end
end
print(("a = %.3f, b = %.3f"):format(a:item(), b:item()))
