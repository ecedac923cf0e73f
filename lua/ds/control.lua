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
local random = require("ds.random")
local F = require("ds.ops")

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

-- x detached, as the same graph value while tracing (x:detach() of a concrete tensor, a parameter the loop
-- captured, would be a new tensor: a second state entry that ds.save writes as a separate copy)
local function detached(x)
  if state.trace then return state.trace.detach(x) end
  return x:detach()
end

-- a bool tensor from a predicate (a bool or numeric tensor, or a Lua boolean)
local function as_pred(p)
  if type(p) == "boolean" then return D.scalar(p, "bool") end
  if is_tensor(p) and p.dtype ~= "bool" then return p:ne(0) end
  return p
end

-- ---- tracing sub-graphs ----
-- trace fn(operands..., extra...) as a sub-graph of the active tracer; captures go through the shared registry.
-- extra (optional): metas {shape, dtype} of inputs that come after the captures (a reverse loop's saved trip)
local function trace_child(parent, registry, fn, operands, nops, name, extra)
  local g = Graph.new(name)
  local tr = T.new_tracer(g, parent, registry)
  local args = {}
  for i = 1, nops do
    local x = operands[i]
    if is_tensor(x) then
      local val = parent.graph.values[parent:value_of(x)]
      local v = tr:new_value(val.shape, val.dtype, "input", "arg" .. i)
      Graph.add_input(g, v, "arg" .. i)
      args[i] = tr:abstract(v, "arg" .. i)
    else
      args[i] = x
    end
  end
  local extra_inputs = {}
  for k, m in ipairs(extra or {}) do
    local v = tr:new_value(m.shape, m.dtype, "input", "saved" .. k)
    extra_inputs[k] = { name = "saved" .. k, value = v }
    args[nops + k] = tr:abstract(v, "saved" .. k)
  end
  local res = T.run_traced(tr, fn, args, nops + #extra_inputs)
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
      errors.raise(string.format("%s: result %d is a %s; branches and loop bodies return tensors", name, i - 1,
        type(r)))
    end
    outs[i - 1] = r
    g.outputs[i - 1] = tr:value_of(r)
  end
  return { graph = g, tracer = tr, nresults = #outs, extra_inputs = extra_inputs }
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
    for k = 1, #registry.list do Graph.add_input(g, tr:capture_input(k), "capture" .. k) end
    for _, e in ipairs(c.extra_inputs) do Graph.add_input(g, e.value, e.name) end
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

-- record the control node in the parent and rebind updated captures. Its tape node holds the graph node's own
-- attrs, so a loop's backward can ask its forward node to save the trips (attrs.saves).
local function emit_node(parent, def, inputs, attrs, metas, registry, written)
  local outs = parent:record_op(def, inputs, attrs, metas, nil)
  local node_attrs = parent.graph.nodes[#parent.graph.nodes].attrs
  local n = attrs.nresults
  for j, k in ipairs(written) do parent:rebind(registry.list[k], parent:value_of(outs[n + j])) end
  if state.grad_enabled and def.backward then tape.maybe_record(def, inputs, node_attrs, outs) end
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
  if not is_tensor(pred) then
    errors.raise("cond: predicate must be a boolean or a one-element tensor, got " .. type(pred))
  end
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

-- sub-graphs that write state (random ops, in-place updates of outside tensors) have no gradient
local function refuse_state_grads(attrs, what)
  if #attrs.written > 0 then
    errors.raise(what .. " that update state (random ops, in-place updates of outside tensors) are not supported")
  end
end

-- gradient of a traced cond: a cond whose branches differentiate the forward branches (replayed)
function M.cond_backward(ctx, ...)
  local gouts = pack(...)
  local attrs = ctx.attrs
  refuse_state_grads(attrs, "cond: gradients through branches")
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
        for j, i in ipairs(want) do res[i] = grads[j] or res[i] end
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
-- opts: {max_iter = N}: at most N trips (the loop ends after N even when cond_fn still holds)
local function loop_opts(opts, opname)
  if opts == nil then return {} end
  if type(opts) ~= "table" or is_tensor(opts) then errors.raise(opname .. ": opts must be a table") end
  for k, v in pairs(opts) do
    if k ~= "max_iter" then errors.raise(string.format("%s: unknown option '%s' (max_iter)", opname, tostring(k))) end
    if type(v) ~= "number" or v < 0 or v ~= math.floor(v) then
      errors.raise(opname .. ": max_iter must be an integer >= 0, got " .. tostring(v))
    end
  end
  return opts
end

function M.while_loop(cond_fn, body_fn, init, opts)
  if type(cond_fn) ~= "function" or type(body_fn) ~= "function" or type(init) ~= "table" or is_tensor(init) then
    errors.raise("while_loop: expects while_loop(cond_fn, body_fn, {init values...}[, {max_iter = N}])")
  end
  opts = loop_opts(opts, "while_loop")
  local n = table.maxn(init)
  local tr = state.trace
  if opts.max_iter and tr then -- a trip counter as one more loop variable
    local N = opts.max_iter
    local res = pack(M.while_loop(function(k, ...) return F.logical_and(k:lt(N), as_pred(cond_fn(...))) end,
      function(k, ...) return k + 1, body_fn(...) end, { D.scalar(0, "i64"), unpack(init, 1, n) }))
    return unpack(res, 2, n + 1)
  end
  if not tr and state.grad_enabled then
    local all_tensors = true
    for i = 1, n do all_tensors = all_tensors and is_tensor(init[i]) end
    if all_tensors then return M.eager_grad_loop(cond_fn, body_fn, init, n, opts.max_iter or math.huge) end
  end
  if not tr then
    local vars = { unpack(init, 1, n) }
    local trips, max_iter = 0, opts.max_iter or math.huge
    while trips < max_iter and truth(cond_fn(unpack(vars, 1, n)), "while_loop") do
      local nxt = pack(body_fn(unpack(vars, 1, n)))
      if nxt.n ~= n then
        errors.raise(string.format("while_loop: the body returns %d values for %d loop variables", nxt.n, n))
      end
      vars = nxt
      trips = trips + 1
    end
    return unpack(vars, 1, n)
  end
  return M.graph_loop(tr, cond_fn, body_fn, init, n)
end

-- the traced while_loop node. reads (a reverse loop only): {key = k, metas = {{shape, dtype}...}}: the loop runs
-- once per trip that the forward loop saving under key k made, last trip first, and body_fn receives that trip's
-- saved loop variables after its own: body_fn(vars..., saved...)
function M.graph_loop(tr, cond_fn, body_fn, init, n, reads)
  for i = 1, n do
    if not is_tensor(init[i]) then
      errors.raise(string.format("while_loop: loop variable %d is a %s; inside a trace loop variables are tensors", i,
        type(init[i])))
    end
  end
  local registry = new_registry()
  local c = trace_child(tr, registry, cond_fn, init, n, "while_cond")
  if c.nresults ~= 1 then
    errors.raise("while_loop: cond_fn must return one tensor (e.g. a:lt(b)), got " .. c.nresults .. " results")
  end
  local b = trace_child(tr, registry, body_fn, init, n, "while_body", reads and reads.metas)
  if b.nresults ~= n then
    errors.raise(string.format("while_loop: the body returns %d tensors for %d loop variables (%s)", b.nresults, n,
      errors.user_site()))
  end
  for i = 1, n do
    local mi, mo = meta_of(tr.graph, tr:value_of(init[i])), meta_of(b.graph, b.graph.outputs[i])
    if mi.dtype ~= mo.dtype or not S.equal(mi.shape, mo.shape) then
      errors.raise(string.format("while_loop: the body turns loop variable %d from %s %s into %s %s; loop variables "
        .. "keep their shape and dtype (%s)", i, mi.dtype, S.str(mi.shape), mo.dtype, S.str(mo.shape),
        errors.user_site()))
    end
  end
  for k in pairs(c.tracer.cap_written) do
    errors.raise("while_loop: cond_fn updates "
      .. (registry.list[k] and (rawget(registry.list[k], "_name") or "a tensor") or "a tensor") .. " in place")
  end
  c.reads_only = true
  local written = seal(registry, { c, b })
  local inputs = {}
  for i = 1, n do inputs[i] = init[i] end
  for _, x in ipairs(registry.list) do inputs[#inputs + 1] = x end
  local metas = {}
  for i = 1, n do metas[i] = meta_of(tr.graph, tr:value_of(init[i])) end
  for _, k in ipairs(written) do metas[#metas + 1] = meta_of(tr.graph, tr:value_of(registry.list[k])) end
  local attrs = { cond_graph = c.graph, body_graph = b.graph, nresults = n, first_capture = n + 1, written = written,
                  reads = reads and reads.key or nil }
  return emit_node(tr, D.by_name.while_loop, inputs, attrs, metas, registry, written)
end

-- ---- eager loops that differentiate like traced ones ----
-- Eagerly a loop with grad enabled runs each trip on detached state, saves the state, and records ONE tape node
-- whose backward is the same per-trip vector-Jacobian products, in the same order, as the traced loop's backward
-- (the body re-runs once per trip), so eager and compiled gradients agree bit for bit. Its inputs are the initial
-- values and the captures: tensors requiring grad that a trip read but did not make.
local EAGER_LOOP = { name = "while_loop" }

-- requires-grad tensors reachable from outs through the tape nodes in made (a trip's), not through them
local function captures_of(outs, made, found, list)
  local stack, seen = {}, {}
  for _, o in ipairs(outs) do if is_tensor(o) then stack[#stack + 1] = o end end
  while #stack > 0 do
    local t = table.remove(stack)
    if not seen[t] then
      seen[t] = true
      local fn = rawget(t, "_grad_fn")
      if fn and made[fn] then
        for _, x in ipairs(fn.inputs) do if is_tensor(x) then stack[#stack + 1] = x end end
      elseif rawget(t, "requires_grad") and not found[t] then
        found[t] = true
        list[#list + 1] = t
      end
    end
  end
end

local function rng_snapshot() return random.state():totable() end
local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

function M.eager_grad_loop(cond_fn, body_fn, init, n, max_iter)
  local vars, saved, caps, found = { unpack(init, 1, n) }, {}, {}, {}
  local rng0 = rng_snapshot()
  local trips = 0
  while trips < max_iter and truth(cond_fn(unpack(vars, 1, n)), "while_loop") do
    local ins = {}
    for i = 1, n do ins[i] = vars[i]:detach() end
    local made = {}
    local prev = tape.observer
    tape.observer = function(node) made[node] = true end
    local ok, res = pcall(function() return pack(body_fn(unpack(ins, 1, n))) end)
    tape.observer = prev
    if not ok then error(res, 0) end
    if res.n ~= n then
      errors.raise(string.format("while_loop: the body returns %d values for %d loop variables", res.n, n))
    end
    for i = 1, n do
      if not is_tensor(res[i]) then
        errors.raise(string.format("while_loop: the body returns a %s for loop variable %d", type(res[i]), i))
      end
    end
    captures_of(res, made, found, caps)
    saved[#saved + 1] = ins
    vars = {}
    for i = 1, n do vars[i] = res[i]:detach() end
    trips = trips + 1
  end
  if trips == 0 then return unpack(init, 1, n) end
  local inputs = { unpack(init, 1, n) }
  for _, c in ipairs(caps) do inputs[#inputs + 1] = c end
  tape.maybe_record(EAGER_LOOP, inputs, { saved = saved, body_fn = body_fn, nresults = n,
    rng_used = not same_list(rng0, rng_snapshot()) }, vars)
  return unpack(vars, 1, n)
end

-- one trip's vector-Jacobian product: run(xs...) recomputes the trip's outputs from xs (vars..., captures...);
-- differentiable: which of xs to differentiate; returns grads of vars and captures (zeros where none flows)
local function trip_vjp(run, xs, n, differentiable, gv)
  local wanted, where = {}, {}
  for i = 1, #xs do
    if differentiable[i] then wanted[#wanted + 1] = xs[i]; where[#wanted] = i end
  end
  local outs = { autograd.enable_grad(run) }
  local ys, gs = {}, {}
  for i = 1, n do
    if rawget(outs[i], "requires_grad") then ys[#ys + 1] = outs[i]; gs[#gs + 1] = gv[i] end
  end
  local res = {}
  for i = 1, #xs do res[i] = F.zeros_like(xs[i]) end
  if #ys > 0 and #wanted > 0 then
    local grads = autograd.grad(ys, wanted, { grad_outputs = gs, allow_unused = true })
    for j, i in ipairs(where) do if grads[j] then res[i] = grads[j] end end
  end
  return res
end

function EAGER_LOOP.backward(ctx, ...)
  local a = ctx.attrs
  if a.rng_used then
    errors.raise("while_loop: gradients through loop bodies that draw random numbers are not supported (the "
      .. "backward re-runs the body)")
  end
  local n = a.nresults
  local gouts = pack(...)
  local caps = { unpack(ctx.inputs, n + 1) }
  local gv, gc = {}, {}
  for i = 1, n do gv[i] = gouts[i] or F.zeros_like(ctx.outputs[i]) end
  for k = 1, #caps do gc[k] = -F.zeros_like(caps[k]) end -- -0: the exact additive identity
  for j = #a.saved, 1, -1 do
    local xs, differentiable = {}, {}
    for i = 1, n do
      xs[i] = a.saved[j][i]:detach()
      if dtype.is_float[xs[i].dtype] then xs[i]:requires_grad_(); differentiable[i] = true end
    end
    for k = 1, #caps do xs[n + k] = caps[k]; differentiable[n + k] = true end
    local d = trip_vjp(function() return a.body_fn(unpack(xs, 1, n)) end, xs, n, differentiable, gv)
    for i = 1, n do gv[i] = d[i] end
    for k = 1, #caps do gc[k] = gc[k] + d[n + k] end
  end
  local grads = {}
  for i = 1, n do grads[i] = ctx.needs[i] and gv[i] or nil end
  for k = 1, #caps do grads[n + k] = ctx.needs[n + k] and gc[k] or nil end
  return unpack(grads, 1, n + #caps)
end

-- ---- the trips a differentiated graph loop saves ----
-- A traced loop whose gradient is taken saves, when it runs, the loop variables each trip starts from (attrs.saves:
-- the keys it saves under); its reverse loop (attrs.reads = key) takes them, last trip first, and drops them.
-- Keys are unique in the process; a forward node and its readers sit in one graph, and one graph run finishes
-- before another starts, so a key's trips are always those of the current run.
M.saved_trips = {}
local last_key = 0
function M.new_trips_key()
  last_key = last_key + 1
  return last_key
end

-- Drop the nodes of sub-graph g whose results nothing reads (keeping effects), then its last n inputs (a reverse
-- loop's saved loop vars) that no node reads; returns the indices (1..n) of the saved vars it still takes.
local function keep_needed_saved(g, n)
  local live = {}
  for _, v in ipairs(g.outputs) do live[v] = true end
  local kept = {}
  for i = #g.nodes, 1, -1 do
    local node = g.nodes[i]
    local used = node.def.side_effects or node.def.mutates or #(node.attrs.written or {}) > 0
    for _, v in ipairs(node.outputs) do used = used or live[v] end
    if used then
      for _, v in ipairs(node.inputs) do live[v] = true end
      kept[#kept + 1] = node
    end
  end
  local nodes = {}
  for i = #kept, 1, -1 do nodes[#nodes + 1] = kept[i] end
  g.nodes = nodes
  local inputs, specs, needed, first_saved = {}, {}, {}, #g.inputs - n
  for k, id in ipairs(g.inputs) do
    if k <= first_saved or live[id] then
      specs[#inputs + 1] = g.specs[k]
      inputs[#inputs + 1] = id
      if k > first_saved then needed[#needed + 1] = k - first_saved end
    end
  end
  g.inputs, g.specs = inputs, specs
  g:finalize()
  return needed
end

local function union_sorted(a, b)
  local seen, out = {}, {}
  for _, l in ipairs { a, b } do
    for _, i in ipairs(l) do if not seen[i] then seen[i] = true; out[#out + 1] = i end end
  end
  table.sort(out)
  return out
end

-- gradient of a traced while_loop: a reverse graph loop over the trips the forward loop saved (attrs.saves gets a
-- new key here, so the forward node saves its trips' starting values s_j when the graph runs):
--   for j = n-1 down to 0: (g_vars, g_caps_j) = vjp(one body trip at s_j, g_vars); g_caps += g_caps_j
-- Each reverse trip replays the body once (its intermediates are recomputed, not saved): time and memory grow
-- linearly with the trips.
function M.while_backward(ctx, ...)
  local gouts = pack(...)
  local attrs = ctx.attrs
  refuse_state_grads(attrs, "while_loop: gradients through loop bodies")
  if attrs.reads then
    errors.raise("while_loop: gradients of a loop's backward (second order through a loop) are not supported")
  end
  local n = attrs.nresults
  local caps = {}
  for i = n + 1, #ctx.inputs do caps[#caps + 1] = ctx.inputs[i] end
  local ncap = #caps
  local key = M.new_trips_key()
  local saves = attrs.saves or {}
  saves[#saves + 1] = key
  attrs.saves = saves
  local saved_metas = {}
  for i = 1, n do saved_metas[i] = { shape = ctx.inputs[i]._shape, dtype = ctx.inputs[i].dtype } end
  -- one trip's vector-Jacobian product at state s: grads of the vars and of the captures
  local function vjp(s, gv)
    local xs, differentiable = {}, {}
    for i = 1, n + ncap do
      xs[i] = detached(i <= n and s[i] or caps[i - n])
      if dtype.is_float[xs[i].dtype] then xs[i]:requires_grad_(); differentiable[i] = true end
    end
    return trip_vjp(function() return state.trace.inline(attrs.body_graph, xs) end, xs, n, differentiable, gv)
  end
  -- loop variables: the forward's first result (an edge that orders the reverse loop after the forward, which
  -- fills the saved trips), then the gradients of the vars and of the captures
  local g0 = { ctx.outputs[1] }
  for i = 1, n do g0[1 + i] = gouts[i] or F.zeros_like(ctx.outputs[i]) end
  -- capture grads start at -0, the exact additive identity (0 + -0 would lose the sign the eager tape keeps)
  for k = 1, ncap do g0[1 + n + k] = -F.zeros_like(caps[k]) end
  local m = 1 + n + ncap
  local back = pack(M.graph_loop(state.trace, function() return D.scalar(true, "bool") end, function(after, ...)
    local g = { ... }
    local s = { unpack(g, m, m + n - 1) }
    local d = vjp(s, g)
    local nxt = { after }
    for i = 1, n do nxt[1 + i] = d[i] end
    for k = 1, ncap do nxt[1 + n + k] = g[n + k] + d[n + k] end
    return unpack(nxt, 1, m)
  end, g0, m, { key = key, metas = saved_metas }))
  local reverse = state.trace.graph.nodes[#state.trace.graph.nodes].attrs
  reverse.reads_vars = keep_needed_saved(reverse.body_graph, n)
  attrs.saved_vars = union_sorted(attrs.saved_vars or {}, reverse.reads_vars)
  local grads = {}
  for i = 1, n + ncap do
    local x = ctx.inputs[i]
    grads[i] = (ctx.needs[i] and dtype.is_float[x.dtype]) and back[i + 1] or nil
  end
  return unpack(grads, 1, n + ncap)
end

-- ---- ds.fori_loop, ds.scan (graph loops over while_loop, so they trace and differentiate like it) ----
-- fori_loop(lo, hi, body, init): for i = lo, hi (inclusive, as Lua's for): vars = body(i, vars...); i is a
-- 0-d i64 tensor; lo and hi are Lua integers or 0-d integer tensors
function M.fori_loop(lo, hi, body, init, opts)
  if type(body) ~= "function" or type(init) ~= "table" or is_tensor(init) then
    errors.raise("fori_loop: expects fori_loop(lo, hi, body_fn, {init values...})")
  end
  for _, b in ipairs { lo, hi } do
    if not (type(b) == "number" and b == math.floor(b)) and not (is_tensor(b) and dtype.is_int[b.dtype]) then
      errors.raise("fori_loop: bounds are Lua integers or integer tensors, got "
        .. (is_tensor(b) and b.dtype or type(b)))
    end
  end
  local n = table.maxn(init)
  local hi_t = D.cast(hi, "i64")
  local res = pack(M.while_loop(function(i) return i:le(hi_t) end,
    function(i, ...) return i + 1, body(i, ...) end, { D.cast(lo, "i64"), unpack(init, 1, n) }, opts))
  return unpack(res, 2, n + 1)
end

-- scan(fn, init, xs): carry, y_t = fn(carry, xs[t]) for t = 1..T (T = xs:size(1)); returns the last carry and
-- the ys stacked over a new leading dim: (T, y...). T >= 1.
function M.scan(fn, init, xs)
  if type(fn) ~= "function" or not is_tensor(init) or not is_tensor(xs) or #xs._shape == 0 then
    errors.raise("scan: expects scan(fn, init_tensor, xs) with xs of at least 1 dim (the scanned one)")
  end
  local T = xs._shape[1]
  if type(T) == "number" and T < 1 then errors.raise("scan: xs has no rows to scan (its dim 1 is 0)") end
  local c1, y1 = fn(init, xs[1]) -- the first trip gives the shape of y
  if not is_tensor(c1) or not is_tensor(y1) then
    errors.raise("scan: fn(carry, x) must return two tensors: carry, y")
  end
  local yshape = { T }
  for i, d in ipairs(y1._shape) do yshape[i + 1] = d end
  local ys = F.zeros(yshape, { dtype = y1.dtype }):index_add(1, D.scalar(1, "i64"), y1:unsqueeze(1))
  local carry, out = M.fori_loop(2, D.cast(T, "i64"), function(t, c, acc)
    local c2, y = fn(c, xs[t])
    return c2, acc:index_add(1, t, y:unsqueeze(1))
  end, { c1, ys })
  return carry, out
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
    -- three trips whatever small change gradcheck makes to the inputs (the trip count stays put)
    return { F.tensor(0.5), F.tensor(3.2) }, {}, function(a, b)
      return M.while_loop(function(u) return u:lt(3) end, function(u, v) return u + 1, v * u + 1 end, { a, b })
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
  ds.fori_loop = M.fori_loop
  ds.scan = M.scan
  ds.print = M.print
end

return M
