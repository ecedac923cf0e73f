-- nn/utils.lua: ds.nn.utils: gradient clipping (clip_grad_norm_, clip_grad_value_) and flattening
-- parameters to one vector and back, with torch 1.13's formulas; all tensor ops, so a train step
-- that clips traces and compiles.
local Tensor = require("ds.tensor")
local ops = require("ds.ops")
local autograd = require("ds.autograd")
local errors = require("ds.errors")
local options = require("ds.options")

local M = {}

-- a tensor or a list of tensors -> a list
local function tensor_list(params, opname)
  if Tensor.is_tensor(params) then return { params } end
  if type(params) ~= "table" then
    errors.raise(opname .. ": expects a tensor or a list of tensors, got " .. type(params))
  end
  for i, p in ipairs(params) do
    if not Tensor.is_tensor(p) then
      errors.raise(string.format("%s: element %d is a %s, not a tensor", opname, i, type(p)))
    end
  end
  return params
end

local function grads_of(params)
  local out = {}
  for _, p in ipairs(params) do
    local g = rawget(p, "grad")
    if g ~= nil then out[#out + 1] = g end
  end
  return out
end

-- scale the grads so that their joint norm_type-norm is at most max_norm:
-- total = norm(stack(norm(g) for each grad)); g *= min(max_norm / (total + 1e-6), 1).
-- opts: norm_type (2; any p > 0 or math.huge), error_if_nonfinite (false). Returns total (a 0-d tensor).
function M.clip_grad_norm_(parameters, max_norm, opts)
  if type(opts) == "number" then opts = { norm_type = opts } end
  opts = options.check(opts, "clip_grad_norm_", { norm_type = "number", error_if_nonfinite = "boolean" })
  local p = opts.norm_type or 2
  if type(max_norm) ~= "number" then errors.raise("clip_grad_norm_: max_norm must be a number") end
  if type(p) ~= "number" or p <= 0 then
    errors.raise("clip_grad_norm_: norm_type must be a positive number or math.huge")
  end
  local grads = grads_of(tensor_list(parameters, "clip_grad_norm_"))
  if #grads == 0 then return ops.zeros({}) end
  return autograd.no_grad(function()
    local norms, total = {}, nil
    for i, g in ipairs(grads) do
      local a = g:abs()
      if p == math.huge then norms[i] = a:max()
      elseif p == 1 then norms[i] = a:sum()
      elseif p == 2 then norms[i] = (a * a):sum():sqrt()
      else norms[i] = (a ^ p):sum() ^ (1 / p) end
    end
    local all = ops.stack(norms, 1)
    if p == math.huge then total = all:max()
    elseif p == 1 then total = all:sum()
    elseif p == 2 then total = (all * all):sum():sqrt()
    else total = (all ^ p):sum() ^ (1 / p) end
    if opts.error_if_nonfinite then
      local t = total:item()
      if t ~= t or t == math.huge then
        errors.raise("clip_grad_norm_: the total norm of the gradients is non-finite (" .. tostring(t) .. ")")
      end
    end
    local coef = ops.clamp(max_norm / (total + 1e-6), nil, 1)
    for _, g in ipairs(grads) do g:mul_(coef:astype(g.dtype)) end
    return total
  end)
end

-- clamp every grad to [-clip_value, clip_value] in place
function M.clip_grad_value_(parameters, clip_value)
  if type(clip_value) ~= "number" then errors.raise("clip_grad_value_: clip_value must be a number") end
  autograd.no_grad(function()
    for _, g in ipairs(grads_of(tensor_list(parameters, "clip_grad_value_"))) do g:clamp_(-clip_value, clip_value) end
  end)
end

-- the parameters flattened and concatenated: (sum of numels)
function M.parameters_to_vector(parameters)
  local flat = {}
  for i, p in ipairs(tensor_list(parameters, "parameters_to_vector")) do flat[i] = p:reshape(-1) end
  return ops.cat(flat, 1)
end

-- copy consecutive slices of vec into the parameters (in place)
function M.vector_to_parameters(vec, parameters)
  if not Tensor.is_tensor(vec) or vec:dim() ~= 1 then errors.raise("vector_to_parameters: vec must be a 1-d tensor") end
  local params = tensor_list(parameters, "vector_to_parameters")
  local n = 0
  for _, p in ipairs(params) do n = n + p:numel() end
  if n ~= vec:numel() then
    errors.raise(string.format("vector_to_parameters: vec has %d elements, the parameters %d", vec:numel(), n))
  end
  autograd.no_grad(function()
    local off = 1
    for _, p in ipairs(params) do
      p:copy_(vec:narrow(1, off, p:numel()):reshape(p._shape))
      off = off + p:numel()
    end
  end)
end

return M
