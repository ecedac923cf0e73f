-- autograd.lua: backward() over the tape (nodes recorded by tape.lua), ds.grad, no_grad, sum_to.
local state = require("ds.state")
local errors = require("ds.errors")
local dtype = require("ds.dtype")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local tape = require("ds.tape")
local D = require("ds.dispatch")
local F = require("ds.ops.common").functions -- zeros_like, ones_like, clone, tensor, ... (the op families)

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
        local child = n.needs[i] -- the edge recorded with the node (tape.maybe_record)
        if type(child) ~= "table" then child = nil end
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

-- a node already run without retain_graph cannot run again
local function check_freed(name, node)
  if node.freed then
    errors.raise(name .. ": trying to backward through the graph a second time (its " .. node.def.name .. " step "
      .. "already ran); pass retain_graph = true to the first backward if you need to backward twice")
  end
end

-- What PyTorch 1.13's backward formulas save, for the ops whose verdict on an in-place write differs from reading
-- what ds's backward reads: f(node) -> saved inputs, saved outputs (sets of indices). An op not listed raises when
-- its backward reads the value of an input or output written in place since the op ran (PyTorch's rule for what
-- it saved); a listed one raises when what PyTorch saves was written, and otherwise reads the value from before
-- the write when ds kept it (an in-place op under autograd keeps it), raising only when it did not.
local NONE = function() return {}, {} end
local function result() return {}, { true } end
local function product(node) -- mul, matmul: each operand is saved for the other's gradient
  return { node.needs[2] and true or nil, node.needs[1] and true or nil }, {}
end
local TORCH_SAVES = { add = NONE, sub = NONE, neg = NONE, sum = NONE, mean = NONE, contiguous = NONE,
  astype = NONE, relu = result, sigmoid = result, tanh = result, exp = result, sqrt = result, mul = product,
  matmul = product, div = function(node)
    return { node.needs[2] and true or nil, (node.needs[1] or node.needs[2]) and true or nil }, {}
  end }

