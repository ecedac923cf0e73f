-- graph.lua: the traced-graph IR (ds.Graph): plain data, printing, Graphviz, and running it on the eager kernels.
--[[ The IR (all plain Lua data; ds.compile, ds.save and the passes read it):

  graph.name          string
  graph.values[v]     {shape = {...}, dtype = "f32", kind = "input"|"state"|"const"|"node", name = string|nil}
                      one entry per value id v (1..#values). A dim is a number or a symbolic dim (ds.sym:
                      an interned expression over named dims such as batch, 10*batch, n-2).
  graph.inputs[i]     {name = "x", value = v, spec = ds.spec}   the tensors a call passes, in order
  graph.args[k]       {input = i} | {value = lua_value}         positional arguments of the traced function:
                      tensor k is graph input i; other Lua values were traced as constants
  graph.state[i]      {name = "fc.weight", tensor = T, value = v}
                      tensors the function read but did not receive; read BY REFERENCE at every run
  graph.constants[i]  {value = v, number = 2.5, dtype = "f32", tensor = T}  0-d constants from Lua numbers
  graph.nodes[i]      {op = "add", def = <op-table entry>, inputs = {v...}, attrs = {...},
                       outputs = {v...}, source = "file.lua:12"}
                      in topological order. attrs may hold symbolic dims (substituted per run).
                      A node of an op with def.mutates = {i...} has, after its def.noutputs outputs, one more
                      output per mutated input: the updated value (the runner updates a copy).
                      A node whose def has `run` (kind "control": cond, while_loop, print) is executed by
                      def.run(node, inputs, env) in Lua; its attrs may hold sub-graphs (Graph objects) and
                      its outputs count is #node.outputs; def.replay(node, inputs) records it again when a
                      graph holding it is inlined into another trace. def.side_effects marks nodes that must
                      never be removed (print).
  graph.outputs       {v...}  the returned tensors
  graph.state_writes  {{state = i, value = v}...}  after a run, state[i].tensor receives value v (in place)
  graph.input_writes  {{input = i, value = v}...}  after a run, the caller's input tensor i receives value v
                      (the traced function updated an input in place)
  graph.grad_writes   {{state = i, value = v | false}...}  after a run, state[i].tensor.grad is set to value v
                      (copied into the existing .grad when it was a tensor when traced), false clears it
  graph.training      train/eval mode of the traced module (nil for plain functions)

  Sub-graphs (cond branches, loop bodies) use the same layout without state; their inputs are the tensor
  operands followed by captured outer values (attrs.first_capture is the node input of capture 1), their
  outputs the results followed by the new values of the captures listed in attrs.written (a loop's cond
  graph returns its predicate only). The node's outputs are the results followed by those updated captures.

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
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs

local Graph = {}
Graph.__index = Graph

function Graph.new(name)
  return setmetatable({ name = name or "graph", values = {}, inputs = {}, args = {}, state = {}, constants = {},
    nodes = {}, outputs = {}, state_writes = {}, input_writes = {}, grad_writes = {}, _plans = {} }, Graph)
end

function Graph.is_graph(g) return getmetatable(g) == Graph end

-- ---- finishing: per-node metas, dynamic flags, last uses ----
function Graph:finalize()
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
  self._frees = {}
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
local function type_str(val) return val.dtype .. " " .. S.str(val.shape) end

local function attr_str(v)
  if Graph.is_graph(v) then return "<graph " .. v.name .. ">" end
  if type(v) == "table" and not sym.is(v) then
    local parts = {}
    for i = 1, #v do parts[i] = attr_str(v[i]) end
    for k, x in pairs(v) do
      if type(k) ~= "number" then parts[#parts + 1] = tostring(k) .. "=" .. attr_str(x) end
    end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

local function attrs_str(def, attrs)
  local parts = {}
  for _, a in ipairs(def.attrs or {}) do
    local v = attrs[a[1]]
    if v ~= nil and not Graph.is_graph(v) then parts[#parts + 1] = a[1] .. "=" .. attr_str(v) end
  end
  return #parts > 0 and (" {" .. table.concat(parts, ", ") .. "}") or ""
end

function Graph:_lines(lines, indent)
  local function vname(v) return "%" .. v end
  local ins = {}
  for _, inp in ipairs(self.inputs) do ins[#ins + 1] = inp.name .. ": " .. type_str(self.values[inp.value]) end
  local mode = self.training == nil and "" or (self.training and " [train]" or " [eval]")
  lines[#lines + 1] = string.format("%sgraph %s(%s)%s", indent, self.name, table.concat(ins, ", "), mode)
  local ind = indent .. "  "
  for _, inp in ipairs(self.inputs) do
    lines[#lines + 1] = string.format("%s%s = input %s : %s", ind, vname(inp.value), inp.name,
      type_str(self.values[inp.value]))
  end
  for _, s in ipairs(self.state) do
    lines[#lines + 1] = string.format("%s%s = state %s : %s", ind, vname(s.value), s.name,
      type_str(self.values[s.value]))
  end
  for _, c in ipairs(self.constants) do
    lines[#lines + 1] = string.format("%s%s = const %s : %s", ind, vname(c.value), tostring(c.number), c.dtype)
  end
  for _, node in ipairs(self.nodes) do
    local outs, ins_ = {}, {}
    for _, v in ipairs(node.outputs) do outs[#outs + 1] = vname(v) end
    for _, v in ipairs(node.inputs) do ins_[#ins_ + 1] = vname(v) end
    local types = {}
    for _, v in ipairs(node.outputs) do types[#types + 1] = type_str(self.values[v]) end
    local lhs = #outs > 0 and (table.concat(outs, ", ") .. " = ") or ""
    lines[#lines + 1] = string.format("%s%s%s(%s)%s%s   -- %s", ind, lhs, node.op, table.concat(ins_, ", "),
      attrs_str(node.def, node.attrs), #types > 0 and (" : " .. table.concat(types, ", ")) or "", node.source)
    for _, a in ipairs(node.def.attrs or {}) do
      local g = node.attrs[a[1]]
      if Graph.is_graph(g) then
        lines[#lines + 1] = ind .. "  " .. a[1] .. ":"
        g:_lines(lines, ind .. "    ")
      end
    end
  end
  local outs = {}
  for _, v in ipairs(self.outputs) do outs[#outs + 1] = vname(v) end
  lines[#lines + 1] = ind .. "return " .. table.concat(outs, ", ")
  for _, w in ipairs(self.state_writes) do
    lines[#lines + 1] = string.format("%sstate %s <- %s", ind, self.state[w.state].name, vname(w.value))
  end
  for _, w in ipairs(self.input_writes) do
    lines[#lines + 1] = string.format("%sinput %s <- %s", ind, self.inputs[w.input].name, vname(w.value))
  end
  for _, w in ipairs(self.grad_writes) do
    lines[#lines + 1] = string.format("%sstate %s.grad <- %s", ind, self.state[w.state].name, w.value and
      vname(w.value) or "nil")
  end
end

function Graph:__tostring()
  local lines = {}
  self:_lines(lines, "")
  return table.concat(lines, "\n")
end

-- Graphviz text: values are edges labelled with their type, ops and inputs are boxes
function Graph:to_dot()
  local out = { "digraph \"" .. self.name .. "\" {", "  rankdir=TB; node [fontname=\"Helvetica\", fontsize=10];" }
  local producer = {}
  local function esc(s) return (tostring(s):gsub("\"", "\\\"")) end
  for _, inp in ipairs(self.inputs) do
    local id = "v" .. inp.value
    producer[inp.value] = id
    out[#out + 1] = string.format("  %s [shape=invhouse, style=filled, fillcolor=\"#d8e8ff\", label=\"%s\\n%s\"];", id,
      esc(inp.name), esc(type_str(self.values[inp.value])))
  end
  for _, s in ipairs(self.state) do
    local id = "v" .. s.value
    producer[s.value] = id
    out[#out + 1] = string.format("  %s [shape=cylinder, style=filled, fillcolor=\"#fff0c8\", label=\"%s\\n%s\"];", id,
      esc(s.name), esc(type_str(self.values[s.value])))
  end
  for _, c in ipairs(self.constants) do
    local id = "v" .. c.value
    producer[c.value] = id
    out[#out + 1] = string.format("  %s [shape=plaintext, label=\"%s\"];", id, esc(tostring(c.number)))
  end
  for i, node in ipairs(self.nodes) do
    local id = "n" .. i
    out[#out + 1] = string.format("  %s [shape=box, style=\"rounded,filled\", fillcolor=\"#eeeeee\", " ..
      "label=\"%s%s\\n%s\", tooltip=\"%s\"];",
      id, esc(node.op), esc(attrs_str(node.def, node.attrs)), esc(node.source), esc(node.source))
    for _, v in ipairs(node.inputs) do
      out[#out + 1] = string.format("  %s -> %s [label=\"%s\", fontsize=8];", producer[v], id,
        esc(type_str(self.values[v])))
    end
    for _, v in ipairs(node.outputs) do producer[v] = id end
  end
  for k, v in ipairs(self.outputs) do
    out[#out + 1] = string.format("  out%d [shape=house, style=filled, fillcolor=\"#d8ffd8\", label=\"output " ..
      "%d\"];", k, k)
    out[#out + 1] = string.format("  %s -> out%d [label=\"%s\", fontsize=8];", producer[v], k,
      esc(type_str(self.values[v])))
  end
  for _, w in ipairs(self.state_writes) do
    out[#out + 1] = string.format("  %s -> v%d [style=dashed, color=\"#aa6600\", label=\"write\", fontsize=8];",
      producer[w.value], self.state[w.state].value)
  end
  out[#out + 1] = "}"
  return table.concat(out, "\n") .. "\n"
end

-- graph:to_svg("g.svg"): the Graphviz picture (ops as boxes, inputs, state, outputs; source lines as tooltips)
function Graph:to_svg(path) return graphviz.render(self:to_dot(), path, "graph:to_svg") end

-- ---- running ----
-- Bind symbolic dims from the actual inputs (env may carry the enclosing graph's bindings).
function Graph:bind(args, env)
  local specs = self._input_specs
  if not specs then
    specs = {}
    for i, inp in ipairs(self.inputs) do
      local v = self.values[inp.value]
      specs[i] = { name = inp.name, shape = v.shape, dtype = v.dtype }
    end
    self._input_specs = specs
  end
  return sym.bind_inputs("graph " .. self.name, specs, args, env)
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
  env = self:bind(args, env)
  local plan = plan_for(self, env)
  local vals = {}
  for i, inp in ipairs(self.inputs) do vals[inp.value] = args[i] end
  for _, s in ipairs(self.state) do vals[s.value] = s.tensor end
  for _, c in ipairs(self.constants) do vals[c.value] = c.tensor end
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

-- g(x, y, ...): the traced function's positional arguments (or just its tensor inputs)
function Graph:__call(...)
  local n = select("#", ...)
  local argv = { ... }
  local tensors
  if n == #self.args and n ~= #self.inputs then
    tensors = {}
    for k, a in ipairs(self.args) do
      if a.input then tensors[a.input] = argv[k]
      elseif argv[k] ~= a.value then
        errors.raise(string.format("graph %s: argument %d was traced as %s, got %s; trace again for a new value",
          self.name, k, tostring(a.value), tostring(argv[k])))
      end
    end
  else
    tensors = argv
  end
  if state.trace then return state.trace.inline(self, tensors) end
  return unpack((self:run(tensors)), 1, #self.outputs)
end

return Graph
