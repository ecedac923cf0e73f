-- nn/functional_inplace.lua: ds.F's in-place activations relu_, elu_, leaky_relu_, hardtanh_ (PyTorch's F.*_):
-- x is overwritten with the activation (its version counter advances) and returned; the activation reads a
-- clone, so autograd keeps the old value it needs and the gradient flows through x's history.
local activation = require("ds.nn.functional_activation")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")

local M = {}

local function need_tensor(x, opname)
  if not Tensor.is_tensor(x) then errors.raise(string.format("%s: input must be a tensor, got %s", opname, type(x))) end
  return x
end

-- x overwritten with relu(x) and returned
function M.relu_(x) return need_tensor(x, "relu_"):relu_() end
-- x overwritten with elu(x, alpha (1.0)) and returned
function M.elu_(x, alpha) return need_tensor(x, "elu_"):copy_(activation.elu(x:clone(), alpha)) end
-- x overwritten with leaky_relu(x, negative_slope (0.01)) and returned
function M.leaky_relu_(x, negative_slope)
  return need_tensor(x, "leaky_relu_"):copy_(activation.leaky_relu(x:clone(), negative_slope))
end
-- x overwritten with hardtanh(x, min_val (-1), max_val (1)) and returned
function M.hardtanh_(x, min_val, max_val)
  return need_tensor(x, "hardtanh_"):copy_(activation.hardtanh(x:clone(), min_val, max_val))
end

return M