-- a stand-in for a value written in place since the node saved it: its shape and dtype can be read, its value
-- cannot (reading it raises PyTorch's error)
local Stale = { __metatable = "ds.Tensor" }
Stale.__index = function(t, k)
  if k == "shape" then local s = {}; for i, d in ipairs(t._shape) do s[i] = d end; return s end
  if k == "ndim" then return #t._shape end
  if k == "size" or k == "dim" or k == "numel" or k == "nDimension" then return Tensor[k] end
  errors.raise(rawget(t, "_message"))
end

local function modified_message(name, node, what, x, now, expected)
  return string.format("%s: one of the variables needed for gradient computation has been modified by an inplace "
    .. "operation: [%s %s], %s of %s, is at version %d; expected version %d instead (it was written in place after "
    .. "%s used it). Hint: clone it before the in-place write (x = x:clone()), or use the out-of-place form", name,
    x.dtype, S.str(x._shape), what, node.def.name, now, expected, node.def.name)
end

-- the ctx node.def.backward gets: node itself when nothing it saved was written in place since, else a view of it
-- whose inputs/outputs hold, for the written ones, the value before the write or a stand-in that raises when read
local function backward_ctx(name, node)
  local versions, out_versions, stale = node.versions, node.out_versions, node.stale
  local changed_in, changed_out
  for i, x in ipairs(node.inputs) do
    local now, was = tape.version(x) or 0, versions and versions[i] or 0
    if now ~= was then changed_in = changed_in or {}; changed_in[i] = { now, was } end
  end
  for j, o in ipairs(node.outputs) do
    local now, was = tape.version(o) or 0, out_versions and out_versions[j] or 0
    if stale and stale[j] then now, was = stale[j], stale[j] - 1 end
    if now ~= was then changed_out = changed_out or {}; changed_out[j] = { now, was } end
  end
  if not changed_in and not changed_out then return node end
  local saves = TORCH_SAVES[node.def.name] or node.def.view and NONE
  local saved_in, saved_out = {}, {}
  if saves then saved_in, saved_out = saves(node) end
  local function stand_in(x, what, v)
    local msg = modified_message(name, node, what, x, v[1], v[2])
    if state.trace then errors.raise(msg) end -- traced: no stand-ins (the tracer reads raw fields)
    return setmetatable({ _shape = x._shape, dtype = x.dtype, _message = msg }, Stale)
  end
  local ins, outs = {}, {}
  for i, x in ipairs(node.inputs) do
    local v = changed_in and changed_in[i]
    ins[i] = x
    if v then
      if saved_in[i] then errors.raise(modified_message(name, node, "input " .. i, x, v[1], v[2])) end
      local before = tape.edge_key(node, i) -- the value before the write, when an in-place op kept it
      ins[i] = saves and before ~= x and before or stand_in(x, "input " .. i, v)
    end
  end
  for j, o in ipairs(node.outputs) do
    local v = changed_out and changed_out[j]
    outs[j] = o
    if v then
      if saved_out[j] then errors.raise(modified_message(name, node, "output " .. j, o, v[1], v[2])) end
      -- rebased (tape.rebase): o holds the value before the write; else written without autograd: not kept
      if not (saves and stale and stale[j]) then outs[j] = stand_in(o, "output " .. j, v) end
    end
  end
  return setmetatable({ inputs = ins, outputs = outs }, { __index = node })
end

-- a node whose backward ran without retain_graph lets go of what it saved (its inputs, attrs, their versions and
-- needs), as PyTorch frees saved tensors; its outputs stay (they hold the node). Returns the C bytes of its
-- outputs, dead once the caller drops them.
local function release(node)
  node.freed, node.inputs, node.attrs, node.versions, node.needs = true, {}, {}, nil, {}
  if node.def.release then node.def.release() end -- a custom Function's saved tensors
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
          if not gouts[i] and rawget(o, "_grad_fn") == node and not node.def.lazy_grads then
            gouts[i] = F.zeros_like(o)
          end
        end
        check_freed(name, node)
        local gins = { node.def.backward(backward_ctx(name, node), unpack(gouts, 1, #node.outputs)) }
        for i, inp in ipairs(node.inputs) do
          local gi = gins[i]
          if gi ~= nil and node.needs[i] then
            if not S.equal(gi._shape, inp._shape) then
              error(string.format("internal: %s backward gave grad %s for input %d of shape %s", node.def.name,
                S.str(gi._shape), i, S.str(inp._shape)), 0)
            end
            accumulate(grads, tape.edge_key(node, i), gi)
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
local backward = args.wrap("backward", { "tensor", "tensor|table?", "table?" }, function(y, grad, opts)
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

local function requires_grad_(x, on)
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
local function register_hook(x, fn)
  if not requires(x) then errors.raise("register_hook: the tensor does not require grad") end
  if type(fn) ~= "function" then errors.raise("register_hook: expects a function, got " .. type(fn)) end
  return add_hook(x, { fn = fn })
end

local function retains_grad(x)
  if rawget(x, "_grad_fn") == nil then return false end
  for _, h in ipairs(rawget(x, "_hooks") or {}) do if h.retain then return true end end
  return false
end
-- keep the grad of a non-leaf in .grad after backward (leaves keep theirs anyway)
local function retain_grad(x)
  if not requires(x) then errors.raise("retain_grad: the tensor does not require grad") end
  if rawget(x, "_grad_fn") ~= nil and not retains_grad(x) then add_hook(x, { retain = true }) end
  return x
end

-- ---- in-place ops while autograd records (dispatch calls tape.inplace) ----
-- PyTorch's rules: a leaf that requires grad (or a view of one) may not be written; any other tensor may, and the
-- write rebases its history: the value before the write takes its place for the nodes that read it (tape.rebase),
-- the op runs out of place on that value, the result is copied in and the tensor takes the result's place
-- (tape.adopt). A view's write goes into its base: base' = base with the view's elements replaced (index_copy on
-- the flat base), and the view reads base' (PyTorch's CopySlices).

-- x's value copied into out with autograd off (dispatch bumps out's version)
local function write_into(out, x)
  local prev = state.grad_enabled
  state.grad_enabled = false
  local ok, err = pcall(Tensor.copy_, out, x)
  state.grad_enabled = prev
  if not ok then error(err, 0) end
end

-- the 1-based positions of view v's elements in its base's storage, as an i64 tensor of v's numel
local function positions(v)
  local shape, strides, n = v._shape, v:strides(), S.numel(v._shape)
  local list, idx = {}, {}
  for d = 1, #shape do idx[d] = 0 end
  for k = 1, n do
    local p = v:storage_offset()
    for d = 1, #shape do p = p + idx[d] * strides[d] end
    list[k] = p + 1
    for d = #shape, 1, -1 do
      idx[d] = idx[d] + 1
      if idx[d] < shape[d] then break end
      idx[d] = 0
    end
  end
  return F.tensor(list, { dtype = "i64" })
end

-- view v (of a base that requires grad) read from its base's history: the flat base at v's positions
local function read_view(base, v)
  return base:reshape(-1):index_select(1, positions(v)):reshape(v._shape)
end

local function refuse_leaf(name, x, base)
  if requires(x) and rawget(x, "_grad_fn") == nil then
    errors.raise(name .. ": a leaf Variable that requires grad is being used in an in-place operation; wrap the "
      .. "write in ds.no_grad or use the out-of-place form")
  end
  if base and requires(base) and rawget(base, "_grad_fn") == nil then
    errors.raise(name .. ": a view of a leaf Variable that requires grad is being used in an in-place operation; "
      .. "wrap the write in ds.no_grad or use the out-of-place form")
  end
end

local function replaced(inputs, from, to)
  local ins = {}
  for i = 1, #inputs do ins[i] = inputs[i] == from and to or inputs[i] end
  return ins
end

-- traced: a narrow of its base (the tracer's _region) is written with index_copy along the narrowed dim
local function inplace_region(def, inputs, attrs, metas, out, base, region)
  local bsrc = base:detach()
  tape.rebase(base, bsrc)
  if rawget(out, "_grad_fn") then tape.rebase(out, out:detach()) end
  local vold = bsrc:narrow(region.dim, region.start, region.length)
  local r = D.execute(def, replaced(inputs, out, vold), attrs, metas)[1]
  local index = D.call(D.by_name.arange, {}, { start = region.start, step = 1, length = region.length, dtype = "i64" })
  local bnew = F.index_copy(bsrc, region.dim, index, r)
  local vnew = bnew:narrow(region.dim, region.start, region.length)
  write_into(out, r) -- the tracer writes it into the base (Tracer:write_region)
  tape.adopt(base, bnew)
  tape.adopt(out, vnew)
  return out
end

local function inplace_view(def, inputs, attrs, metas, out, base, name)
  if state.trace then
    local region = rawget(out, "_region")
    if region then return inplace_region(def, inputs, attrs, metas, out, base, region) end
    errors.raise(name .. ": in-place op on a view other than a narrow of its base while autograd records, inside a "
      .. "traced function; write into the tensor it views, or use the out-of-place form")
  end
  if not base:is_contiguous() or base:storage_offset() ~= 0 then
    errors.raise(name .. ": in-place op on a view of a non-contiguous tensor while autograd records; clone the "
      .. "tensor first")
  end
  if S.numel(out._shape) == 0 then return out end
  local p = positions(out)
  local bsrc = base:detach():clone()
  tape.rebase(base, bsrc)
  if rawget(out, "_grad_fn") then tape.rebase(out, out:detach():clone()) end
  local flat = bsrc:reshape(-1)
  local vold = flat:index_select(1, p):reshape(out._shape)
  local r = D.execute(def, replaced(inputs, out, vold), attrs, metas)[1]
  local bnew = flat:index_copy(1, p, r:reshape(-1)):reshape(base._shape)
  local vnew = bnew:reshape(-1):index_select(1, p):reshape(out._shape)
  write_into(base, bnew)
  tape.adopt(base, bnew)
  tape.adopt(out, vnew)
  return out
end

-- the node of a write by an op without gradient (fill_, zero_) into a tensor of a graph: PyTorch's FillBackward
local NO_GRADIENT = { name = "fill", backward = function(_, g) return F.zeros_like(g) end }

function tape.inplace(def, inputs, attrs, metas, out)
  local name = def.inplace_name or def.name .. "_"
  local base = rawget(out, "_base")
  refuse_leaf(name, out, base)
  if base then return inplace_view(def, inputs, attrs, metas, out, base, name) end
  local src = state.trace and out:detach() or out:detach():clone()
  tape.rebase(out, src)
  local r = D.execute(def, replaced(inputs, out, src), attrs, metas)[1]
  write_into(out, r)
  if rawget(r, "_grad_fn") then
    tape.adopt(out, r)
  else -- an op without gradient (fill_, zero_): a zero gradient for the old value
    rawset(out, "requires_grad", nil)
    rawset(out, "_grad_fn", nil)
    tape.maybe_record(NO_GRADIENT, { src }, {}, { out })
  end
  return out
end

function tape.refresh_view(v)
  local base = rawget(v, "_base")
  if not rawget(v, "_c") or not requires(base) or not base:is_contiguous() or base:storage_offset() ~= 0 then return end
  local r = read_view(base, v)
  tape.adopt(v, r)
end

-- a tensor sharing storage, cut from the tape
local function detach(x)
  local y
  if x._c then
    y = Tensor._view(x, x._shape, x:strides(), x:storage_offset())
  else
    y = state.trace.detach(x)
  end
  return y
end

Tensor._define("ds.autograd", { backward = backward, requires_grad_ = requires_grad_, register_hook = register_hook,
                                retain_grad = retain_grad, retains_grad = retains_grad, detach = detach })

return M
