-- compile.lua: ds.compile: a traced graph -> passes (dce, cse, fold, rewrite, prune, single_output, fuse, epilogue and
-- its pooling, prepack) -> one C plan per concrete input-shape binding (memory planned, cached) -> a callable that
-- runs every kernel in C. Pipeline: a copy of the graph (ds.Graph, graph.lua: the one IR, as traced or as read from a
-- file) -> M.optimize (passes/dce, cse, fold, rewrite (idioms, passes/rewrite.lua), prune; then single_output,
-- fuse, epilogue, conv_pool and prepack on a second copy, so ds.save can write the unfused graph)
-- -> per binding of the symbolic dims: passes/lower.build (steps over buffer layouts) -> passes/memplan (in-place
-- reuse, arena offsets) -> passes/lower.emit (the C plan of src/runtime.c). A while_loop is one C loop step with
-- its cond and body as sub-plans (passes/loop.lua) unless it is differentiated or its body holds a cond or print;
-- those control nodes run in Lua between ranges of C steps. Every step calls a registry kernel, the eager ones or
-- src/fused.c's (which run the eager per-element code), so compiled results equal eager bit for bit.
local ffi = require("ffi")
local dsffi = require("ds.ffi")
local D = require("ds.dispatch")
local state = require("ds.state")
local S = require("ds.shape")
local sym = require("ds.sym")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local Graph = require("ds.graph")
local lower = require("ds.passes.lower")
local memplan = require("ds.passes.memplan")
local graphviz = require("ds.graphviz")
local hyper = require("ds.ops.optim")
local C = dsffi.C

local M = {}

local freeze = require("ds.passes.freeze")
local rewrite = require("ds.passes.rewrite")
local autocast = require("ds.passes.autocast")
local PASSES = {
  { "dce", require("ds.passes.dce") },
  { "cse", require("ds.passes.cse") },
  { "fold", require("ds.passes.fold") },
  { "rewrite", rewrite.run },
  { "autocast", autocast.run },   -- {dtype = "bf16"}: products in bf16, f32 accumulation
  { "cse", require("ds.passes.cse") },
  { "prune", require("ds.passes.prune") },
  { "dce", require("ds.passes.dce") },
}
local LATE = {
  { "single_output", require("ds.passes.single_output") },
  { "fuse", require("ds.passes.fuse").run },
  { "epilogue", require("ds.passes.epilogue") },
  { "conv_pool", require("ds.passes.conv_pool"), option = "epilogue" },   -- pooling in a conv's epilogue
  { "prepack", require("ds.passes.prepack") },
  { "prepack_bf16", autocast.prepack },   -- matmul_bf16's constant weights packed once
}

