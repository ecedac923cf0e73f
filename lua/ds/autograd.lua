-- autograd.lua: backward() over the tape (nodes recorded by tape.lua), ds.grad, no_grad, sum_to.
local state = require("ds.state")
local errors = require("ds.errors")
local dtype = require("ds.dtype")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local tape = require("ds.tape")
local F = require("ds.ops.common").functions -- zeros_like, ones_like (ops/creation.lua)

local M = {}
local is_tensor = Tensor.is_tensor

local options = require("ds.options")
local args = require("ds.args")
local requires = tape.requires

-- Sum g down to shape (undo broadcasting): leading dims, then dims that were 1.
function M.sum_to(g, shape)
  local gs = g._shape
  if S.equal(gs, shape) then return g end
  local lead = #gs - #shape
  local dims = {}
  for i = 1, #gs do
    local j = i - lead
    if j < 1 or (shape[j] == 1 and gs[i] ~= 1) then dims[#dims + 1] = i end
  end
  local r = g
  if #dims > 0 then r = g:sum(dims, true) end
  if lead > 0 or #dims > 0 then r = r:reshape(shape) end
  return r
end

-- topological order of nodes reachable from roots (outputs first)
local function toposort(roots)
  local order, seen = {}, {}
  local function visit(node)
    if seen[node] then return end
    seen[node] = true
    local stack = { { node, 1 } }
    while #stack > 0 do
      local top = stack[#stack]
      local n, i = top[1], top[2]
      if i > #n.inputs then
        stack[#stack] = nil
        order[#order + 1] = n
      else
        top[2] = i + 1
        local child = rawget(n.inputs[i], "_grad_fn")
        if child and not seen[child] then seen[child] = true; stack[#stack + 1] = { child, 1 } end
      end
    end
  end
  for _, r in ipairs(roots) do visit(r) end
  -- order is post-order (inputs before users); reverse for backward
  local rev = {}
  for i = #order, 1, -1 do rev[#rev + 1] = order[i] end
  return rev
end

local function accumulate(map, key, g)
  local cur = map[key]
  map[key] = cur and cur + g or g
end

-- a tensor's complete grad g passes through its hooks in registration order (each may return a
-- replacement); retain_grad's entry stores the grad as it is at that point in .grad (torch 1.13's order)
local function run_hooks(t, g, create_graph)
  for _, h in ipairs(rawget(t, "_hooks") or {}) do
    if h.retain then
      local keep = create_graph and g or g:detach()
      local cur = rawget(t, "grad")
      rawset(t, "grad", cur and cur + keep or keep)
    else
      local r = h.fn(g)
      if r ~= nil then
        if not is_tensor(r) or not S.equal(r._shape, g._shape) then
          errors.raise("register_hook: a hook must return nil or a tensor of the grad's shape " .. S.str(g._shape))
        end
        g = r
      end
    end
  end
  return g
end

-- a given grad of output y: a tensor of y's shape and dtype (name: the caller, backward or grad)
local function check_grad_output(name, i, y, g)
  if not is_tensor(g) then
    errors.raise(string.format("%s: the grad of output %d must be a tensor, got %s", name, i, type(g)))
  end
  if not S.equal(g._shape, y._shape) or g.dtype ~= y.dtype then
    errors.raise(string.format("%s: the grad of output %d has shape %s and dtype %s, but the output has shape %s " ..
      "and dtype %s",
      name, i, S.str(g._shape), g.dtype, S.str(y._shape), y.dtype))
  end
end

-- a node's inputs still hold the values it was given (an input written by x[key] = v since is an error, as
-- PyTorch's version counters make it); a node already run without retain_graph cannot run again
local function check_runnable(name, node)
  if node.freed then
    errors.raise(name .. ": trying to backward through the graph a second time (its " .. node.def.name .. " step "
      .. "already ran); pass retain_graph = true to the first backward if you need to backward twice")
  end
  local versions = node.versions
  for i, inp in ipairs(node.inputs) do
    if tape.version(inp) ~= (versions and versions[i]) then
      errors.raise(string.format("%s: input %d of %s was written in place (x[key] = v) after %s used it; clone "
        .. "it before the write (x = x:clone())", name, i, node.def.name, node.def.name))
    end
  end
end

-- a node whose backward ran without retain_graph lets go of what it saved (its inputs, attrs, their versions and
-- needs), as PyTorch frees saved tensors; its outputs stay (they hold the node). Returns the C bytes of its
-- outputs, dead once the caller drops them.
local function release(node)
  node.freed, node.inputs, node.attrs, node.versions, node.needs = true, {}, {}, nil, {}
  local bytes = 0
  for _, o in ipairs(node.outputs) do bytes = bytes + Tensor._c_bytes(o) end
  return bytes
end

-- Core engine: returns grads keyed by tensor for `wanted` (or accumulates into leaves' .grad).
-- name: the public caller (backward or grad) for errors; retain: keep the nodes runnable for another backward
local function run_backward(name, outputs, grad_outputs, create_graph, wanted, retain)
  local grads = {}  -- tensor -> grad
  local roots = {}
  if type(outputs) ~= "table" or is_tensor(outputs) then
    errors.raise(name .. ": outputs must be a tensor or a list of tensors")
  end
  if grad_outputs ~= nil and (type(grad_outputs) ~= "table" or is_tensor(grad_outputs)) then
    errors.raise(name .. ": grad_outputs must be a tensor or a list of tensors")
  end
  if #outputs == 0 then errors.raise(name .. ": no outputs given") end
  for i = 1, table.maxn(outputs) do
    local y = outputs[i]
    if not is_tensor(y) then errors.raise(string.format("%s: output %d must be a tensor, got %s", name, i, type(y))) end
    if not requires(y) then
      errors.raise(name .. ": output " .. i ..
        " does not require grad (no input of its graph has requires_grad = true)")
    end
    local g = grad_outputs and grad_outputs[i]
    if g == nil then
      if S.numel(y._shape) ~= 1 then
        errors.raise(name .. ": output " .. i .. " has shape " .. S.str(y._shape) ..
          "; grad can be implicit only for scalar outputs")
      end
      g = F.ones_like(y)
    else
      check_grad_output(name, i, y, g)
    end
    accumulate(grads, y, g)
    local fn = rawget(y, "_grad_fn")
    if fn then roots[#roots + 1] = fn end
  end
  local prev = state.grad_enabled
  state.grad_enabled = create_graph and true or false
  local dropped = 0 -- C bytes of the outputs of the nodes released
  local ok, err = pcall(function()
    for _, node in ipairs(toposort(roots)) do
      local gouts, any = {}, false
      for i, o in ipairs(node.outputs) do
        gouts[i] = grads[o] and run_hooks(o, grads[o], create_graph)
        if gouts[i] then any = true end
        grads[o] = wanted and wanted[o] and gouts[i] or nil
      end
      if any then
        for i, o in ipairs(node.outputs) do
          if not gouts[i] and rawget(o, "_grad_fn") == node then gouts[i] = F.zeros_like(o) end
        end
        check_runnable(name, node)
        local gins = { node.def.backward(node, unpack(gouts, 1, #node.outputs)) }
        for i, inp in ipairs(node.inputs) do
          local gi = gins[i]
          if gi ~= nil and node.needs[i] then
            if not S.equal(gi._shape, inp._shape) then
              error(string.format("internal: %s backward gave grad %s for input %d of shape %s", node.def.name,
                S.str(gi._shape), i, S.str(inp._shape)), 0)
            end
            accumulate(grads, inp, gi)
          end
        end
        if not retain then dropped = dropped + release(node) end
      end
    end
  end)
  state.grad_enabled = prev
  if not ok then error(err, 0) end
  Tensor._graph_dropped(dropped)
  for t, g in pairs(grads) do
    if rawget(t, "_grad_fn") == nil and rawget(t, "_hooks") then grads[t] = run_hooks(t, g, create_graph) end
  end
  return grads
end

-- the tensors of a list option (name: the caller's and the option's) as a set
local function tensor_set(list, what)
  if is_tensor(list) then list = { list } end
  local set = {}
  for i = 1, table.maxn(list) do
    local x = list[i]
    if not is_tensor(x) then errors.raise(string.format("%s %d must be a tensor, got %s", what, i, type(x))) end
    if not requires(x) then errors.raise(string.format("%s %d does not require grad", what, i)) end
    set[x] = true
  end
  return set
end

-- register_backward_end_hook(fn): fn(written) runs at the end of every y:backward(), after the .grad writes
-- (written: the set of tensors whose .grad the call wrote), in registration order (ds.nn.DistributedDataParallel
-- averages its gradients there). Returns a handle whose :remove() unregisters it; the hook lives as long as the
-- handle (keep it).
local end_hooks = setmetatable({}, { __mode = "v" })
function M.register_backward_end_hook(fn)
  if type(fn) ~= "function" then errors.raise("register_backward_end_hook: expects a function, got " .. type(fn)) end
  local h, i = { fn = fn }, table.maxn(end_hooks) + 1
  end_hooks[i] = h
  function h.remove() if end_hooks[i] == h then end_hooks[i] = nil end end
  return h
end

-- y:backward([grad] [, {create_graph =, retain_graph =, inputs =}]): accumulate into .grad of leaves that
-- require grad (or of the tensors of inputs only); grad has y's shape and dtype (optional when y has one element)
Tensor.backward = args.wrap("backward", { "tensor", "tensor|table?", "table?" }, function(y, grad, opts)
  if type(grad) == "table" and not is_tensor(grad) then opts, grad = grad, nil end
  opts = options.check(opts, "backward", { create_graph = "boolean", retain_graph = "boolean", inputs = "table" })
  local only = opts.inputs and tensor_set(opts.inputs, "backward: inputs element")
  local retain = opts.retain_graph
  if retain == nil then retain = opts.create_graph end
  local grads = run_backward("backward", { y }, { grad }, opts.create_graph, only, retain)
  local written = {}   -- the tensors whose .grad this call wrote
  for t, g in pairs(grads) do
    if only and only[t] or not only and rawget(t, "_grad_fn") == nil and requires(t) then
      if not opts.create_graph then g = g:detach() end
      -- a leaf's .grad owns its memory (like PyTorch): never an expanded or aliased view
      if rawget(g, "_c") and (rawget(g, "_base") or not g:is_contiguous()) then g = g:clone() end
      local cur = rawget(t, "grad")
      rawset(t, "grad", cur and cur + g or g)
      written[t] = true
    end
  end
  for i = 1, table.maxn(end_hooks) do
    local h = end_hooks[i]
    if h then h.fn(written) end
  end
end)

-- ds.grad(outputs, inputs, {grad_outputs =, create_graph =, retain_graph =, allow_unused =}) -> list of grads
-- (nil for an input the outputs do not depend on, with allow_unused)
M.grad = args.wrap("grad", { "tensor|table", "tensor|table", "table?" }, function(outputs, inputs, opts)
  opts = options.check(opts, "grad", { grad_outputs = "any", create_graph = "boolean", retain_graph = "boolean",
    allow_unused = "boolean" })
  if is_tensor(outputs) then outputs = { outputs } end
  if is_tensor(inputs) then inputs = { inputs } end
  local wanted = tensor_set(inputs, "grad: input")
  local go = opts.grad_outputs
  if is_tensor(go) then go = { go } end
  local retain = opts.retain_graph
  if retain == nil then retain = opts.create_graph end
  local grads = run_backward("grad", outputs, go, opts.create_graph, wanted, retain)
  local out = {}
  for i = 1, table.maxn(inputs) do
    local x = inputs[i]
    local g = grads[x]
    if g == nil then
      if not opts.allow_unused then
        errors.raise("grad: input " .. i .. " was not used to compute the outputs (pass allow_unused = true)")
      end
    elseif not opts.create_graph then
      g = g:detach()
    end
    out[i] = g
  end
  return out
end)

M.no_grad = args.wrap("no_grad", { "function" }, function(fn, ...)
  local prev = state.grad_enabled
  state.grad_enabled = false
  local res = { pcall(fn, ...) }
  state.grad_enabled = prev
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end)

M.enable_grad = args.wrap("enable_grad", { "function" }, function(fn, ...)
  local prev = state.grad_enabled
  state.grad_enabled = true
  local res = { pcall(fn, ...) }
  state.grad_enabled = prev
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end)

function M.set_grad_enabled(on)
  local prev = state.grad_enabled
  state.grad_enabled = on and true or false
  return prev
end
function M.is_grad_enabled() return state.grad_enabled end

function Tensor.requires_grad_(x, on)
  if on == nil then on = true end
  if on and not dtype.is_float[x.dtype] then
    errors.raise("requires_grad_: only floating point tensors can require grad (got " .. x.dtype .. ")")
  end
  rawset(x, "requires_grad", on and true or false)
  return x
end

local function add_hook(x, h)
  local hooks = rawget(x, "_hooks")
  if not hooks then hooks = {}; rawset(x, "_hooks", hooks) end
  hooks[#hooks + 1] = h
  function h.remove()
    for i, e in ipairs(hooks) do if e == h then table.remove(hooks, i); return end end
  end
  return h
end

-- fn(grad) runs when x's grad has been computed; it may return a replacement. Returns a handle
-- whose :remove() unregisters the hook.
function Tensor.register_hook(x, fn)
  if not requires(x) then errors.raise("register_hook: the tensor does not require grad") end
  if type(fn) ~= "function" then errors.raise("register_hook: expects a function, got " .. type(fn)) end
  return add_hook(x, { fn = fn })
end

-- keep the grad of a non-leaf in .grad after backward (leaves keep theirs anyway)
function Tensor.retain_grad(x)
  if not requires(x) then errors.raise("retain_grad: the tensor does not require grad") end
  if rawget(x, "_grad_fn") ~= nil and not Tensor.retains_grad(x) then add_hook(x, { retain = true }) end
  return x
end
function Tensor.retains_grad(x)
  if rawget(x, "_grad_fn") == nil then return false end
  for _, h in ipairs(rawget(x, "_hooks") or {}) do if h.retain then return true end end
  return false
end

-- a tensor sharing storage, cut from the tape
function Tensor.detach(x)
  local y
  if x._c then
    y = Tensor._view(x, x._shape, x:strides(), x:storage_offset())
  else
    y = state.trace.detach(x)
  end
  return y
end

return M
