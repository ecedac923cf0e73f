-- gradcheck.lua: ds.autograd.gradcheck / gradgradcheck: analytic gradients against central finite
-- differences. Each output is projected on a fixed pseudo-random vector v, so one backward pass gives
-- v^T J for every input element, and each element is compared with the numeric derivative of
-- sum(v * fn(x)) -- every entry of the Jacobian contributes, with probability-one detection.
local ffi = require("ffi")
local Tensor = require("ds.tensor")
local autograd = require("ds.autograd")
local errors = require("ds.errors")
local S = require("ds.shape")
local ops = require("ds.ops")

local M = {}
local is_tensor = Tensor.is_tensor

-- deterministic values in [-1, 1) (a linear congruential generator; no dependency on ds.rand)
local function lcg(seed)
  local s = seed
  return function()
    s = (s * 1103515245 + 12345) % 2147483648
    return s / 1073741824 - 1
  end
end

local function as_list(v)
  if is_tensor(v) then return { v } end
  if type(v) == "table" then return v end
  errors.raise("gradcheck: fn must return a tensor or a list of tensors, got " .. type(v))
end

local function float_outputs(fn, inputs)
  local outs = as_list(fn(unpack(inputs, 1, table.maxn(inputs))))
  local list = {}
  for _, o in ipairs(outs) do
    if is_tensor(o) and (o.dtype == "f32" or o.dtype == "f64") then list[#list + 1] = o end
  end
  return list
end

-- sum over outputs of <v_k, o_k>, in Lua doubles
local function project(outs, vs)
  local total = 0
  for k, o in ipairs(outs) do
    local a, b = o:_flat(), vs[k]
    for i = 1, #a do total = total + a[i] * b[i] end
  end
  return total
end

-- address of every element of x in row-major logical order
local function element_pointers(x)
  local ct = x.dtype == "f64" and "double*" or "float*"
  local base = ffi.cast(ct, x:data_ptr())
  local shape, strides = x._shape, x:strides()
  local n = S.numel(shape)
  local ptrs = {}
  local idx = {}
  for d = 1, #shape do idx[d] = 0 end
  for e = 1, n do
    local off = 0
    for d = 1, #shape do off = off + idx[d] * strides[d] end
    ptrs[e] = base + off
    for d = #shape, 1, -1 do
      idx[d] = idx[d] + 1
      if idx[d] < shape[d] then break end
      idx[d] = 0
    end
  end
  return ptrs
end

-- gradcheck(fn, inputs, {eps = 1e-6, atol = 1e-5, rtol = 1e-3, raise = true}) -> true, or false and a message
-- fn(inputs...) returns a tensor or a list; inputs with requires_grad are checked (use f64).
function M.gradcheck(fn, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local function fail(msg)
    if opts.raise == false then return false, msg end
    errors.raise("gradcheck: " .. msg)
  end
  local diff, diff_pos = {}, {}
  for i, x in ipairs(inputs) do
    if is_tensor(x) and rawget(x, "requires_grad") then
      if x.dtype ~= "f64" and x.dtype ~= "f32" then return fail("input " .. i .. " is " .. x.dtype) end
      diff[#diff + 1] = x; diff_pos[#diff_pos + 1] = i
    end
  end
  if #diff == 0 then return fail("no input requires grad") end

  local outs = float_outputs(fn, inputs)
  if #outs == 0 then return fail("fn returned no floating point tensor") end
  local rand = lcg(opts.seed or 12345)
  local vs, vts, grad_outs, grad_vs = {}, {}, {}, {}
  for k, o in ipairs(outs) do
    local n = S.numel(o._shape)
    local v = {}
    for i = 1, n do v[i] = rand() end
    vs[k] = v
    vts[k] = ops.tensor(v, { dtype = o.dtype }):reshape(o._shape)
    if rawget(o, "requires_grad") then grad_outs[#grad_outs + 1] = o; grad_vs[#grad_vs + 1] = vts[k] end
  end

  -- analytic: v^T J for each differentiable input
  local analytic = {}
  if #grad_outs > 0 then
    local gs = autograd.grad(grad_outs, diff, { grad_outputs = grad_vs, allow_unused = true })
    for j = 1, #diff do
      local g = gs[j] or ops.zeros_like(diff[j]) -- nil: the outputs do not depend on the input
      if not S.equal(g._shape, diff[j]._shape) then
        return fail(string.format("grad of input %d has shape %s, input has %s", diff_pos[j], S.str(g._shape),
          S.str(diff[j]._shape)))
      end
      analytic[j] = g:astype("f64"):_flat()
    end
  else
    for j, x in ipairs(diff) do
      local z = {}
      for e = 1, S.numel(x._shape) do z[e] = 0 end
      analytic[j] = z
    end
  end

  -- numeric: central differences of sum(v * fn(x)), one element at a time
  for j, x in ipairs(diff) do
    local ptrs = element_pointers(x)
    for e, p in ipairs(ptrs) do
      local orig = p[0]
      p[0] = orig + eps
      local fp = project(float_outputs(fn, inputs), vs)
      p[0] = orig - eps
      local fm = project(float_outputs(fn, inputs), vs)
      p[0] = orig
      local num = (fp - fm) / (2 * eps)
      local ana = analytic[j][e]
      if not (math.abs(ana - num) <= atol + rtol * math.abs(num)) then
        return fail(string.format("input %d %s, element %d: analytic %.10g vs numeric %.10g (atol %g, rtol %g)",
          diff_pos[j], S.str(x._shape), e, ana, num, atol, rtol))
      end
    end
  end
  return true
end

-- second derivatives: gradcheck of x -> grad(fn(x), x, v) with create_graph, v also checked
function M.gradgradcheck(fn, inputs, opts)
  opts = opts or {}
  local outs = float_outputs(fn, inputs)
  local rand = lcg((opts.seed or 12345) + 1)
  local n = table.maxn(inputs)
  local all = {}
  for i = 1, n do all[i] = inputs[i] end
  local diff_idx = {}
  for i = 1, n do if is_tensor(inputs[i]) and rawget(inputs[i], "requires_grad") then
    diff_idx[#diff_idx + 1] = i end end
  local nv = 0
  for _, o in ipairs(outs) do
    if rawget(o, "requires_grad") then
      local v = {}
      for i = 1, S.numel(o._shape) do v[i] = rand() end
      nv = nv + 1
      all[n + nv] = ops.tensor(v, { dtype = o.dtype }):reshape(o._shape):requires_grad_()
    end
  end
  local function first_grads(...)
    local args = { ... }
    local xs_all, ys = {}, {}
    for i = 1, n do xs_all[i] = args[i] end
    for _, o in ipairs(float_outputs(fn, xs_all)) do if rawget(o, "requires_grad") then ys[#ys + 1] = o end end
    local xs, vs = {}, {}
    for k, i in ipairs(diff_idx) do xs[k] = args[i] end
    for k = 1, nv do vs[k] = args[n + k] end
    local gs = autograd.grad(ys, xs, { grad_outputs = vs, create_graph = true, allow_unused = true })
    for k = 1, #xs do gs[k] = gs[k] or ops.zeros_like(xs[k]) end -- nil: the outputs do not depend on the input
    return gs
  end
  return M.gradcheck(first_grads, all, opts)
end

return M
