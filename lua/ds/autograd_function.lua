-- autograd_function.lua: ds.autograd.Function, custom autograd functions as PyTorch's torch.autograd.Function:
-- static forward(ctx, ...) and backward(ctx, grad...) written with ds ops, applied with MyFn.apply(...).
-- forward runs with grad off; its outputs are linked to one tape node whose backward calls the user's, so the
-- user's gradient is used eagerly and, as backward is ds ops, inside traced and compiled training steps.
local state = require("ds.state")
local errors = require("ds.errors")
local dtype = require("ds.dtype")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local tape = require("ds.tape")
local F = require("ds.ops")

local M = {}
local is_tensor = Tensor.is_tensor

-- ---- the context (ctx) forward and backward share ----
local Ctx = {}
local ctx_mt = {}

-- ctx:save_for_backward(t1, t2, ...): tensors (or nil) backward reads back as ctx.saved_tensors; their versions
-- are kept, and reading them after one was written in place raises PyTorch's error
function Ctx.save_for_backward(ctx, ...)
  local n = select("#", ...)
  local saved, versions = { n = n }, {}
  for i = 1, n do
    local t = select(i, ...)
    if t ~= nil and not is_tensor(t) then
      errors.raise(string.format("save_for_backward: argument %d must be a tensor or nil, got %s", i, type(t)))
    end
    saved[i] = t
    versions[i] = t and tape.version(t) or 0
  end
  rawset(ctx, "_saved", saved)
  rawset(ctx, "_saved_versions", versions)
end

-- ctx:mark_non_differentiable(t, ...): outputs that get no gradient (backward receives zeros, or nil without
-- materialized grads, for them)
function Ctx.mark_non_differentiable(ctx, ...)
  local set = rawget(ctx, "_non_diff")
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if not is_tensor(t) then errors.raise("mark_non_differentiable: arguments must be tensors, got " .. type(t)) end
    set[t] = true
  end
end

-- ctx:set_materialize_grads(false): backward gets nil instead of zeros for outputs without a gradient
function Ctx.set_materialize_grads(ctx, on)
  if type(on) ~= "boolean" then errors.raise("set_materialize_grads: expects a boolean, got " .. type(on)) end
  rawset(ctx, "materialize_grads", on)
end

function Ctx.mark_dirty()
  errors.raise("mark_dirty: in-place forwards are not supported by ds.autograd.Function; return a new tensor")
end

ctx_mt.__index = function(ctx, k)
  if k == "saved_tensors" then
    local saved = rawget(ctx, "_saved")
    if not saved then return {} end
    local versions, out = rawget(ctx, "_saved_versions"), {}
    for i = 1, saved.n do
      local t = saved[i]
      if t and (tape.version(t) or 0) ~= versions[i] then
        errors.raise(string.format("%s: one of the variables needed for gradient computation has been modified by "
          .. "an inplace operation: [%s %s], saved tensor %d, is at version %d; expected version %d instead. Hint: "
          .. "clone it before the in-place write", rawget(ctx, "_name"), t.dtype, S.str(t._shape), i,
          tape.version(t) or 0, versions[i]))
      end
      out[i] = t
    end
    return out
  end
  return Ctx[k]
end

-- ---- applying a Function ----
local function check_class(cls, what)
  if type(cls) ~= "table" or rawget(cls, "_is_function") ~= true then
    errors.raise(what .. ": call it on a Function class (MyFn.apply(...) or MyFn:apply(...))")
  end
end