-- grad writes and input writes keep their values alive through the passes (they are outputs of a kind)
local function with_grad_outputs(ir, fn)
  local n = #ir.outputs
  for _, w in ipairs(ir.grad_writes) do if w.value then ir.outputs[#ir.outputs + 1] = w.value end end
  for _, w in ipairs(ir.input_writes) do ir.outputs[#ir.outputs + 1] = w.value end
  local _, count = fn(ir)
  local k = n
  for _, w in ipairs(ir.grad_writes) do
    if w.value then k = k + 1; w.value = ir.outputs[k] end
  end
  for _, w in ipairs(ir.input_writes) do k = k + 1; w.value = ir.outputs[k] end
  for i = #ir.outputs, n + 1, -1 do ir.outputs[i] = nil end
  return count
end

-- early passes (the result is what ds.save writes), then fusion on a copy. owns_state: the IR's state
-- tensors belong to it alone (ds.load), so freezing need not copy them.
function M.optimize(ir, opts, owns_state)
  opts = opts or {}
  local stats = {}
  if opts.freeze then stats.freeze = select(2, freeze(ir, not owns_state)) end
  for _, p in ipairs(PASSES) do
    if opts[p[1]] ~= false then
      stats[p[1]] = (stats[p[1]] or 0) + with_grad_outputs(ir, function(x) return p[2](x, opts, stats) end)
    end
  end
  local base, late = Graph.copy(ir), Graph.copy(ir)
  for _, p in ipairs(LATE) do
    if opts[p.option or p[1]] ~= false then
      stats[p[1]] = with_grad_outputs(late, function(x) return p[2](x, opts) end)
    end
  end
  return base, late, stats
end

-- ---- the compiled callable ----
local Compiled = {}
Compiled.__index = Compiled

-- the plan for one binding: lowered steps, memory plan, C plan with constants bound
function Compiled:plan_for(env)
  local key = sym.env_key(env)
  local p = self._plans[key]
  if p then return p end
  local L = lower.build(self.ir, env)
  local arena, eager, stats = memplan(L)
  local plan, segments, log = lower.emit(L, arena)
  p = { plan = plan, segments = segments, log = log, env = env, L = L, arena_bytes = arena, eager_bytes = eager,
    stats = stats, inputs = {}, state = {}, outputs = {}, keep = {}, reshape = {} }
  for _, r in ipairs(L.roots) do
    if r.kind == "const" then
      local c = self.ir.consts[r.index]
      if not c.tensor:is_contiguous() then c.tensor = c.tensor:contiguous() end   -- once, for every plan
      local t = c.tensor
      p.keep[#p.keep + 1] = t
      dsffi.check(C.ds_plan_bind(plan, r.buffer, t._c), "compile: constant")
    elseif r.kind == "input" then p.inputs[r.index] = r
    elseif r.kind == "state" then p.state[r.index] = r
    elseif r.kind == "output" and r.index then p.outputs[r.index] = r
    end
  end
  for i, r in ipairs(p.outputs) do -- an output computed in place of its buffer may be a reshape of it
    if not S.equal(r.shape, L.outputs[i].shape) then p.reshape[#p.reshape + 1] = i end
  end
  self._plans[key] = p
  self._nplans = self._nplans + 1
  return p
end

local EMPTY = {}
-- A compiled call's outputs (and gradients) above 4 KiB live in C memory (src/mem.c's size-class cache), not in
-- Lua GC memory as eager tensors up to 64 KiB do: a GC-memory tensor is zero-filled and charges the Lua collector,
-- which walks ds's whole heap (~3 MB, ~3 ms) once per few MB allocated; a freed C block is reused as it is (the
-- first 64 MiB of outputs are fresh pages, until tensor.lua's first collection). Frozen x @ W^T + b, 1 thread,
-- Zen 4, CPU time per call in a long loop, busy host (indicative): output 16 KiB (16 x 64 x 256) 15.8-16.2 ->
-- 8.7-10.1 us, 64 KiB (16 x 64 x 1024; kernel ~23 us) 38-45 -> 30-31 (the 64 KiB GC blocks were also unmapped
-- and faulted in again, 1-7 faults per call); 1-4 KiB even.
local OUTPUT_GC_BYTES = 4096

local function bind_buffer(plan, r, t, what)
  if C.ds_plan_bind(plan, r.buffer, t._c) ~= 0 then dsffi.fail("compiled graph: " .. what) end
end

local tbuf2 = ffi.new("ds_tensor*[2]")
local function copy_kernel(dt) return D.kernel(D.by_name.contiguous, dt) end

-- a control node between C ranges: its inputs copied out of the plan's buffers, its results bound back
local function run_lua_step(plan, s, env, keep)
  local ins = {}
  for k, l in ipairs(s.ins) do
    local src = dsffi.check(C.ds_plan_buffer(plan, s.in_buffers[k]), "compiled graph")
    local t = Tensor._empty(l.dtype, l.shape, s.op)
    tbuf2[0] = t._c; tbuf2[1] = ffi.cast("ds_tensor *", src)
    dsffi.check(copy_kernel(l.dtype)(tbuf2, nil), "compiled graph")
    ins[k] = t
  end
  local outs = s.lua.def.run(s.lua, ins, env, s.attrs)
  for k, r in ipairs(s.outs) do
    local t = outs[k]
    if not Tensor.is_tensor(t) or t.dtype ~= r.dtype or not S.equal(t._shape, r.shape) then
      errors.raise(string.format("compiled graph: %s (%s) result %d is not a %s %s tensor", s.op, s.line or "?", k,
        r.dtype, S.str(r.shape)))
    end
    if not t:is_contiguous() then t = t:contiguous() end
    keep[#keep + 1] = t
    bind_buffer(plan, r.root, t, s.op .. " result")
  end
end

-- the inputs fit plan p: each a concrete tensor of the dtype and shape p's input buffer was planned for. The specs
-- fix every input's shape once the symbolic dims are bound (and each dim is bound from an input's shape), so inputs
-- that fit bind the same dims: the call may skip sym.bind_inputs (its messages, the plan key's string) and reuse p.
local function fits(p, args)
  local ins = p.inputs
  if #args ~= #ins then return false end
  for i = 1, #ins do
    local t, r = args[i], ins[i]
    if getmetatable(t) ~= "ds.Tensor" or not rawget(t, "_c") or t.dtype ~= r.dtype then return false end
    local a, b = t._shape, r.shape
    if #a ~= #b then return false end
    for d = 1, #b do if a[d] ~= b[d] then return false end end
  end
  return true
end

-- The plans of the input shapes called so far, as a trie over each input's dtype, rank and sizes in turn: a call
-- whose shapes were bound before finds its plan without sym.bind_inputs (a dynamic batch or length that varies
-- from call to call). find returns nil for shapes not seen (or inputs that are not concrete tensors).
local function find(trie, args)
  local node = trie
  for i = 1, #args do
    local t = args[i]
    if getmetatable(t) ~= "ds.Tensor" or not rawget(t, "_c") then return nil end
    local shape = t._shape
    node = node[t.dtype]
    node = node and node[#shape]
    for d = 1, #shape do
      if not node then return nil end
      node = node[shape[d]]
    end
    if not node then return nil end
  end
  return node.plan
end

local function remember(trie, args, p)
  local node = trie
  local function at(key)
    local next_node = node[key] or {}
    node[key] = next_node
    node = next_node
  end
  for i = 1, #args do
    local t = args[i]
    local shape = t._shape
    at(t.dtype); at(#shape)
    for d = 1, #shape do at(shape[d]) end
  end
  node.plan = p
end

local function fail_bind(what, i)
  dsffi.fail(string.format("compiled graph: %s %s", what, tostring(i)))
end

-- run on the tensor inputs (in the graph's input order); returns the outputs as a list. Inputs of the dtypes and
-- shapes of an earlier call reuse its plan as they are; others are checked against the specs and get the plan of
-- their binding of the dynamic dims (built once per binding).
function Compiled:run(args)
  local ir = self.ir
  local refresh = self.refresh -- optimizer hyper-parameters (a scheduler's lr): read now, as an eager step would
  for i = 1, #refresh do refresh[i]() end
  local p = self._last_plan
  if not (p and fits(p, args)) then
    p = find(self._by_shape, args)
    if not p then
      p = self:plan_for(sym.bind_inputs(self.label, ir.specs, args))
      remember(self._by_shape, args, p)
    end
    self._last_plan = p
  end
  local plan = p.plan
  local copies, keep -- what the plan reads that only this call holds: contiguous copies of inputs (by input), the
  -- Lua steps' results
  local ins = p.inputs
  for i = 1, #ins do
    local x = args[i]
    if C.ds_tensor_is_contiguous(x._c) == 0 then
      x = x:contiguous()
      copies = copies or {}
      copies[i] = x
    end
    if C.ds_plan_bind(plan, ins[i].buffer, x._c) ~= 0 then fail_bind("input", i) end
  end
  local graph_state = ir.state
  for i, r in ipairs(p.state) do
    local t = graph_state[i].tensor
    if C.ds_plan_bind(plan, r.buffer, t._c) ~= 0 then fail_bind("state", graph_state[i].name) end
  end
  local outs = {}
  local routs = p.outputs
  for i = 1, #routs do
    local r = routs[i]
    local o = Tensor._empty(r.dtype, r.shape, "compiled graph", OUTPUT_GC_BYTES)
    outs[i] = o
    if C.ds_plan_bind(plan, r.buffer, o._c) ~= 0 then fail_bind("output", i) end
  end
  local grads = p.L.grads
  local gvals = #grads > 0 and {} or EMPTY
  for k = 1, #grads do
    local g = grads[k]
    if g.root then
      gvals[k] = Tensor._empty(g.root.dtype, g.root.shape, "compiled graph", OUTPUT_GC_BYTES)
      bind_buffer(plan, g.root, gvals[k], "gradient")
    end
  end
  local segs = p.segments
  for k = 1, #segs do
    local seg = segs[k]
    if C.ds_plan_run_range(plan, seg.from, seg.to) ~= 0 then dsffi.fail("compiled " .. ir.name) end
    if seg.lua then
      keep = keep or {}
      run_lua_step(plan, seg.lua, p.env, keep)
    end
  end
  for _, w in ipairs(ir.input_writes) do -- the plan wrote the input's buffer; a copy made contiguous goes back
    local c = copies and copies[w.input]
    if c then args[w.input]:copy_(c) end
  end
  for k = 1, #grads do
    local g = grads[k]
    local t = graph_state[g.state].tensor
    local v = gvals[k]
    local cur = rawget(t, "grad")
    if v and g.into_existing and cur and rawget(cur, "_c") and S.equal(cur._shape, v._shape) and
      cur.dtype == v.dtype then
      cur:copy_(v)
    else
      rawset(t, "grad", v)
    end
  end
  local reshape = p.reshape
  for i = 1, #reshape do -- an output computed in place of its buffer may be a reshape of it
    local k = reshape[i]
    outs[k] = outs[k]:reshape(p.L.outputs[k].shape)
  end
  return outs
end

-- build the plan for tensor inputs like args (the graph's input order) without running it, its arena allocated and
-- touched: a server warms a new model version this way, so its first request of each shape runs at once
function Compiled:prepare(args)
  local p = self:plan_for(sym.bind_inputs(self.label, self.ir.specs, args))
  dsffi.check(C.ds_plan_prepare(p.plan), "prepare")
end

function Compiled:__call(...)
  if self.current then -- compiled from modules: the graph for their current train/eval mode
    local c = self.current()
    if c ~= self then return c(...) end
  end
  local ir = self.ir
  local tensors = Graph.call_inputs(ir, self.label, ...)
  if state.trace then
    -- called while tracing another function: its graph becomes part of that trace
    if not self.graph then
      errors.raise("compiled " .. ir.name .. ": a loaded graph cannot be called while tracing")
    end
    return state.trace.inline(self.graph, tensors)
  end
  return unpack(self:run(tensors), 1, #ir.outputs)
end

-- {arena_bytes, eager_bytes, inplace} of the most recent plan (or of the plan for env, e.g. {batch = 1}):
-- arena_bytes is the one buffer every intermediate lives in; eager_bytes what running the same graph
-- unplanned allocates (every intermediate and output its own buffer, as eager execution does)
function Compiled:memory(env)
  local p
  if env then p = self:plan_for(env) else p = self._last_plan end
  if not p then
    for _, q in pairs(self._plans) do p = q end
  end
  if not p then
    if sym.contains(self.ir.specs) then
      errors.raise("memory: the graph has dynamic dims; call it once (or pass {dim = size}) to plan its memory")
    end
    p = self:plan_for({})
  end
  return { arena_bytes = p.arena_bytes, eager_bytes = p.eager_bytes, inplace = p.stats.inplace }
end

function Compiled:plan_count() return self._nplans end

-- the graph's inputs in order: {{name, dtype, shape}}, a symbolic dim as its name ({"batch", 784}), fresh tables
-- (what ds.spec takes back); serving reads a loaded model's inputs here (docs/SERVING.md)
function Compiled:specs()
  local out = {}
  for i, s in ipairs(self.ir.specs) do
    local shape = {}
    for d, v in ipairs(s.shape) do shape[d] = type(v) == "number" and v or tostring(v) end
    out[i] = { name = s.name, dtype = s.dtype, shape = shape }
  end
  return out
end

-- Run the graph `runs` times on the given inputs with each C step timed; returns the steps sorted by
-- time, {step (its place in the plan), kernel, op, line, shape, ms (per run), share (of the steps' total)},
-- plus the total ms per run.
-- cg:profile(50, ids, mask) -- print(ds.format_profile(rows)) shows them as a table.
function Compiled:profile(runs, ...)
  if type(runs) ~= "number" or runs < 1 then errors.raise("profile: give the number of runs first, then the inputs") end
  self(...)
  local p = self._last_plan
  local plan = p.plan
  dsffi.check(C.ds_plan_profile(plan, 1), "profile")
  local args = { n = select("#", ...), ... }
  local ok, err = pcall(function() for _ = 1, runs do self(unpack(args, 1, args.n)) end end)
  local rows, total = {}, 0
  for i, st in ipairs(p.log.steps) do
    local ms = C.ds_plan_step_seconds(plan, i - 1) * 1e3 / runs
    total = total + ms
    rows[i] = { step = i, kernel = st.kernel, op = st.op, line = st.line, shape = st.shape, ms = ms }
  end
  C.ds_plan_profile(plan, 0)
  if not ok then error(err, 0) end
  for _, r in ipairs(rows) do r.share = total > 0 and r.ms / total or 0 end
  table.sort(rows, function(a, b) return a.ms > b.ms end)
  return rows, total
end

-- the rows of Compiled:profile as a text table (the `limit` slowest, 20 by default)
function M.format_profile(rows, total, limit)
  local out = { string.format("%9s %6s  %-28s %-18s %s", "ms/run", "share", "kernel", "shape", "source") }
  for i = 1, math.min(limit or 20, #rows) do
    local r = rows[i]
    out[#out + 1] = string.format("%9.4f %5.1f%%  %-28s %-18s %s", r.ms, 100 * r.share, r.kernel,
      r.shape and S.str(r.shape) or "", r.line or "")
  end
  out[#out + 1] = string.format("%9.4f        total of %d steps", total or 0, #rows)
  return table.concat(out, "\n")
end

-- cg:to_dot() / cg:to_svg("g.svg"): the compiled graph as Graphviz (fused regions as clusters)
function Compiled:to_dot() return self.ir:to_dot() end
function Compiled:to_svg(path) return graphviz.render(self:to_dot(), path, "to_svg") end

function Compiled:__tostring()
  local s = self.stats
  local p = self._last_plan
  local plan = p and string.format("\nplan: %d C steps, %d buffers, arena %d bytes (unplanned %d)",
    C.ds_plan_num_steps(p.plan), C.ds_plan_num_buffers(p.plan), p.arena_bytes, p.eager_bytes) or ""
  local rules = {}
  for name, n in pairs(s.rewrite_rules or {}) do rules[#rules + 1] = name .. " " .. n end
  table.sort(rules)
  return string.format("compiled %s (dce %d, cse %d, fold %d, rewrite %d%s, prune %d, fuse %d, epilogue %d, " ..
    "conv_pool %d, prepack %d)\n%s%s", self.ir.name, s.dce or 0, s.cse or 0, s.fold or 0, s.rewrite or 0,
    #rules > 0 and " [" .. table.concat(rules, ", ") .. "]" or "", s.prune or 0, s.fuse or 0, s.epilogue or 0,
    s.conv_pool or 0, s.prepack or 0, tostring(self.ir), plan)
end

local OPTIONS = { dce = true, cse = true, fold = true, rewrite = true, prune = true, single_output = true, fuse = true,
                  epilogue = true, prepack = true, freeze = true, dtype = true }

-- ir: a graph the passes may rewrite (a copy of a traced one, or one read from a file); opts: {dce, cse, fold, rewrite, prune, single_output, fuse, epilogue,
-- prepack = false to skip, freeze = true for parameters as constants (passes/freeze.lua), rewrite = "all" or
-- {rule = true} for the rewrites that change bits within a tolerance (passes/rewrite.lua)}; owns_state: as M.optimize
function M.from_ir(ir, opts, owns_state)
  for k, v in pairs(opts or {}) do
    if not OPTIONS[k] then
      errors.raise(string.format("compile: unknown option '%s' (dce, cse, fold, rewrite, prune, single_output, " ..
        "fuse, epilogue, prepack, freeze, dtype)", tostring(k)))
    end
    if k == "rewrite" then rewrite.enabled(v)
    elseif k == "dtype" then autocast.check(v)
    elseif type(v) ~= "boolean" then errors.raise(string.format("compile: option '%s' must be a boolean", k)) end
  end
  local refresh = {}
  for _, s in ipairs(ir.state) do refresh[#refresh + 1] = hyper.refresh[s.tensor] end
  local base, late, stats = M.optimize(ir, opts, owns_state)
  return setmetatable({ base = base, ir = late, stats = stats, opts = opts or {}, _plans = {}, _nplans = 0,
                        refresh = refresh, label = "compiled " .. late.name, _by_shape = {} }, Compiled)
end

-- ds.compile of a graph: the passes run on a copy, so graph stays as it was (callable, exportable, inlined when the
-- compiled graph is called while tracing)
function M.compile_graph(graph, opts)
  local cg = M.from_ir(Graph.copy(graph), opts)
  cg.graph = graph
  return cg
end

-- compiled again from its saved IR without prepacked weights, with the same shape bindings planned: the plans
-- ds.save writes for C programs, whose steps may read only the tensors the graph file names
function M.unpacked(compiled)
  local opts = {}
  for k, v in pairs(compiled.opts) do opts[k] = v end
  opts.prepack = false
  local again = M.from_ir(Graph.copy(compiled.base), opts, true)
  for _, p in pairs(compiled._plans) do again:plan_for(p.env) end
  return again
end

function M.is_compiled(x) return getmetatable(x) == Compiled end

return M
