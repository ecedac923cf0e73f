-- graph.lua: the graph IR (ds.Graph): the one structure the tracer records, the passes rewrite, ds.save writes and
-- ds.load reads back; making, linking and copying it, its printer, and running it on the eager kernels (g(...)).
--[[ The IR (plain Lua data under the ds.Graph metatable; sub-graphs of cond / while_loop are ds.Graphs too):

  g.name              string
  g.values[id]        {id, shape = {...}, dtype = "f32", kind = "input"|"state"|"const"|"node", name = string|nil,
                       node = the producer (kind "node"), index = its slot (input i, state i, const i, output k)}
                      one entry per value id (1..g.next_id-1 for a traced graph; a loaded one keeps the file's ids).
                      A dim is a number or a symbolic dim (ds.sym: an interned expression over named dims such as
                      batch, 10*batch, n-2). node and index are set by Graph.link (finalize); a pass that makes or
                      moves a value sets them itself.
  g.next_id           the next free value id
  g.inputs[i]         the value id of input i (the tensors a call passes, in order)
  g.specs[i]          {name = "x", shape, dtype}: input i's name and type (what a call is checked against)
  g.args[k]           {input = i} | {value = lua_value}   positional arguments of the traced function: tensor k is
                      input i; other Lua values were traced as constants (nil for a graph read from a file without)
  g.state[i]          {name = "fc.weight", tensor = T, value = id}
                      tensors the function read but did not receive; read BY REFERENCE at every run
  g.consts[i]         {name, tensor = T, value = id, number = 2.5 | nil}  constants: 0-d ones made from Lua numbers
                      (number set), folded or frozen tensors (passes/fold.lua, freeze.lua), packed weights
  g.nodes[i]          {op = "add", def = <op-table entry>, inputs = {id...}, attrs = {...}, outputs = {id...},
                       line = "file.lua:12" | nil, program = <fused chain> (passes/fuse.lua, epilogue.lua)}
                      in topological order. attrs may hold symbolic dims (substituted per run).
                      A node of an op with def.mutates = {i...} has, after its def.noutputs outputs, one more
                      output per mutated input: the updated value (the runner updates a copy).
                      A node whose def has `run` (kind "control": cond, while_loop, print) is executed by
                      def.run(node, inputs, env, attrs) in Lua; its attrs may hold sub-graphs and its outputs count
                      is #node.outputs; def.replay(node, inputs) records it again when a graph holding it is
                      inlined into another trace (finalize gives every node its output metas, node.metas, for it).
                      def.side_effects marks nodes that must never be removed (print).
  g.outputs           {id...}  the returned tensors
  g.state_writes      {{state = i, value = id}...}  after a run, state[i].tensor receives the value (in place)
  g.input_writes      {{input = i, value = id}...}  after a run, the caller's input tensor i receives the value
                      (the traced function updated an input in place)
  g.grad_writes       {{state = i, value = id | false, into_existing}...}  after a run, state[i].tensor.grad is set
                      to the value (copied into the existing .grad when it was a tensor when traced), false clears it
  g.training          train/eval mode of the traced module (nil for plain functions)

  Sub-graphs (cond branches, loop bodies) use the same layout without state; their inputs are the tensor
  operands followed by captured outer values (attrs.first_capture is the node input of capture 1), their
  outputs the results followed by the new values of the captures listed in attrs.written (a loop's cond
  graph returns its predicate only). The node's outputs are the results followed by those updated captures.

  ds.compile runs the passes on a copy (Graph.copy), so the traced graph stays as it was traced.
  Running: g(...) binds named dims from the inputs (env), substitutes them into dynamic nodes' attrs and
  metas (cached per binding), runs each node with dispatch.run_kernel (the eager kernels) and frees values
  after their last use; then applies state writes and grad writes. Inside a trace, g(...) is inlined.
]]
local D = require("ds.dispatch")
local S = require("ds.shape")
local sym = require("ds.sym")
local errors = require("ds.errors")
local state = require("ds.state")
local graphviz = require("ds.graphviz")
local graph_dot = require("ds.graph_dot")
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs

local Graph = {}
Graph.__index = Graph

-- an empty graph named name
function Graph.new(name)
  return setmetatable({ name = name or "graph", values = {}, next_id = 1, inputs = {}, specs = {}, state = {},
    consts = {}, nodes = {}, outputs = {}, state_writes = {}, input_writes = {}, grad_writes = {} }, Graph)
end

-- whether g is a ds.Graph
function Graph.is_graph(g) return getmetatable(g) == Graph end

-- a new value of g (its id)
function Graph.add_value(g, shape, dt, kind, name)
  local id = g.next_id
  g.next_id = id + 1
  g.values[id] = { id = id, shape = shape, dtype = dt, kind = kind, name = name }
  return id
end

-- value id becomes g's next input, named name
function Graph.add_input(g, id, name)
  local v = g.values[id]
  g.inputs[#g.inputs + 1] = id
  g.specs[#g.inputs] = { name = name, shape = v.shape, dtype = v.dtype }
end

-- every value's slot: index (input, state, const, output k of its node) and node (its producer)
function Graph.link(g)
  for i, id in ipairs(g.inputs) do g.values[id].index = i end
  for i, s in ipairs(g.state) do g.values[s.value].index = i end
  for i, c in ipairs(g.consts) do g.values[c.value].index = i end
  for _, node in ipairs(g.nodes) do
    for k, id in ipairs(node.outputs) do g.values[id].node, g.values[id].index = node, k end
  end
  return g
end

-- a structural copy (values, nodes, lists and entries copied; tensors, attrs and sub-graphs shared): what the
-- passes rewrite, so the graph it was taken from stays as it was
function Graph.copy(g)
  local out = Graph.new(g.name)
  out.next_id, out.args, out.training = g.next_id, g.args, g.training
  local function shallow(t)
    local c = {}
    for k, x in pairs(t) do c[k] = x end
    return c
  end
  for id, v in pairs(g.values) do out.values[id] = shallow(v) end
  for i, node in ipairs(g.nodes) do
    local c = shallow(node)
    c.inputs, c.outputs = { unpack(node.inputs) }, { unpack(node.outputs) }
    out.nodes[i] = c
    for _, id in ipairs(c.outputs) do out.values[id].node = c end
  end
  out.inputs, out.outputs = { unpack(g.inputs) }, { unpack(g.outputs) }
  for _, list in ipairs { "specs", "state", "consts", "state_writes", "input_writes", "grad_writes" } do
    for i, e in ipairs(g[list]) do out[list][i] = shallow(e) end
  end
  return out
end

-- ---- finishing: links, per-node metas, dynamic flags, last uses ----
-- g:finalize() after the graph is built or changed: Graph.link, each node's output metas and dynamic flag, the
-- values each node frees when run; returns g
function Graph:finalize()
  Graph.link(self)
  local last = {}
  for i, node in ipairs(self.nodes) do
    local metas = {}
    local nout = node.def.run and #node.outputs or node.def.noutputs
    for j = 1, nout do
      local val = self.values[node.outputs[j]]
      metas[j] = { shape = val.shape, dtype = val.dtype }
    end
    node.metas = metas
    node.dynamic = sym.contains(node.attrs) or sym.contains(metas)
    for _, v in ipairs(node.inputs) do last[v] = i end
  end
  local keep = {}
  for _, v in ipairs(self.outputs) do keep[v] = true end
  for _, w in ipairs(self.state_writes) do keep[w.value] = true end
  for _, w in ipairs(self.input_writes) do keep[w.value] = true end
  for _, w in ipairs(self.grad_writes) do if w.value then keep[w.value] = true end end
  -- frees[i]: values whose last reader is node i (dropped after it runs, so memory follows liveness)
  self._frees, self._plans = {}, {}
  for v, i in pairs(last) do
    if not keep[v] and self.values[v].kind == "node" then
      local f = self._frees[i] or {}
      f[#f + 1] = v
      self._frees[i] = f
    end
  end
  return self
end

-- ---- printing ----
-- a stable text for an attr value (tables with sorted keys, symbolic dims, exact numbers; a sub-graph as its text)
local function attr_str(v)
  if type(v) == "table" and getmetatable(v) == nil then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = attr_str(x) end
    local keys = {}
    for k in pairs(v) do if type(k) ~= "number" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. attr_str(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif type(v) == "number" then
    if v ~= v then return "nan" end
    return string.format("%.17g", v)
  end
  return tostring(v)
end

-- "k=v, ..." of node's attrs, sorted by name (the passes compare nodes by it); shown = true leaves out sub-graphs
-- (the printer shows them below their node)
function Graph.attrs_str(node, shown)
  local keys = {}
  for k, v in pairs(node.attrs) do if not (shown and Graph.is_graph(v)) then keys[#keys + 1] = k end end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. attr_str(node.attrs[k]) end
  return table.concat(parts, ", ")
end

-- fused node body: "fused[add, relu](%1, %2)"
local function program_str(node)
  local ops, args = {}, {}
  for i, step in ipairs(node.program.steps) do ops[i] = step.op end
  for i, id in ipairs(node.inputs) do args[i] = "%" .. id end
  return string.format("%s[%s](%s)", node.op, table.concat(ops, ", "), table.concat(args, ", "))
end

local function vtype(v) return v.dtype .. S.str(v.shape) end

local function ids(list)
  local out = {}
  for i, id in ipairs(list) do out[i] = "%" .. id end
  return table.concat(out, ", ")
end

local function add_lines(g, lines, ind)
  local ins = {}
  for i, id in ipairs(g.inputs) do ins[i] = string.format("%s %%%d: %s", g.specs[i].name, id, vtype(g.values[id])) end
  local mode = g.training == nil and "" or (g.training and " [train]" or " [eval]")
  lines[#lines + 1] = string.format("%sgraph %s(%s)%s", ind, g.name, table.concat(ins, ", "), mode)
  ind = ind .. "  "
  for _, s in ipairs(g.state) do
    lines[#lines + 1] = string.format("%sstate %%%d = %s %s", ind, s.value, s.name, vtype(g.values[s.value]))
  end
  for _, c in ipairs(g.consts) do
    lines[#lines + 1] = string.format("%sconst %%%d = %s %s", ind, c.value,
      c.number ~= nil and tostring(c.number) or c.name, vtype(g.values[c.value]))
  end
  for _, node in ipairs(g.nodes) do
    local a = Graph.attrs_str(node, true)
    local body = node.program and program_str(node) or (node.op .. "(" .. ids(node.inputs)
      .. (a ~= "" and (#node.inputs > 0 and ", " or "") .. a or "") .. ")")
    local types = {}
    for k, id in ipairs(node.outputs) do types[k] = vtype(g.values[id]) end
    lines[#lines + 1] = string.format("%s%s%s  %s%s", ind, #node.outputs > 0 and (ids(node.outputs) .. " = ") or "",
      body, table.concat(types, ", "), node.line and ("  -- " .. node.line) or "")
    for _, a in ipairs(node.def.attrs or {}) do -- sub-graphs in the op's attr order
      local sub = node.attrs[a[1]]
      if Graph.is_graph(sub) then
        lines[#lines + 1] = ind .. "  " .. a[1] .. ":"
        add_lines(sub, lines, ind .. "    ")
      end
    end
  end
  for _, w in ipairs(g.state_writes) do
    lines[#lines + 1] = string.format("%sstate %s <- %%%d", ind, g.state[w.state].name, w.value)
  end
  for _, w in ipairs(g.input_writes) do
    lines[#lines + 1] = string.format("%sinput %s <- %%%d", ind, g.specs[w.input].name, w.value)
  end
  for _, w in ipairs(g.grad_writes) do
    lines[#lines + 1] = string.format("%sstate %s.grad <- %s", ind, g.state[w.state].name,
      w.value and ("%" .. w.value) or "nil")
  end
  lines[#lines + 1] = ind .. "return " .. ids(g.outputs)
end

-- the graph as text: inputs, state, constants, one line per node (fused chains as fused[ops]; sub-graphs indented
-- below their node), writes, outputs
function Graph:__tostring()
  local lines = {}
  add_lines(self, lines, "")
  return table.concat(lines, "\n")
end

-- g:to_dot(): the Graphviz text (graph_dot.lua: ops as boxes with their source lines as tooltips, inputs, state,
-- outputs; each fused region of a compiled graph a cluster)
function Graph:to_dot() return graph_dot.dot(self, function(node) return Graph.attrs_str(node, true) end) end
-- g:to_svg("g.svg"): that picture rendered by Graphviz's dot
function Graph:to_svg(path) return graphviz.render(self:to_dot(), path, "graph:to_svg") end

-- ---- running ----
-- Bind symbolic dims from the actual inputs (env may carry the enclosing graph's bindings).
function Graph:bind(args, env)
  return sym.bind_inputs("graph " .. self.name, self.specs, args, env)
end

-- per-binding resolved attrs/metas of the dynamic nodes
local function plan_for(self, env)
  local key = sym.env_key(env)
  local plan = self._plans[key]
  if plan then return plan end
  plan = {}
  for i, node in ipairs(self.nodes) do
    if node.dynamic then
      plan[i] = { attrs = sym.subst(node.attrs, env), metas = sym.subst(node.metas, env) }
    end
  end
  self._plans[key] = plan
  return plan
end

local function clone(t)
  local def = EW.contiguous
  return D.run_kernel(def, { t }, {}, { { shape = t._shape, dtype = t.dtype } })[1]
end

-- Run on concrete tensors (args = the tensor inputs in order); returns the list of outputs.
-- Also applies state writes (and grad writes) unless skip_writes.
function Graph:run(args, env, skip_writes)
  if not self._frees then self:finalize() end -- a copy, or a graph read from a file
  env = self:bind(args, env)
  local plan = plan_for(self, env)
  local vals = {}
  for i, id in ipairs(self.inputs) do vals[id] = args[i] end
  for _, s in ipairs(self.state) do vals[s.value] = s.tensor end
  for _, c in ipairs(self.consts) do vals[c.value] = c.tensor end
  local frees = self._frees
  local prev_trace = state.trace
  state.trace = nil
  local ok, err = pcall(function()
    for i, node in ipairs(self.nodes) do
      local def = node.def
      local ins = {}
      for j, v in ipairs(node.inputs) do ins[j] = vals[v] end
      local p = plan[i]
      local attrs, metas = p and p.attrs or node.attrs, p and p.metas or node.metas
      local outs
      if def.run then
        outs = def.run(node, ins, env, attrs)
      else
        local copies
        if def.mutates then
          copies = {}
          for k, j in ipairs(def.mutates) do ins[j] = clone(ins[j]); copies[k] = ins[j] end
        end
        outs = D.run_kernel(def, ins, attrs, metas, nil)
        if copies then for _, c in ipairs(copies) do outs[#outs + 1] = c end end
      end
      for j, v in ipairs(node.outputs) do vals[v] = outs[j] end
      local f = frees[i]
      if f then for _, v in ipairs(f) do vals[v] = nil end end
    end
  end)
  state.trace = prev_trace
  if not ok then error(err, 0) end
  local results = {}
  for i, v in ipairs(self.outputs) do results[i] = vals[v] end
  if not skip_writes then self:apply_writes(vals, args) end
  return results, vals
end

-- copy written values into the state tensors (and updated inputs into the caller's); set .grad fields
function Graph:apply_writes(vals, args)
  local copy = EW.contiguous
  local function write(t, v)
    if v ~= t then D.run_kernel(copy, { v }, {}, { { shape = t._shape, dtype = t.dtype } }, t) end
  end
  for _, w in ipairs(self.state_writes) do write(self.state[w.state].tensor, vals[w.value]) end
  for _, w in ipairs(self.input_writes) do write(args[w.input], vals[w.value]) end
  for _, w in ipairs(self.grad_writes) do
    local t = self.state[w.state].tensor
    local v = w.value and vals[w.value] or nil
    local cur = rawget(t, "grad")
    if v and w.into_existing and cur and rawget(cur, "_c") and S.equal(cur._shape, v._shape) and
      cur.dtype == v.dtype then
      if v ~= cur then D.run_kernel(copy, { v }, {}, { { shape = cur._shape, dtype = cur.dtype } }, cur) end
    else
      rawset(t, "grad", v)
    end
  end
end

-- the tensor inputs of a call with the traced function's positional arguments (or just its tensor inputs); what
-- names the callee in errors ("graph f", "compiled f")
function Graph.call_inputs(g, what, ...)
  local n = select("#", ...)
  local argv = { ... }
  if not (g.args and n == #g.args and n ~= #g.inputs) then return argv end
  local tensors = {}
  for k, a in ipairs(g.args) do
    if a.input then tensors[a.input] = argv[k]
    elseif argv[k] ~= a.value then
      errors.raise(string.format("%s: argument %d was traced as %s, got %s; trace again for a new value", what, k,
        tostring(a.value), tostring(argv[k])))
    end
  end
  return tensors
end

-- g(x, y, ...): the traced function's positional arguments (or just its tensor inputs)
function Graph:__call(...)
  local tensors = Graph.call_inputs(self, "graph " .. self.name, ...)
  if state.trace then return state.trace.inline(self, tensors) end
  return unpack((self:run(tensors)), 1, #self.outputs)
end

return Graph
