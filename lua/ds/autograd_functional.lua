-- autograd_functional.lua: ds.autograd.functional, PyTorch's torch.autograd.functional: jacobian, hessian, vjp,
-- jvp, vhp, hvp over a function of a tensor or a list of tensors (results shaped and nested as PyTorch's:
-- a list where PyTorch gives a tuple). Reverse mode only: jvp and jacobian take one backward per output element.
local state = require("ds.state")
local errors = require("ds.errors")
local dtype = require("ds.dtype")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local tape = require("ds.tape")
local autograd = require("ds.autograd")
local options = require("ds.options")
local F = require("ds.ops")

local M = {}
local is_tensor = Tensor.is_tensor
local requires = tape.requires

-- a tensor or a list of tensors -> list, was it a list (PyTorch's tuple)
local function as_list(x, name, what)
  if is_tensor(x) then return { x }, false end
  if type(x) ~= "table" then errors.raise(string.format("%s: %s must be a tensor or a list of tensors, got %s", name,
    what, type(x))) end
  local n = table.maxn(x)
  if n == 0 then errors.raise(string.format("%s: %s is an empty list", name, what)) end
  for i = 1, n do
    if not is_tensor(x[i]) then
      errors.raise(string.format("%s: %s element %d must be a tensor, got %s", name, what, i, type(x[i])))
    end
  end
  return x, true
end

local function check_opts(name, opts, extra)
  local schema = { create_graph = "boolean", strict = "boolean" }
  for k, v in pairs(extra or {}) do schema[k] = v end
  opts = options.check(opts, name, schema)
  if opts.vectorize then errors.raise(name .. ": vectorize = true is not supported (ds computes one backward per "
    .. "output element)") end
  if opts.strategy ~= nil and opts.strategy ~= "reverse-mode" then
    errors.raise(name .. ": strategy '" .. tostring(opts.strategy) .. "' is not supported (only 'reverse-mode')")
  end
  return opts
end

-- the inputs as the function sees them: with create_graph a differentiable alias of an input that requires grad
-- (its history kept), else a detached copy that requires grad (PyTorch's _grad_preprocess)
local function prepare(name, inputs, create_graph)
  local xs = {}
  for i, x in ipairs(inputs) do
    if not dtype.is_float[x.dtype] then
      errors.raise(string.format("%s: input %d must be a floating point tensor, got %s", name, i, x.dtype))
    end
    if create_graph and requires(x) then xs[i] = x:reshape(x._shape) else xs[i] = x:detach():requires_grad_() end
  end
  return xs
end

-- func(xs...) with grad on; its result as a list of tensors, and whether it was a list
local function run(name, func, xs)
  if type(func) ~= "function" and not (type(func) == "table" and getmetatable(func) and getmetatable(func).__call) then
    errors.raise(name .. ": func must be a function, got " .. type(func))
  end
  local out = autograd.enable_grad(func, unpack(xs, 1, #xs))
  if out == nil then errors.raise(name .. ": the function returned nothing; it must return a tensor or a list of "
    .. "tensors") end
  local outs, listed = as_list(out, name, "the function's output")
  return outs, listed
end

-- the gradients of outs (with grad_outputs gs) with respect to xs; nil ones are zeros, or an error when strict
local function grads_of(name, outs, gs, xs, create_graph, strict, retain)
  local used_o, used_g = {}, {}
  for i, o in ipairs(outs) do
    if requires(o) then used_o[#used_o + 1] = o; used_g[#used_g + 1] = gs[i] end
  end
  local res = {}
  if #used_o > 0 then
    res = autograd.grad(used_o, xs, { grad_outputs = used_g, create_graph = create_graph, allow_unused = true,
      retain_graph = retain or create_graph })
  end
  for j, x in ipairs(xs) do
    if res[j] == nil then
      if strict then
        errors.raise(string.format("%s: the output of the user-provided function is independent of input %d; this "
          .. "is not allowed in strict mode", name, j))
      end
      res[j] = F.zeros_like(x)
    end
  end
  return res
end

local function finish(t, create_graph) return create_graph and t or t:detach() end

-- the vectors v for a list of tensors like: nil allowed when every tensor has one element (then ones)
local function vectors(name, v, like, what)
  if v == nil then
    for i, t in ipairs(like) do
      if S.numel(t._shape) ~= 1 then
        errors.raise(string.format("%s: v can be omitted only when %s %d has a single element (it has shape %s)",
          name, what, i, S.str(t._shape)))
      end
    end
    local ones = {}
    for i, t in ipairs(like) do ones[i] = F.ones_like(t) end
    return ones
  end
  local vs = as_list(v, name, "v")
  if #vs ~= #like then errors.raise(string.format("%s: v has %d tensors, %s has %d", name, #vs, what, #like)) end
  for i, t in ipairs(like) do
    if not S.equal(vs[i]._shape, t._shape) then
      errors.raise(string.format("%s: v %d has shape %s, but %s %d has shape %s", name, i, S.str(vs[i]._shape), what,
        i, S.str(t._shape)))
    end
  end
  return vs
end

local function shaped(list, listed) if listed then return list end return list[1] end

-- vjp(func, inputs, v, {create_graph =, strict =}) -> func's output, v^T J (shaped as inputs)
function M.vjp(func, inputs, v, opts)
  opts = check_opts("vjp", opts)
  local ins, in_listed = as_list(inputs, "vjp", "inputs")
  local xs = prepare("vjp", ins, opts.create_graph)
  local outs, out_listed = run("vjp", func, xs)
  local vs = vectors("vjp", v, outs, "output")
  local gs = grads_of("vjp", outs, vs, xs, opts.create_graph, opts.strict)
  local out_d = {}
  for i, o in ipairs(outs) do out_d[i] = finish(o, opts.create_graph) end
  for j, g in ipairs(gs) do gs[j] = finish(g, opts.create_graph) end
  return shaped(out_d, out_listed), shaped(gs, in_listed)
end

-- J[i][j] (output i's shape .. input j's shape) of outs with respect to xs, one backward per output element
local function jacobian_of(name, outs, xs, create_graph, strict)
  local J = {}
  for i, o in ipairs(outs) do
    local n = S.numel(o._shape)
    local rows = {}
    for j = 1, #xs do rows[j] = {} end
    local eye = n > 0 and F.eye(n, { dtype = o.dtype }) or nil
    for k = 1, n do
      local go = eye[k]:reshape(o._shape)
      local gs = grads_of(name, { o }, { go }, xs, create_graph, strict, true)
      for j = 1, #xs do rows[j][k] = gs[j] end
    end
    J[i] = {}
    for j, x in ipairs(xs) do
      local shape = {}
      for _, d in ipairs(o._shape) do shape[#shape + 1] = d end
      for _, d in ipairs(x._shape) do shape[#shape + 1] = d end
      local t = n > 0 and F.stack(rows[j], 1):reshape(shape) or F.zeros(shape, { dtype = x.dtype })
      J[i][j] = finish(t, create_graph)
    end
  end
  return J
end

local function nest(J, out_listed, in_listed)
  if not out_listed and not in_listed then return J[1][1] end
  if out_listed and not in_listed then
    local r = {}
    for i = 1, #J do r[i] = J[i][1] end
    return r
  end
  if not out_listed then return J[1] end
  return J
end

-- jacobian(func, inputs, {create_graph =, strict =, vectorize = false, strategy = "reverse-mode"})
function M.jacobian(func, inputs, opts)
  opts = check_opts("jacobian", opts, { vectorize = "boolean", strategy = "string" })
  local ins, in_listed = as_list(inputs, "jacobian", "inputs")
  local xs = prepare("jacobian", ins, opts.create_graph)
  local outs, out_listed = run("jacobian", func, xs)
  return nest(jacobian_of("jacobian", outs, xs, opts.create_graph, opts.strict), out_listed, in_listed)
end

-- the gradient of a one-element output of func with respect to xs, kept differentiable
local function gradient_fn(name, func, n)
  return function(...)
    local xs = { ... }
    local out = func(...)
    if not is_tensor(out) or S.numel(out._shape) ~= 1 then
      errors.raise(name .. ": the function given to " .. name .. " should return a single tensor with a single "
        .. "element")
    end
    local gs = {}
    if requires(out) then
      gs = autograd.grad({ out }, xs, { create_graph = true, allow_unused = true })
    end
    for j = 1, n do if gs[j] == nil then gs[j] = F.zeros_like(xs[j]) end end
    return gs, out
  end
end

-- hessian(func, inputs, {create_graph =, strict =, vectorize = false, outer_jacobian_strategy = "reverse-mode"})
function M.hessian(func, inputs, opts)
  opts = options.check(opts, "hessian", { create_graph = "boolean", strict = "boolean", vectorize = "boolean",
    outer_jacobian_strategy = "string" })
  check_opts("hessian", { vectorize = opts.vectorize, strategy = opts.outer_jacobian_strategy },
    { vectorize = "boolean", strategy = "string" })
  local ins, in_listed = as_list(inputs, "hessian", "inputs")
  local xs = prepare("hessian", ins, opts.create_graph)
  local gfn = gradient_fn("hessian", func, #xs)
  local gs = autograd.enable_grad(gfn, unpack(xs, 1, #xs))
  local H = jacobian_of("hessian", gs, xs, opts.create_graph, opts.strict)
  return nest(H, in_listed, in_listed)
end

-- jvp(func, inputs, v, {create_graph =, strict =}) -> func's output, J v (shaped as the outputs)
function M.jvp(func, inputs, v, opts)
  opts = check_opts("jvp", opts)
  local ins, in_listed = as_list(inputs, "jvp", "inputs")
  local vs = vectors("jvp", v, ins, "input")
  local xs = prepare("jvp", ins, opts.create_graph)
  local outs, out_listed = run("jvp", func, xs)
  local J = jacobian_of("jvp", outs, xs, opts.create_graph, opts.strict)
  local res, out_d = {}, {}
  for i, o in ipairs(outs) do
    local n = S.numel(o._shape)
    local acc
    for j, x in ipairs(xs) do
      local m = S.numel(x._shape)
      local t = F.matmul(J[i][j]:reshape(n, m), vs[j]:astype(o.dtype):reshape(m, 1)):reshape(o._shape)
      acc = acc and acc + t or t
    end
    res[i] = finish(acc, opts.create_graph)
    out_d[i] = finish(o, opts.create_graph)
  end
  return shaped(out_d, out_listed), shaped(res, out_listed)
end

-- v^T H for a one-element func (name: vhp or hvp; the Hessian of a twice differentiable function is symmetric,
-- so H v = v^T H)
local function hessian_vector(name, func, inputs, v, opts)
  opts = check_opts(name, opts)
  local ins, in_listed = as_list(inputs, name, "inputs")
  local vs = vectors(name, v, ins, "input")
  local xs = prepare(name, ins, opts.create_graph)
  local gs, out = autograd.enable_grad(gradient_fn(name, func, #xs), unpack(xs, 1, #xs))
  local dot
  for j, g in ipairs(gs) do
    if requires(g) then
      local t = (g * vs[j]:astype(g.dtype)):sum()
      dot = dot and dot + t or t
    end
  end
  local res = {}
  local prev = state.grad_enabled
  state.grad_enabled = true
  local ok, err = pcall(function()
    res = grads_of(name, dot and { dot } or {}, { dot and F.ones_like(dot) }, xs, opts.create_graph, opts.strict)
  end)
  state.grad_enabled = prev
  if not ok then error(err, 0) end
  for j, r in ipairs(res) do res[j] = finish(r, opts.create_graph) end
  return finish(out, opts.create_graph), shaped(res, in_listed)
end

-- vhp(func, inputs, v, {create_graph =, strict =}) -> func's output, v^T H
function M.vhp(func, inputs, v, opts) return hessian_vector("vhp", func, inputs, v, opts) end
-- hvp(func, inputs, v, {create_graph =, strict =}) -> func's output, H v
function M.hvp(func, inputs, v, opts) return hessian_vector("hvp", func, inputs, v, opts) end

return M
