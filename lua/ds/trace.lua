-- trace.lua: ds.trace / ds.spec: run Lua code on abstract tensors (shape + dtype, no data) and record a ds.Graph
-- (graph.lua: the IR the passes rewrite and ds.save writes).
-- The tracer is what dispatch calls as state.trace.record for every op; it also turns in-place ops into
-- functional nodes (writes into a narrow view into index_copy_ of its base), reads outside tensors as graph state
-- by reference, and records state writes.
local D = require("ds.dispatch")
local sym = require("ds.sym")
local errors = require("ds.errors")
local state = require("ds.state")
local dtype = require("ds.dtype")
local Tensor = require("ds.tensor")
local Graph = require("ds.graph")
local tape = require("ds.tape")
local random = require("ds.random")
local argcheck = require("ds.args")
local creation = require("ds.ops.creation") -- the arange def
local index_copy = require("ds.ops.index_copy") -- the index_copy_ def

local M = {}
local is_tensor = Tensor.is_tensor

-- ---- specs ----
local Spec = {}
Spec.__index = Spec
Spec.__tostring = function(s)
  local dims = {}
  for i, d in ipairs(s.shape) do dims[i] = type(d) == "string" and d or (d == -1 and "?" or tostring(d)) end
  return string.format("spec(%s%s, %s)", s.name and (s.name .. ": ") or "", "(" ..
    table.concat(dims, ",") .. ")", s.dtype)
end

-- ds.spec(shape, dtype, name): dims are numbers, -1 (dynamic) or strings (named dynamic dims)
function M.spec(shape, dt, name)
  if type(shape) ~= "table" or is_tensor(shape) then errors.raise("spec: shape must be a table of dims") end
  local dims = {}
  for i, d in ipairs(shape) do
    local ok = type(d) == "string" and d ~= "" and not d:find("[*+%- ]")
      or type(d) == "number" and (d == -1 or (d >= 0 and d == math.floor(d)))
    if not ok then
      errors.raise(string.format("spec: dim %d is %s; a dim is a size >= 0, -1 (dynamic) or a name such as \"batch\"",
        i, tostring(d)))
    end
    dims[i] = d
  end
  local n = dtype.normalize(dt or "f32")
  if not n then errors.raise("spec: unknown dtype '" .. tostring(dt) .. "'") end
  if name ~= nil and type(name) ~= "string" then errors.raise("spec: name must be a string") end
  return setmetatable({ shape = dims, dtype = n, name = name }, Spec)
end
function M.is_spec(s) return getmetatable(s) == Spec end

-- ---- reaching the tensors a function can see (names for state, grads to restore, escaped values) ----
local skip
local function skip_set()
  if skip then return skip end
  skip = { [_G] = true }
  for _, v in pairs(package.loaded) do if type(v) == "table" then skip[v] = true end end
  return skip
end

local ds_prefix = debug.getinfo(1, "S").source:match("^(@.*/)[^/]*$") or "@"

local function clean_path(p) return (p:gsub("%.%_[%w_]+", ""):gsub("^%.", "")) end

