-- control.lua: ds.cond, ds.while_loop, ds.print: plain Lua control flow eagerly, graph nodes with
-- sub-graphs while tracing (branches and loop bodies are traced once, as functions of their operands).
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local state = require("ds.state")
local dtype = require("ds.dtype")
local Tensor = require("ds.tensor")
local Graph = require("ds.graph")
local T = require("ds.trace")
local autograd = require("ds.autograd")
local tape = require("ds.tape")
local F = require("ds.ops.common").functions

local M = {}
local is_tensor = Tensor.is_tensor

local function truth(p, opname)
  if type(p) == "boolean" then return p end
  if not is_tensor(p) then
    errors.raise(string.format("%s: predicate must be a boolean or a one-element tensor, got %s", opname, type(p)))
  end
  if p:numel() ~= 1 then
    errors.raise(string.format("%s: predicate must have one element, got shape %s", opname, S.str(p._shape)))
  end
  local v = p:item()
  return v == true or (type(v) == "number" and v ~= 0)
end

local function pack(...) return { n = select("#", ...), ... } end

-- ---- tracing sub-graphs ----
-- trace fn(operands...) as a sub-graph of the active tracer; captures go through the shared registry
local function trace_child(parent, registry, fn, operands, nops, name)
  local g = Graph.new(name)
  local tr = T.new_tracer(g, parent, registry)
  local args = {}
  for i = 1, nops do
    local x = operands[i]
    if is_tensor(x) then
      local val = parent.graph.values[parent:value_of(x)]
      local v = tr:new_value(val.shape, val.dtype, "input", "arg" .. i)
      g.inputs[#g.inputs + 1] = { name = "arg" .. i, value = v }
      args[i] = tr:abstract(v, "arg" .. i)
    else
      args[i] = x
    end
  end
  local res = T.run_traced(tr, fn, args, nops)
  if not res[1] then error(res[2], 0) end
  for i = 1, nops do
    local a = args[i]
    if is_tensor(a) and rawget(a, "_vid") ~= rawget(a, "_origin") then
      errors.raise(string.format("%s: operand %d is updated in place inside the function; return the new value "
        .. "instead (%s)", name, i, errors.user_site()))
    end
  end
  local outs = {}
  for i = 2, table.maxn(res) do
    local r = res[i]
    if not is_tensor(r) then
      errors.raise(string.format("%s: result %d is a %s; branches and loop bodies return tensors", name, i - 1, type(r)))
    end
    outs[i - 1] = r
    g.outputs[i - 1] = tr:value_of(r)
  end
  return { graph = g, tracer = tr, nresults = #outs }
end

-- every child gets an input per capture (in registry order) and an output per updated capture
-- (except a loop's cond_fn, which only reads)
local function seal(registry, children)
  local written = {}
  for k = 1, #registry.list do
    for _, c in ipairs(children) do if c.tracer.cap_written[k] then written[#written + 1] = k; break end end
  end
  for _, c in ipairs(children) do
    local g, tr = c.graph, c.tracer
    for k = 1, #registry.list do
      g.inputs[#g.inputs + 1] = { name = "capture" .. k, value = tr:capture_input(k) }
    end
    if not c.reads_only then
      for _, k in ipairs(written) do
        g.outputs[#g.outputs + 1] = tr.bound[registry.list[k]] or tr:capture_input(k)
      end
    end
    g:finalize()
  end
  return written
end

local function new_registry() return { list = {}, index = {}, outer = {} } end

local function meta_of(g, v) local val = g.values[v]; return { shape = val.shape, dtype = val.dtype } end

-- record the control node in the parent and rebind updated captures
local function emit_node(parent, def, inputs, attrs, metas, registry, written)
  local outs = parent:record_op(def, inputs, attrs, metas, nil)
  local n = attrs.nresults
  for j, k in ipairs(written) do parent:rebind(registry.list[k], parent:value_of(outs[n + j])) end
  if state.grad_enabled and def.backward then tape.maybe_record(def, inputs, attrs, outs) end
  return unpack(outs, 1, n)
end

-- ---- ds.cond ----
function M.cond(pred, then_fn, else_fn, ...)
  if type(then_fn) ~= "function" or type(else_fn) ~= "function" then
    errors.raise("cond: expects cond(pred, then_fn, else_fn, operands...)")
  end
  local tr = state.trace
  if not tr or type(pred) == "boolean" then
    if truth(pred, "cond") then return then_fn(...) end
    return else_fn(...)
  end
  if not is_tensor(pred) then errors.raise("cond: predicate must be a boolean or a one-element tensor, got " .. type(pred)) end
  if type(S.numel(pred._shape)) ~= "number" or S.numel(pred._shape) ~= 1 then
    errors.raise("cond: predicate must have one element, got shape " .. S.str(pred._shape))
  end
  local ops = pack(...)
  local registry = new_registry()
  local a = trace_child(tr, registry, then_fn, ops, ops.n, "cond_then")
  local b = trace_child(tr, registry, else_fn, ops, ops.n, "cond_else")
  if a.nresults ~= b.nresults then
    errors.raise(string.format("cond: the then branch returns %d tensors, the else branch %d (%s)", a.nresults,
      b.nresults, errors.user_site()))
  end
  for i = 1, a.nresults do
    local ma, mb = meta_of(a.graph, a.graph.outputs[i]), meta_of(b.graph, b.graph.outputs[i])
    if ma.dtype ~= mb.dtype or not S.equal(ma.shape, mb.shape) then
      errors.raise(string.format("cond: result %d is %s %s in the then branch but %s %s in the else branch (%s)", i,
        ma.dtype, S.str(ma.shape), mb.dtype, S.str(mb.shape), errors.user_site()))
    end
  end
  local written = seal(registry, { a, b })
  local inputs = { pred }
  for i = 1, ops.n do if is_tensor(ops[i]) then inputs[#inputs + 1] = ops[i] end end
  local first_capture = #inputs + 1
  for _, x in ipairs(registry.list) do inputs[#inputs + 1] = x end
  local metas = {}
  for i = 1, a.nresults do metas[i] = meta_of(a.graph, a.graph.outputs[i]) end
  for _, k in ipairs(written) do metas[#metas + 1] = meta_of(tr.graph, tr:value_of(registry.list[k])) end
  local attrs = { then_graph = a.graph, else_graph = b.graph, nresults = a.nresults, first_capture = first_capture,
                  written = written }
  return emit_node(tr, D.by_name.cond, inputs, attrs, metas, registry, written)
end

-- gradient of a traced cond: a cond whose branches differentiate the forward branches (replayed)
function M.cond_backward(ctx, ...)
  local gouts = pack(...)
  local attrs = ctx.attrs
  if #attrs.written > 0 then
    errors.raise("cond: gradients through branches that update state (random ops, in-place updates of outside "
      .. "tensors) are not supported")
  end
  local nin = #ctx.inputs - 1
  local function grad_branch(g)
    return function(...)
      local args = pack(...)
      local xs, want = {}, {}
      for i = 1, nin do
        xs[i] = args[i]:detach()
        if dtype.is_float[xs[i].dtype] then xs[i]:requires_grad_(); want[#want + 1] = i end
      end
      local outs = pack(autograd.enable_grad(function() return state.trace.inline(g, xs) end))
      local ys, gs = {}, {}
      for i = 1, attrs.nresults do
        if rawget(outs[i], "requires_grad") then ys[#ys + 1] = outs[i]; gs[#gs + 1] = args[nin + i] end
      end
      local res = {}
      for i = 1, nin do res[i] = F.zeros_like(xs[i]) end
      if #ys > 0 and #want > 0 then
        local wanted = {}
        for j, i in ipairs(want) do wanted[j] = xs[i] end
        local grads = autograd.grad(ys, wanted, { grad_outputs = gs, allow_unused = true })
        for j, i in ipairs(want) do res[i] = grads[j] end
      end
      return unpack(res, 1, nin)
    end
  end
  local operands = {}
  for i = 2, #ctx.inputs do operands[#operands + 1] = ctx.inputs[i] end
  for i = 1, attrs.nresults do
    operands[#operands + 1] = gouts[i] or F.zeros_like(ctx.outputs[i])
  end
  return nil, M.cond(ctx.inputs[1], grad_branch(attrs.then_graph), grad_branch(attrs.else_graph),
    unpack(operands, 1, #operands))
end

-- ---- ds.while_loop ----
function M.while_loop(cond_fn, body_fn, init)
  if type(cond_fn) ~= "function" or type(body_fn) ~= "function" or type(init) ~= "table" or is_tensor(init) then
    errors.raise("while_loop: expects while_loop(cond_fn, body_fn, {init values...})")
  end
  local n = table.maxn(init)
  local tr = state.trace
  if not tr then
    local vars = { unpack(init, 1, n) }
    while truth(cond_fn(unpack(vars, 1, n)), "while_loop") do
      local nxt = pack(body_fn(unpack(vars, 1, n)))
      if nxt.n ~= n then
        errors.raise(string.format("while_loop: the body returns %d values for %d loop variables", nxt.n, n))
      end
      vars = nxt
    end
    return unpack(vars, 1, n)
  end
  for i = 1, n do
    if not is_tensor(init[i]) then
      errors.raise(string.format("while_loop: loop variable %d is a %s; inside a trace loop variables are tensors", i, type(init[i])))
    end
  end
  local registry = new_registry()
  local c = trace_child(tr, registry, cond_fn, init, n, "while_cond")
  if c.nresults ~= 1 then errors.raise("while_loop: cond_fn must return one tensor (e.g. a:lt(b)), got " .. c.nresults .. " results") end
  local b = trace_child(tr, registry, body_fn, init, n, "while_body")
  if b.nresults ~= n then
    errors.raise(string.format("while_loop: the body returns %d tensors for %d loop variables (%s)", b.nresults, n, errors.user_site()))
  end
  for i = 1, n do
    local mi, mo = meta_of(tr.graph, tr:value_of(init[i])), meta_of(b.graph, b.graph.outputs[i])
    if mi.dtype ~= mo.dtype or not S.equal(mi.shape, mo.shape) then
      errors.raise(string.format("while_loop: the body turns loop variable %d from %s %s into %s %s; loop variables "
        .. "keep their shape and dtype (%s)", i, mi.dtype, S.str(mi.shape), mo.dtype, S.str(mo.shape), errors.user_site()))
    end
  end
  for k in pairs(c.tracer.cap_written) do
    errors.raise("while_loop: cond_fn updates " .. (registry.list[k] and (rawget(registry.list[k], "_name") or "a tensor") or "a tensor") .. " in place")
  end
  c.reads_only = true
  local written = seal(registry, { c, b })
  local inputs = {}
  for i = 1, n do inputs[i] = init[i] end
  for _, x in ipairs(registry.list) do inputs[#inputs + 1] = x end
  local metas = {}
  for i = 1, n do metas[i] = meta_of(tr.graph, tr:value_of(init[i])) end
  for _, k in ipairs(written) do metas[#metas + 1] = meta_of(tr.graph, tr:value_of(registry.list[k])) end
  local attrs = { cond_graph = c.graph, body_graph = b.graph, nresults = n, first_capture = n + 1, written = written }
  return emit_node(tr, D.by_name.while_loop, inputs, attrs, metas, registry, written)
end

-- ---- ds.print ----
function M.emit(parts, tensors)
  local out = {}
  for i, p in ipairs(parts) do
    out[i] = type(p) == "table" and tostring(tensors[p.tensor]) or p
  end
  io.write(table.concat(out, " "), "\n")
  io.flush()
end

function M.print(...)
  local args = pack(...)
  local parts, tensors = {}, {}
  for i = 1, args.n do
    local v = args[i]
    if is_tensor(v) then
      tensors[#tensors + 1] = v
      parts[i] = { tensor = #tensors }
    else
      parts[i] = tostring(v)
    end
  end
  local tr = state.trace
  if not tr then return M.emit(parts, tensors) end
  tr:record_op(D.by_name.print, tensors, { parts = parts }, {}, nil)
end

-- samples for the op-table loop test: inputs, attrs, and fn(inputs...) that uses the op's API
function M.sample(name)
  if name == "cond" then
    return { F.tensor(true), F.tensor({ 1, 2, 3 }) }, {}, function(p, x)
      return M.cond(p, function(a) return a * 2 end, function(a) return a - 1 end, x)
    end
  elseif name == "while_loop" then
    return { F.tensor(0), F.tensor(10) }, {}, function(a, b)
      return M.while_loop(function(u, v) return u:lt(v) end, function(u, v) return u + 2, v + 1 end, { a, b })
    end
  end
  return { F.tensor({ 1, 2 }) }, {}, function(x)
    M.print("sample", x)
    return x + 0
  end
end

function M.install(ds)
  ds.cond = M.cond
  ds.while_loop = M.while_loop
  ds.print = M.print
end

return M
