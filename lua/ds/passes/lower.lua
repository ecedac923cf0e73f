-- passes/lower.lua: the IR at one concrete shape binding -> steps over buffer layouts (lower.build),
-- and those steps + a memory plan -> a C plan (lower.emit) that runs every kernel without Lua.
-- A layout is {root, offset, strides, shape, dtype}: root = where the memory comes from
-- (graph input, state, constant, output, or an arena slot placed by passes/memplan.lua).
local D = require("ds.dispatch")
local S = require("ds.shape")
local sym = require("ds.sym")
local errors = require("ds.errors")
local fuse = require("ds.passes.fuse")
local layout = require("ds.passes.layout")
local memplan = require("ds.passes.memplan")
local loop = require("ds.passes.loop")
local dsffi = require("ds.ffi")
local dtype = require("ds.dtype")
local ffi, C = dsffi.ffi, dsffi.C

local M = {}

local contiguous_strides, numel, is_contiguous = layout.contiguous_strides, layout.numel, layout.is_contiguous
M.contiguous_strides, M.numel = contiguous_strides, numel

-- ---- view layouts: run the op's own `view` rule on a stand-in for a buffer layout ----
local Fake = {}
Fake.__index = Fake
function Fake:strides() local s = {}; for i, v in ipairs(self.layout.strides) do s[i] = v end; return s end
function Fake:storage_offset() return self.layout.offset end
function Fake:is_contiguous() return is_contiguous(self._shape, self.layout.strides) end
function Fake:contiguous() return self end

local function view_layout(def, layout, attrs, meta)
  local x = setmetatable({ _shape = layout.shape, dtype = layout.dtype, layout = layout }, Fake)
  local base, shape, strides, offset = def.view(x, attrs, meta)
  return { root = base.layout.root, offset = offset, strides = strides, shape = shape, dtype = base.dtype }
end

local function fake_tensor(l) return { dtype = l.dtype, _shape = l.shape } end

-- the layout covers its root's memory, contiguously from its start
local function whole(l)
  return l.offset == 0 and numel(l.shape) == numel(l.root.shape) and is_contiguous(l.shape, l.strides)
end

-- a while_loop node's cond and body lowered at env for a C loop step: {cond = sub, body = sub}, sub = {L, arena,
-- sources}; nil when the loop runs in Lua instead (a differentiated loop, a sub-graph with a Lua step or a
-- constant that is not a number)
local function loop_plans(node, env)
  if not loop.lowerable(node) then return nil end
  local out = {}
  for _, which in ipairs { "cond", "body" } do
    local ir, sources = loop.sub_ir(node.attrs[which .. "_graph"], node, which == "cond")
    if not ir then return nil end
    local L = M.build(ir, env)
    for _, s in ipairs(L.steps) do if s.lua or #L.grads > 0 then return nil end end
    out[which] = { L = L, arena = memplan(L), sources = sources }
  end
  return out
end