-- visit(tensor, path, table, key) for every tensor reachable from roots {{name, value}...};
-- on_table(t, path) for every table; key_name(tensor) names tensors used as table keys
local function walk(roots, visit, on_table, key_name)
  local seen, count = {}, 0
  local sk = skip_set()
  local function go(v, path, depth, holder, key)
    if is_tensor(v) then visit(v, path, holder, key); return end
    local tv = type(v)
    if depth > 8 or count > 20000 or (tv ~= "table" and tv ~= "function") or seen[v] or sk[v] then return end
    seen[v] = true
    count = count + 1
    if tv == "table" then
      if sym.is(v) or Graph.is_graph(v) or M.is_spec(v) then return end
      if on_table then on_table(v, path) end
      for k, x in pairs(v) do
        local kt = type(k)
        local ks = (kt == "string" and ("." .. k)) or (kt == "number" and ("." .. k))
          or (is_tensor(k) and "[" .. (key_name and key_name(k) or "tensor") .. "]") or nil
        if ks then go(x, path .. ks, depth + 1, v, k) end
      end
    else
      local info = debug.getinfo(v, "S")
      if info.what == "C" or info.source:sub(1, #ds_prefix) == ds_prefix then return end
      local i = 1
      while true do
        local n, x = debug.getupvalue(v, i)
        if not n then break end
        go(x, n, depth + 1, nil, nil)
        i = i + 1
      end
    end
  end
  for _, r in ipairs(roots) do go(r[2], r[1], 0, nil, nil) end
end

-- ---- the tracer ----
local Tracer = {}
Tracer.__index = Tracer

local function new_tracer(graph, parent, registry)
  local t = setmetatable({ graph = graph, parent = parent, registry = registry, bound = {}, state_ix = {},
    consts = {}, versions = {}, written_state = {}, grad_before = {}, names = {}, cap_vid = {},
      cap_written = {} }, Tracer)
  -- dispatch and autograd call these without self
  t.record = function(def, inputs, attrs, metas, out) return t:record_op(def, inputs, attrs, metas, out) end
  t.detach = function(x) return t:detach_(x) end
  t.inline = function(g, args) return t:inline_(g, args) end
  t.rebind_outer = function(x, newer) t:rebind(x, t:value_of(newer)) end
  return t
end
M.new_tracer = new_tracer

function Tracer:new_value(shape, dt, kind, name) return Graph.add_value(self.graph, shape, dt, kind, name) end

-- an abstract tensor bound to value v of this tracer's graph (its own metatable, Tensor._abstract_mt: the class's
-- methods, comparisons that point at ds.cond)
function Tracer:abstract(v, name)
  local val = self.graph.values[v]
  return setmetatable({ _shape = val.shape, dtype = val.dtype, _vid = v, _origin = v, _tracer = self,
    _name = name or ("%" .. v) }, Tensor._abstract_mt)
end