-- the node's backward: the user's backward with one grad per forward output, its results mapped back to the
-- tensor inputs (nil for the others); checks their number and shapes as PyTorch does
local function node_backward(cls, ctx, info)
  return function(node, ...)
    local gin = { ... }
    local grads, n = {}, info.noutputs
    local materialize = rawget(ctx, "materialize_grads") ~= false
    for j = 1, n do
      local k = info.node_index[j]
      local g = k and gin[k]
      if g == nil and materialize then g = F.zeros_like(info.outputs[j]) end
      grads[j] = g
    end
    local res = { n = 0 }
    local function keep(...) res = { n = select("#", ...), ... } end
    keep(cls.backward(ctx, unpack(grads, 1, n)))
    local nargs = info.nargs
    local last = res.n
    while last > nargs and res[last] == nil do last = last - 1 end
    if last ~= nargs then
      errors.raise(string.format("%s: function backward returned an incorrect number of gradients (expected %d, got "
        .. "%d)", cls._name, nargs, res.n))
    end
    local out = {}
    for k, pos in ipairs(info.tensor_pos) do
      local g, x = res[pos], info.args[pos]
      if g ~= nil then
        if not is_tensor(g) then
          errors.raise(string.format("%s: backward's gradient %d must be a tensor or nil, got %s", cls._name, pos,
            type(g)))
        end
        if not S.equal(g._shape, x._shape) then
          errors.raise(string.format("%s: function backward returned an invalid gradient at index %d - got %s but "
            .. "expected shape compatible with %s", cls._name, pos, S.str(g._shape), S.str(x._shape)))
        end
        if g.dtype ~= x.dtype then g = g:astype(x.dtype) end
      end
      out[k] = g
    end
    return unpack(out, 1, #info.tensor_pos)
  end
end

local function apply(cls, ...)
  check_class(cls, "apply")
  local nargs = select("#", ...)
  local argv = { ... }
  local tensor_pos, tensors, needs, any = {}, {}, {}, false
  for i = 1, nargs do
    local a = argv[i]
    needs[i] = false
    if is_tensor(a) then
      tensor_pos[#tensor_pos + 1] = i
      tensors[#tensors + 1] = a
      needs[i] = state.grad_enabled and tape.requires(a)
      any = any or needs[i]
    end
  end
  local ctx = setmetatable({ needs_input_grad = needs, _non_diff = {}, _name = cls._name }, ctx_mt)
  local prev = state.grad_enabled
  state.grad_enabled = false
  local res = { pcall(cls.forward, ctx, ...) }
  state.grad_enabled = prev
  if not res[1] then error(res[2], 0) end
  local nres = table.maxn(res) - 1
  local outputs = {}
  for j = 1, nres do
    local o = res[j + 1]
    if type(o) == "table" and not is_tensor(o) and is_tensor(o[1]) then
      errors.raise(cls._name .. ": forward returned a list of tensors; return them as several values (return a, b)")
    end
    -- an input returned as it is: the output is a new tensor sharing its storage, so the input's own history stays
    if is_tensor(o) and (rawget(o, "_grad_fn") or rawget(o, "requires_grad")) then o = o:detach() end
    outputs[j] = o
  end
  if not any then return unpack(outputs, 1, nres) end
  local diff, node_index = {}, {}
  for j = 1, nres do
    local o = outputs[j]
    if is_tensor(o) and dtype.is_float[o.dtype] and not rawget(ctx, "_non_diff")[res[j + 1]] then
      diff[#diff + 1] = o
      node_index[j] = #diff
    end
  end
  if #diff > 0 then
    local info = { noutputs = nres, outputs = outputs, node_index = node_index, nargs = nargs, args = argv,
      tensor_pos = tensor_pos }
    local def = { name = cls._name, backward = node_backward(cls, ctx, info), lazy_grads = true,
      release = function() rawset(ctx, "_saved", nil) end } -- backward ran without retain_graph: free what it saved
    tape.maybe_record(def, tensors, {}, diff)
  end
  return unpack(outputs, 1, nres)
end

-- ds.autograd.Function:extend(name) -> a Function class; define MyFn.forward(ctx, ...) and
-- MyFn.backward(ctx, grad...) (static, as PyTorch's), then call MyFn.apply(...) or MyFn:apply(...)
local Function = { _name = "Function", _is_function = true }
M.Function = Function

-- MyFn.forward(ctx, ...): the computation (run with grad off) returning the outputs; define it on the class
function Function.forward(ctx)
  errors.raise((rawget(ctx, "_name") or "Function") .. ": forward is not implemented")
end
-- MyFn.backward(ctx, grad...): one gradient per forward argument (nil for the non-tensors) from one per output
function Function.backward(ctx)
  errors.raise((rawget(ctx, "_name") or "Function") .. ": backward is not implemented")
end

-- Function:extend([name]) -> a subclass (named for errors)
function Function.extend(parent, name)
  check_class(parent, "Function:extend")
  if name ~= nil and type(name) ~= "string" then errors.raise("Function:extend: name must be a string") end
  local cls = setmetatable({ _name = name or "Function", _is_function = true }, { __index = parent })
  -- MyFn.apply(...) and MyFn:apply(...) both work: a leading class argument is the class itself
  cls.apply = function(first, ...)
    if first == cls then return apply(cls, ...) end
    return apply(cls, first, ...)
  end
  return cls
end
-- MyFn.apply(...) or MyFn:apply(...): forward's outputs, linked to backward when an input requires grad (on a class
-- made by Function:extend)
Function.apply = function() errors.raise("Function.apply: extend Function first (MyFn = Function:extend('MyFn'))") end

return M