-- a state value updated by an op that writes its input (optimizer steps, the random generator) can be
-- updated in place when nothing reads the old value afterwards and the update is written back to it
-- (views share memory with their input: a value's group is the value it is a view of; so may `contiguous`)
-- in_place_rule(ir) -> in_place(node, pos, j, out_id): may the node at pos write its j-th input as out_id?
local function in_place_rule(ir)
  local group, last_read, kept = {}, {}, {}
  local function g(id) return group[id] or id end
  for i, node in ipairs(ir.nodes) do
    for _, id in ipairs(node.inputs) do last_read[g(id)] = i end
    if node.def.view or node.op == "contiguous" then group[node.outputs[1]] = g(node.inputs[1]) end
  end
  for _, id in ipairs(ir.outputs) do kept[g(id)] = true end
  for _, w in ipairs(ir.grad_writes or {}) do if w.value then kept[g(w.value)] = true end end
  for _, w in ipairs(ir.input_writes or {}) do kept[g(w.value)] = true end
  local written_back = {}
  for _, w in ipairs(ir.state_writes) do written_back[w.value] = ir.state[w.state].value end
  return function(node, pos, j, out_id)
    local id = node.inputs[j]
    local v = ir.values[id]
    if kept[g(id)] or last_read[g(id)] ~= pos then return false end
    for k, other in ipairs(node.inputs) do if k ~= j and g(other) == g(id) then return false end end
    if v.kind == "state" then return written_back[out_id] == id end
    return v.kind == "node" and g(id) == id
  end
end

-- the graph's outputs (fresh tensors per call: a computed root is written there directly, anything else copied),
-- its state and input writes and its gradients, into L (lay: value id -> layout; new_root, copy_to: M.build's)
local function bind_results(ir, L, lay, new_root, copy_to)
  local claimed = {}
  for i, id in ipairs(ir.outputs) do
    local l = lay[id]
    if l.root.kind == "arena" and not claimed[l.root] and l.offset == 0 and is_contiguous(l.shape, l.strides)
      and numel(l.shape) == numel(l.root.shape) then
      l.root.kind = "output"; l.root.index = i; claimed[l.root] = true
      l.root.shape = l.shape   -- the caller's tensor has the output's shape (a view may drop a dim of size 1)
      L.outputs[i] = { root = l.root, shape = l.shape }
    else
      local o = new_root("output", i, l.dtype, l.shape)
      copy_to(o, l)
      L.outputs[i] = { root = o.root, shape = l.shape }
    end
  end
  for _, w in ipairs(ir.state_writes) do
    local l, target = lay[w.value], lay[ir.state[w.state].value]
    if l.root ~= target.root then L.writes[#L.writes + 1] = { target = target, src = l } end
  end
  for _, w in ipairs(ir.input_writes or {}) do -- an input the function updated in place: the caller's tensor
    local l, target = lay[w.value], lay[ir.inputs[w.input]]
    if l.root ~= target.root then L.writes[#L.writes + 1] = { target = target, src = l } end
  end
  for _, w in ipairs(ir.grad_writes or {}) do
    if w.value then
      local l = lay[w.value]
      local o = new_root("output", nil, l.dtype, l.shape)
      copy_to(o, l)
      L.grads[#L.grads + 1] = { state = w.state, root = o.root, into_existing = w.into_existing }
    else
      L.grads[#L.grads + 1] = { state = w.state }
    end
  end
  -- state and input writes last: every read of the old values is done by then
  for _, w in ipairs(L.writes) do copy_to(w.target, w.src) end
end

-- Build steps for env (symbol bindings). Returns
-- { roots = {r = {kind, index, dtype, shape}}, steps = {{kernel, outs, ins, attrs, inplace_ok, op}},
--   outputs = {layout...}, writes = {{state, layout}}, grads = {{state, layout}} }
function M.build(ir, env)
  local L = { roots = {}, steps = {}, outputs = {}, writes = {}, grads = {} }
  local lay = {}
  local function shape_of(id) return sym.subst(ir.values[id].shape, env) end
  local function new_root(kind, index, dt, shape)
    local r = { kind = kind, index = index, dtype = dt, shape = shape, id = #L.roots + 1 }
    L.roots[#L.roots + 1] = r
    return { root = r, offset = 0, strides = contiguous_strides(shape), shape = shape, dtype = dt }
  end
  for i, id in ipairs(ir.inputs) do lay[id] = new_root("input", i, ir.values[id].dtype, shape_of(id)) end
  for i, s in ipairs(ir.state) do lay[s.value] = new_root("state", i, ir.values[s.value].dtype, shape_of(s.value)) end
  for i, c in ipairs(ir.consts) do lay[c.value] = new_root("const", i, ir.values[c.value].dtype, shape_of(c.value)) end
  local function step(kernel, outs, ins, attrs, node, inplace_ok)
    L.steps[#L.steps + 1] = { kernel = kernel, outs = outs, ins = ins, attrs = attrs or {}, op = node and
      node.op or "copy",
                              line = node and node.line, inplace_ok = inplace_ok }
  end
  local function copy_to(dst, src)
    step("ds_copy_" .. dst.dtype, { dst }, { src }, {}, nil, true)
  end

  local in_place = in_place_rule(ir)

  -- a C loop step: its loop variables' initial values and its captures as whole buffers (copied when they are not);
  -- a capture the loop updates is updated in place when the old value dies there (else in a copy made first)
  local function loop_step(node, pos, ins, plans)
    local n, written_at = node.attrs.nresults, {}
    for j, k in ipairs(node.attrs.written or {}) do written_at[k] = j end
    local function whole_copy(l)
      if whole(l) then return l end
      local c = new_root("arena", nil, l.dtype, l.shape)
      copy_to(c, l)
      return c
    end
    local operands, outs = {}, {}
    for i = 1, n do operands[i] = whole_copy(ins[i]) end
    for k = 1, #ins - n do
      local j, l = written_at[k], ins[n + k]
      if j then
        local id = node.outputs[n + j]
        if not (in_place(node, pos, n + k, id) and (l.root.kind == "arena" or l.root.kind == "state") and whole(l)) then
          local c = new_root("arena", nil, l.dtype, l.shape)
          copy_to(c, l)
          l = c
        end
        operands[n + k], lay[id] = l, l
      else
        operands[n + k] = whole_copy(l)
      end
    end
    for i = 1, n do
      local id = node.outputs[i]
      outs[i] = new_root("arena", nil, ir.values[id].dtype, shape_of(id))
      lay[id] = outs[i]
    end
    L.steps[#L.steps + 1] = { loop = plans, nvars = n, max_trips = node.attrs.max_trips, outs = outs, ins = operands,
                              op = node.op, line = node.line }
  end

  -- a kernel step: fresh outputs, a mutated input updated in place or in a copy (the node's extra output)
  local function kernel_step(node, pos, ins, attrs)
    local def = node.def
    local nout = def.noutputs
    local outs = {}
    for i = 1, nout do
      local id = node.outputs[i]
      outs[i] = new_root("arena", nil, ir.values[id].dtype, shape_of(id)); lay[id] = outs[i]
    end
    if def.mutates then
      for k, j in ipairs(def.mutates) do
        local id = node.outputs[nout + k]
        if in_place(node, pos, j, id) and (ins[j].root.kind == "arena" or ins[j].root.kind == "state") then
          lay[id] = ins[j]
        else
          local c = new_root("arena", nil, ir.values[id].dtype, shape_of(id))
          copy_to(c, ins[j])
          ins[j] = c
          lay[id] = c
        end
      end
    end
    local fo = {}
    for i = 1, nout do fo[i] = fake_tensor(outs[i]) end
    local fi = {}
    for i = 1, #ins do fi[i] = fake_tensor(ins[i]) end
    local kdt = def.kernel_dtype and def.kernel_dtype(fi, fo, attrs) or (ins[1] and ins[1].dtype) or outs[1].dtype
    if not def.dtypes[kdt] then errors.raise(string.format("compile: %s has no %s kernel", node.op, kdt)) end
    local buf, n = D.pack(def, attrs)
    local packed = {}
    for i = 1, n do packed[i] = buf[i - 1] end
    step(D.kernel_name(def, kdt), outs, ins, packed, node, def.elementwise == true)
  end

  for pos, node in ipairs(ir.nodes) do
    local def = node.def
    local attrs = sym.subst(node.attrs, env)
    local ins = {}
    for i, id in ipairs(node.inputs) do
      ins[i] = lay[id]
      if not ins[i] then
        errors.raise(string.format("compile: %s reads value %%%d before it is computed", node.op, id))
      end
    end
    local plans = def.run and loop_plans(node, env)
    if plans then
      loop_step(node, pos, ins, plans)
    elseif node.program then
      local outs = {}
      for i, id in ipairs(node.outputs) do
        outs[i] = new_root("arena", nil, ir.values[id].dtype, shape_of(id)); lay[id] = outs[i]
      end
      step(D.kernel_name(node.def, outs[1].dtype), outs, ins, fuse.pack(node.program), node, node.op == "fused")
    elseif def.view then
      local x = ins[1]
      if def.name == "reshape" and not is_contiguous(x.shape, x.strides) then
        local c = new_root("arena", nil, x.dtype, x.shape)
        copy_to(c, x)
        x = c
      end
      local id = node.outputs[1]
      lay[id] = view_layout(def, x, attrs, { shape = shape_of(id), dtype = ir.values[id].dtype })
    elseif def.run then
      -- a control node (cond, while_loop, print) runs in Lua between two ranges of C steps;
      -- its results come back as tensors bound to external buffers
      local outs = {}
      for i, id in ipairs(node.outputs) do
        outs[i] = new_root("lua", nil, ir.values[id].dtype, shape_of(id)); lay[id] = outs[i]
      end
      L.steps[#L.steps + 1] = { lua = node, outs = outs, ins = ins, attrs = attrs, op = node.op, line = node.line }
    elseif def.name == "contiguous" and is_contiguous(ins[1].shape, ins[1].strides) then
      lay[node.outputs[1]] = ins[1]   -- already contiguous (graph inputs are bound contiguous): no copy
    elseif def.kernel then
      kernel_step(node, pos, ins, attrs)
    else
      errors.raise(string.format("compile: op %s has neither a kernel nor a view rule", node.op))
    end
  end
  bind_results(ir, L, lay, new_root, copy_to)
  return L
end

-- ---- emit the C plan ----
M.LOOP = "ds_loop"   -- the kernel name of a loop step in a plan's log and file (no registry kernel has it)

-- the bindings of a loop's sub-plan (lowered as L; sources: passes/loop.lua's) for ds_plan_add_loop:
-- {{buffer id, source}...}, sources 0.. the loop's operands, -1 the cond's predicate, -(j + 1) the body's output j
function M.loop_bindings(L, sources, which)
  local binds = {}
  for _, r in ipairs(L.roots) do
    local src
    if r.kind == "input" then src = sources.input[r.index]
    elseif r.kind == "state" then src = sources.state[r.index]
    elseif r.kind == "output" then src = which == "cond" and -1 or -(r.index + 1)
    end
    if src then binds[#binds + 1] = { r.buffer, src } end
  end
  return binds
end

local i64buf = ffi.new("int64_t[8]")
local st_buf = ffi.new("int64_t[8]")

-- L after memplan (roots of kind "arena" have .offset); returns the plan (ffi, gc'd), its segments, and
-- a log of the buffers and steps added (what ds.save writes as name.plan for the C-only loader).
-- Every root gets root.buffer, its buffer id.
function M.emit(L, arena_bytes)
  local plan = dsffi.check(C.ds_plan_new(arena_bytes), "compile")
  plan = ffi.gc(plan, C.ds_plan_free)
  local log = { arena_bytes = arena_bytes, buffers = {}, steps = {} }
  local function add_buffer(kind, base, dt, shape, strides, offset, role, index)
    S.check(shape, "compile")
    for i = 1, #shape do i64buf[i - 1] = shape[i] end
    if strides then for i = 1, #strides do st_buf[i - 1] = strides[i] end end
    local id = dsffi.check_index(C.ds_plan_add_buffer(plan, kind, base, dtype.code[dt], #shape, i64buf, strides and
      st_buf or nil, offset),
      "compile: " .. role .. " buffer")
    log.buffers[id + 1] = { kind = tonumber(kind), base = base, dtype = dt, shape = shape, strides = strides,
                            offset = offset, role = role, index = index }
    return id
  end
  for _, r in ipairs(L.roots) do
    if r.kind == "arena" then
      r.buffer = add_buffer(C.DS_BUF_ARENA, -1, r.dtype, r.shape, nil, r.offset, "arena")
    else
      r.buffer = add_buffer(C.DS_BUF_EXTERNAL, -1, r.dtype, r.shape, nil, 0, r.kind, r.index)
    end
  end
  local views = {}
  local function buffer_of(l)
    local r = l.root
    if l.offset == 0 and S.equal(l.shape, r.shape) and is_contiguous(l.shape, l.strides) then return r.buffer end
    local key = r.id .. ":" .. l.offset .. ":" .. table.concat(l.shape, ",") .. ":" .. table.concat(l.strides, ",")
    local b = views[key]
    if b then return b end
    -- an empty view reads nothing: it starts at its base's start (a narrow of an empty tensor has an offset past
    -- it, which the runtime refuses)
    local empty = S.numel(l.shape) == 0
    b = add_buffer(C.DS_BUF_VIEW, r.buffer, l.dtype, l.shape, l.strides, empty and 0 or l.offset, "view")
    views[key] = b
    return b
  end
  -- segments: C steps [from, to) then (optionally) one Lua step
  local segments, nc, from = {}, 0, 0
  for _, s in ipairs(L.steps) do
    if s.loop then
      local ids = {}
      for _, l in ipairs(s.outs) do ids[#ids + 1] = buffer_of(l) end
      for _, l in ipairs(s.ins) do ids[#ids + 1] = buffer_of(l) end
      local entry = { kernel = M.LOOP, buffers = ids, attrs = {}, op = s.op, line = s.line, shape = s.outs[1].shape,
                      nvars = s.nvars, nextra = #s.ins - s.nvars, max_trips = s.max_trips }
      local subs = {}
      for _, which in ipairs { "cond", "body" } do
        local sub = s.loop[which]
        local q, _, qlog = M.emit(sub.L, sub.arena)
        local binds = M.loop_bindings(sub.L, sub.sources, which)
        local b_sub, b_src = {}, {}
        for k, b in ipairs(binds) do b_sub[k], b_src[k] = b[1], b[2] end
        subs[which] = { plan = q, n = #binds, sub = ffi.new("int[?]", #binds + 1, b_sub),
                        src = ffi.new("int[?]", #binds + 1, b_src) }
        entry[which] = { log = qlog, binds = binds }
      end
      local trips = (s.max_trips == nil or s.max_trips == math.huge) and -1 or s.max_trips
      local c, b = subs.cond, subs.body
      ffi.gc(c.plan, nil); ffi.gc(b.plan, nil)   -- the loop step owns them now (and frees them when it fails)
      dsffi.check_index(C.ds_plan_add_loop(plan, c.plan, b.plan, s.nvars, #s.ins - s.nvars, ffi.new("int[?]", #ids, ids),
        c.n, c.sub, c.src, b.n, b.sub, b.src, trips), "compile: while_loop (" .. (s.line or "?") .. ")")
      log.steps[#log.steps + 1] = entry
      nc = nc + 1
    elseif s.lua then
      s.in_buffers = {}
      for k, l in ipairs(s.ins) do s.in_buffers[k] = buffer_of(l) end
      segments[#segments + 1] = { from = from, to = nc, lua = s }
      from = nc
    else
      local ids = {}
      for _, l in ipairs(s.outs) do ids[#ids + 1] = buffer_of(l) end
      for _, l in ipairs(s.ins) do ids[#ids + 1] = buffer_of(l) end
      local b = ffi.new("int[?]", #ids, ids)
      local a = ffi.new("double[?]", #s.attrs + 1, s.attrs)
      dsffi.check_index(C.ds_plan_add_step(plan, s.kernel, #ids, b, #s.attrs, a),
        "compile: " .. s.op .. " (" .. (s.line or "?") .. ")")
      log.steps[#log.steps + 1] = { kernel = s.kernel, buffers = ids, attrs = s.attrs, op = s.op, line = s.line,
                                    shape = s.outs[1] and s.outs[1].shape }
      nc = nc + 1
    end
  end
  segments[#segments + 1] = { from = from, to = nc }
  return plan, segments, log
end

return M