local function copy_attrs(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy_attrs(x) end
  return out
end

function Tracer:is_ancestor(t)
  local p = self.parent
  while p do
    if p == t then return true end
    p = p.parent
  end
  return false
end

function Tracer:check_fresh(x)
  local base = rawget(x, "_base")
  if base and (self.versions[base] or 0) ~= rawget(x, "_base_version") then
    errors.raise(string.format("trace: this tensor is a view of %s, which was updated in place after the view was "
      .. "taken (%s); in a traced function views do not see later in-place updates: take the view after the "
      .. "update, or use out-of-place ops", rawget(base, "_name") or "a tensor", errors.user_site()))
  end
end

function Tracer:state_name(x)
  local n = self.names[x]
  if n and n ~= "" then return n end
  if x == random.state() then return "rng_state" end
  return rawget(x, "_name") or ("state" .. (#self.graph.state + 1))
end

-- index of concrete tensor x in graph.state (registering it)
function Tracer:state_index(x)
  local i = self.state_ix[x]
  if i then return i end
  local g = self.graph
  local shape = {}
  for k, d in ipairs(x._shape) do shape[k] = d end
  local name = self:state_name(x)
  local v = self:new_value(shape, x.dtype, "state", name)
  i = #g.state + 1
  g.state[i] = { name = name, tensor = x, value = v }
  self.state_ix[x] = i
  if self.grad_before[x] == nil then self.grad_before[x] = { rawget(x, "grad") } end
  return i
end

function Tracer:constant(x, c)
  local key = x.dtype .. ":" .. tostring(c)
  local v = self.consts[key]
  if v then return v end
  v = self:new_value({}, x.dtype, "const")
  local cs = self.graph.consts
  cs[#cs + 1] = { name = "c" .. v, value = v, number = c, tensor = x }
  self.consts[key] = v
  return v
end

-- a value of an enclosing trace (or outside tensor) used inside a sub-graph becomes an extra input
function Tracer:capture(x)
  local reg = self.registry
  local k = reg.index[x]
  if not k then
    local outer = self.parent:value_of(x)
    k = #reg.list + 1
    reg.list[k] = x; reg.index[x] = k; reg.outer[k] = outer
  end
  return self:capture_input(k)
end

function Tracer:capture_input(k)
  local v = self.cap_vid[k]
  if not v then
    local ov = self.parent.graph.values[self.registry.outer[k]]
    v = self:new_value(ov.shape, ov.dtype, "input", "capture" .. k)
    self.cap_vid[k] = v
  end
  return v
end

-- the value id of tensor x in this graph
function Tracer:value_of(x)
  local b = self.bound[x]
  if b then return b end
  if rawget(x, "_c") == nil then
    local owner = rawget(x, "_tracer")
    if owner == self then
      self:check_fresh(x)
      return rawget(x, "_vid")
    end
    if not self:is_ancestor(owner) then
      errors.raise("trace: an abstract tensor from another trace is used here (" .. errors.user_site() .. "); "
        .. "it escaped the traced function that made it (stored in a table or upvalue?)")
    end
    return self:capture(x)
  end
  local c = rawget(x, "_const")
  if c ~= nil then return self:constant(x, c) end
  if self.parent then return self:capture(x) end
  return self.graph.state[self:state_index(x)].value
end

-- x now holds value v (an in-place op or a mutating kernel updated it)
function Tracer:rebind(x, v)
  self.versions[x] = (self.versions[x] or 0) + 1
  if rawget(x, "_c") == nil and rawget(x, "_tracer") == self then
    rawset(x, "_vid", v)
    return
  end
  if rawget(x, "_const") ~= nil then errors.raise("trace: in-place update of a constant made from a Lua number") end
  if self.parent then
    if not self.registry.index[x] then self:capture(x) end
    self.cap_written[self.registry.index[x]] = true
  else
    local i = self:state_index(x)
    if not self.written_state[i] then
      self.written_state[i] = true
      self.written_order[#self.written_order + 1] = x
    end
  end
  self.bound[x] = v
end

-- state.trace.record: one op call -> one node; returns the output tensors dispatch hands back
function Tracer:record_op(def, inputs, attrs, metas, out)
  local ivids = {}
  for i = 1, #inputs do ivids[i] = self:value_of(inputs[i]) end
  if out then
    if state.grad_enabled and rawget(out, "requires_grad") then tape.check_inplace(def, out) end
    if rawget(out, "_base") and rawget(out, "_region") then -- a narrow of its base: the write goes into the base
      return self:write_region(out, self:record_op(def, inputs, attrs, metas, nil)[1])
    elseif rawget(out, "_base") then
      errors.raise(string.format("%s_: in-place update of a view inside a traced function (%s); the graph is "
        .. "functional and cannot write through views: update the base tensor, or use out-of-place ops",
        def.name, errors.user_site()))
    end
  end
  local node = { op = def.name, def = def, inputs = ivids, attrs = copy_attrs(attrs), outputs = {},
                 line = self.line or errors.user_site() }
  local nout = #metas
  for i = 1, nout do node.outputs[i] = self:new_value(metas[i].shape, metas[i].dtype, "node") end
  if def.mutates then
    for _, j in ipairs(def.mutates) do
      local src = self.graph.values[ivids[j]]
      node.outputs[#node.outputs + 1] = self:new_value(src.shape, src.dtype, "node")
    end
  end
  local nodes = self.graph.nodes
  nodes[#nodes + 1] = node
  local outs = {}
  for i = 1, nout do
    if i == 1 and out then
      self:rebind(out, node.outputs[1])
      outs[1] = out
    else
      local t = self:abstract(node.outputs[i])
      if def.view then
        local src = inputs[1]
        local base = rawget(src, "_base") or src
        rawset(t, "_base", base)
        rawset(t, "_base_version", self.versions[base] or 0)
        if def.name == "narrow" and base == src then
          rawset(t, "_region", { dim = attrs.dim, start = attrs.start, length = attrs.length })
        end
      end
      outs[i] = t
    end
  end
  if def.mutates then
    for k, j in ipairs(def.mutates) do self:rebind(inputs[j], node.outputs[nout + k]) end
  end
  return outs
end

-- out, a narrow of its base, takes tensor t: an index_copy_ node writes t into the base at the narrowed positions
-- (start and length may be symbolic), so x:narrow(d, pos, n):copy_(v) updates a cache inside a graph
function Tracer:write_region(out, t)
  local r, base = rawget(out, "_region"), rawget(out, "_base")
  local index = D.call(creation.arange, {}, { start = r.start, step = 1, length = r.length, dtype = "i64" })
  D.call(index_copy.index_copy_, { base, index, t }, { dim = r.dim })
  self:rebind(out, self:value_of(t))
  rawset(out, "_base_version", self.versions[base] or 0)
  return { out }
end

-- state.trace.detach: the same value, cut from the autograd tape
function Tracer:detach_(x)
  local t = self:abstract(self:value_of(x))
  rawset(t, "_name", rawget(x, "_name"))
  return t
end

-- calling a Graph inside a trace records its nodes into this trace (with autograd)
function Tracer:inline_(g, args)
  local vals = {}
  for i, id in ipairs(g.inputs) do vals[id] = args[i] end
  for _, s in ipairs(g.state) do vals[s.value] = s.tensor end
  for _, c in ipairs(g.consts) do vals[c.value] = c.tensor end
  for _, node in ipairs(g.nodes) do
    local ins = {}
    for j, v in ipairs(node.inputs) do ins[j] = vals[v] end
    local outs
    if node.def.replay then
      outs = node.def.replay(node, ins)
    else
      local metas = node.def.infer(ins, node.attrs, node.def)
      if metas.shape then metas = { metas } end
      outs = self:record_op(node.def, ins, node.attrs, metas, nil)
      if state.grad_enabled and node.def.backward then tape.maybe_record(node.def, ins, node.attrs, outs) end
      if node.def.mutates then
        for k, j in ipairs(node.def.mutates) do outs[#metas + k] = ins[j] end
      end
    end
    for j, v in ipairs(node.outputs) do vals[v] = outs[j] end
  end
  for _, w in ipairs(g.state_writes) do
    local t = g.state[w.state].tensor
    if vals[w.value] ~= t then self:rebind(t, self:value_of(vals[w.value])) end
  end
  for _, w in ipairs(g.input_writes) do self:rebind(args[w.input], self:value_of(vals[w.value])) end
  for _, w in ipairs(g.grad_writes) do
    local t = g.state[w.state].tensor
    self:value_of(t)
    rawset(t, "grad", w.value and vals[w.value] or nil)
  end
  local res = {}
  for i, v in ipairs(g.outputs) do res[i] = vals[v] end
  return unpack(res, 1, #g.outputs)
end

-- ---- running a function under a tracer ----
-- Tracing swaps no Tensor method or metamethod: tensor.lua's storage queries, item and totable raise the honest
-- error for an abstract tensor (it has no storage), and abstract tensors have a metatable of their own
-- (Tensor._abstract_mt) whose __lt/__le point at ds.cond.
-- The one global it replaces is _G.tonumber, which Lua 5.1 forces: tonumber consults no metamethod (any table gives
-- nil), and the user's code (the traced function, its callees, its source-converted copy, which took its environment
-- when it was made) reads tonumber from _G. So while run_traced runs fn, and only then (restored on return and on
-- error, nested traces in order), _G.tonumber is traced_tonumber: an abstract tensor raises the honest error, any
-- other value goes to the original tonumber unchanged.
local raw_tonumber = tonumber
local function traced_tonumber(v, base)
  if is_tensor(v) and rawget(v, "_c") == nil then Tensor._abstract_read(v, "tonumber") end
  return raw_tonumber(v, base)
end

-- run fn(...) with tracer tr active; returns ok, results (packed)
function M.run_traced(tr, fn, args, nargs)
  local prev, prev_tonumber = state.trace, _G.tonumber
  state.trace = tr
  _G.tonumber = traced_tonumber
  local res = { xpcall(function() return fn(unpack(args, 1, nargs)) end, function(e)
    if type(e) == "string" then
      local site = errors.user_site()
      if site ~= "?" and not e:find(site, 1, true) then e = e .. "\n  (while tracing, at " .. site .. ")" end
      if e:find("attempt to compare", 1, true) then
        e = e .. "\n  (while tracing, dims named in specs are symbolic and tensors are abstract: their values exist "
          .. "only when the graph runs; use ds.cond / ds.while_loop, or a spec with a fixed size)"
      end
      if e:find("number expected, got table", 1, true) or e:find("'for' [%a ]+ must be a number") then
        e = e .. "\n  (while tracing, a tensor used as a Lua number has no value yet: keep computing with tensor ops, "
          .. "or branch and loop with ds.cond / ds.while_loop; source conversion (docs/CONVERSION.md) turns a numeric "
          .. "for with tensor bounds into a graph loop, but not this use)"
      end
    end
    return e
  end) }
  state.trace = prev
  _G.tonumber = prev_tonumber
  return res
end

local function fn_name(fn)
  local info = debug.getinfo(fn, "S")
  return (info.short_src or "?"):match("([^/]*)$"):gsub("%.lua$", "") .. ":" .. (info.linedefined or 0)
end

-- lift tensors created inside the trace and stored outside it (lazily built optimizer state) into state:
-- their creation node runs now, eagerly, and the graph reads and writes them like any other state
function Tracer:lift_escaped()
  local g = self.graph
  local producer = {}
  for i, node in ipairs(g.nodes) do for _, v in ipairs(node.outputs) do producer[v] = i end end
  local lifted = {}
  walk(self.roots, function(t, path, holder, key)
    if holder == nil or rawget(t, "_c") ~= nil or rawget(t, "_tracer") ~= self then return end
    local origin = rawget(t, "_origin")
    local ni = producer[origin]
    local node = ni and g.nodes[ni]
    if not node or #node.inputs > 0 or sym.contains(node.attrs) or sym.contains(g.values[origin].shape) or
      node.def.run then
      errors.raise(string.format("trace: a tensor computed inside the traced function was stored outside it, in %s "
        .. "(made at %s); create it before tracing (or inside ds.init_scope(fn)) so the graph can keep it as state",
        clean_path(path), node and node.line or "?"))
    end
    local meta = { shape = g.values[origin].shape, dtype = g.values[origin].dtype }
    local c = lifted[t]
    if not c then
      c = D.run_kernel(node.def, {}, node.attrs, { meta }, nil)[1]
      lifted[t] = c
      node.lifted = true
      self.names[c] = clean_path(path)
      g.values[origin].kind = "state"
      g.values[origin].name = self.names[c]
      g.state[#g.state + 1] = { name = self.names[c], tensor = c, value = origin }
      self.state_ix[c] = #g.state
      local now = rawget(t, "_vid")
      if now ~= origin then
        self.written_state[#g.state] = true
        self.written_order[#self.written_order + 1] = c
        self.bound[c] = now
      end
    end
    rawset(holder, key, c)
  end, nil, function(k) return self.names[k] or "tensor" end)
  if next(lifted) then
    local kept = {}
    for _, node in ipairs(g.nodes) do if not node.lifted then kept[#kept + 1] = node end end
    g.nodes = kept
  end
end

-- after the run: outputs, state writes, grad writes; tracing leaves no side effects behind
function Tracer:finish_root(results, nres)
  local g = self.graph
  for i = 1, nres do
    local r = results[i]
    if not is_tensor(r) then
      errors.raise(string.format("trace %s: output %d is a %s; a traced function returns tensors", g.name, i, type(r)))
    end
    g.outputs[i] = self:value_of(r)
  end
  -- grads assigned by backward (or cleared by zero_grad) on outside tensors
  local grads = {}
  for x, before in pairs(self.grad_before) do
    if rawget(x, "grad") ~= before[1] then grads[#grads + 1] = { x, before[1] } end
  end
  local function order(x) return self.state_ix[x] or math.huge, self.names[x] or "" end
  table.sort(grads, function(a, b)
    local ia, na = order(a[1])
    local ib, nb = order(b[1])
    if ia ~= ib then return ia < ib end
    return na < nb
  end)
  for _, e in ipairs(grads) do
    local x, before = e[1], e[2]
    local now = rawget(x, "grad")
    local w = { state = self:state_index(x), value = false }
    if now ~= nil then
      w.value = self:value_of(now)
      if before ~= nil and rawget(before, "_c") ~= nil then w.into_existing = true end
    end
    g.grad_writes[#g.grad_writes + 1] = w
    rawset(x, "grad", before)
  end
  -- inputs updated in place are written back into the caller's tensors
  for i, x in ipairs(self.input_objects) do
    local now = rawget(x, "_vid")
    if now ~= g.inputs[i] then g.input_writes[#g.input_writes + 1] = { input = i, value = now } end
  end
  self:lift_escaped()
  for _, x in ipairs(self.written_order) do
    local i = self.state_ix[x]
    g.state_writes[#g.state_writes + 1] = { state = i, value = self.bound[x] }
  end
end

-- restore grads when the trace failed
function Tracer:undo_grads()
  for x, before in pairs(self.grad_before) do rawset(x, "grad", before[1]) end
end

local function is_module(v)
  return type(v) == "table" and not is_tensor(v) and (v._is_module == true or type(v.forward) == "function")
end
M.is_module = is_module

-- input values for args: specs become abstract inputs, tensors are taken as specs of themselves,
-- other Lua values are passed through as constants
function M.bind_args(tr, specs, nargs, names)
  local g = tr.graph
  local args = {}
  for k = 1, nargs do
    local s = specs[k]
    local default_name = names and names[k] or ("arg" .. k)
    if is_tensor(s) then s = M.spec(s.shape, s.dtype, default_name) end
    if M.is_spec(s) then
      local name = s.name or default_name
      local shape = {}
      for i, d in ipairs(s.shape) do
        if type(d) == "string" then shape[i] = sym.named(d)
        elseif d == -1 then shape[i] = sym.named(name .. "#" .. i)
        else shape[i] = d end
      end
      local v = tr:new_value(shape, s.dtype, "input", name)
      Graph.add_input(g, v, name)
      g.args[k] = { input = #g.inputs }
      args[k] = tr:abstract(v, name)
      tr.input_objects[#g.inputs] = args[k]
    else
      g.args[k] = { value = s }
      args[k] = s
    end
  end
  return args
end

-- fn(...) with the nodes it records naming `label` as their source instead of the user's Lua line (an
-- imported model's nodes name the ONNX node they come from); outside a trace, just fn(...)
function M.with_source(label, fn, ...)
  local tr = state.trace
  if not tr then return fn(...) end
  local saved = tr.line
  tr.line = label
  local res = { pcall(fn, ...) }
  tr.line = saved
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- the parameter names of a Lua function (for naming inputs whose spec has no name)
function M.param_names(fn, skip_self)
  local names = {}
  if type(fn) ~= "function" then return names end
  for i = 1, 32 do
    local n = debug.getlocal(fn, i + (skip_self and 1 or 0))
    if not n or n:sub(1, 1) == "(" then break end
    names[i] = n
  end
  return names
end

-- source conversion (ds/convert, a layer above, registers itself): converter(fn, convert) -> the function to trace
local converter = function(fn) return fn end
function M.set_converter(f) converter = f end

local TRACE_OPTIONS = { name = "string", convert = "boolean" }

-- ds.trace(fn_or_module, specs, opts) -> ds.Graph; opts: {name = string, convert = false (no source conversion)}
function M.trace(target, specs, opts)
  if opts ~= nil and (type(opts) ~= "table" or Tensor.is_tensor(opts)) then
    errors.raise("trace: options must be a table, got " .. type(opts))
  end
  opts = opts or {}
  for k, v in pairs(opts) do
    if not TRACE_OPTIONS[k] then
      errors.raise(string.format("trace: unknown option '%s' (name, convert)", tostring(k)))
    end
    if type(v) ~= TRACE_OPTIONS[k] then
      errors.raise(string.format("trace: option '%s' must be a %s", k, TRACE_OPTIONS[k]))
    end
  end
  if specs ~= nil and type(specs) ~= "table" then
    errors.raise("trace: specs must be a list of specs or example tensors, got " .. type(specs))
  end
  specs = specs or {}
  if M.is_spec(specs) then specs = { specs } end
  local fn, name, module = target, opts.name, nil
  if is_module(target) then
    module = target
    local forward = converter(argcheck.original[module.forward] or module.forward, opts.convert)
    fn = function(...) return forward(module, ...) end
    name = name or rawget(getmetatable(module), "_name") or "module"
  elseif type(target) ~= "function" then
    errors.raise("trace: expects a function or a module, got " .. type(target))
  else
    name = name or fn_name(target)
    fn = converter(target, opts.convert)
  end
  local g = Graph.new(name)
  g.args = {}
  if module then g.training = module.training ~= false end
  local tr = new_tracer(g, nil, nil)
  tr.written_order = {}
  tr.input_objects = {}
  tr.roots = { { "", module or target } }
  -- names and grads of every tensor the function can reach, before it runs
  -- (parameters and buffers are named as their modules name them: "fc.weight", "net.0.bias")
  local named, by_module, covered = {}, {}, {}
  walk(tr.roots, function(t, path)
    if rawget(t, "_c") == nil then return end
    if tr.grad_before[t] == nil then tr.grad_before[t] = { rawget(t, "grad") } end
    if not named[t] then named[t] = clean_path(path) end
  end, function(v, path)
    if v._is_module == true and rawget(v, "_order") and not covered[v] then -- instances, not classes
      local prefix = clean_path(path)
      prefix = prefix == "" and "" or prefix .. "."
      for _, it in ipairs { v:named_parameters(), v:named_buffers() } do
        for n, p in it do if not by_module[p] then by_module[p] = prefix .. n end end
      end
      for _, sub in ipairs(v:modules()) do covered[sub] = true end
    end
  end)
  for t, n in pairs(by_module) do named[t] = n end
  tr.names = named
  local nargs = specs.n or table.maxn(specs)
  local args = M.bind_args(tr, specs, nargs,
    M.param_names(module and (argcheck.original[module.forward] or module.forward) or target, module ~= nil))
  local res = M.run_traced(tr, fn, args, nargs)
  if not res[1] then
    tr:undo_grads()
    error(res[2], 0)
  end
  local ok, err = pcall(tr.finish_root, tr, { unpack(res, 2, table.maxn(res)) }, table.maxn(res) - 1)
  if not ok then tr:undo_grads(); error(err, 0) end
  return g:finalize()
end

-- ds.init_scope(fn, ...): run fn eagerly even while tracing (tensors it makes are concrete: state, not nodes)
M.init_scope = argcheck.wrap("init_scope", { "function" }, function(fn, ...)
  local prev = state.trace
  state.trace = nil
  local res = { pcall(fn, ...) }
  state.trace = prev
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end)

-- a copy of opts without key k (options meant for the tracer, taken out of compile's)
function M.without(opts, k)
  local o = {}
  for key, v in pairs(opts) do if key ~= k then o[key] = v end end
  return o
end

function M.install(ds)
  ds.spec = M.spec
  ds.trace = M.trace
  ds.Graph = Graph
  ds.init_scope = M.init_scope
  ds.sym = sym
end

return M
