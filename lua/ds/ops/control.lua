-- ops/control.lua: op-table entries of the graph-level control nodes (cond, while_loop, print).
-- They have no kernel: the graph runner calls def.run(node, inputs, env, attrs); attrs hold sub-graphs.
-- Their Lua API (ds.cond, ds.while_loop, ds.print), their tracing and cond's backward live in ds/control.lua,
-- which this file sits above (control.lua reaches these definitions through the registry, D.by_name).
local D = require("ds.dispatch")
local S = require("ds.shape")
local state = require("ds.state")
local errors = require("ds.errors")
local tape = require("ds.tape")
local control = require("ds.control")
local first = #D.list + 1 -- this family's ops, returned at the end

-- the Lua truth of a one-element predicate tensor (bool, or nonzero)
local function truth(t, opname)
  if t:numel() ~= 1 then
    errors.raise(string.format("%s: predicate must have one element, got shape %s", opname,
      S.str(t._shape)))
  end
  local v = t:item()
  return v == true or (type(v) == "number" and v ~= 0)
end

local function copy(env)
  local e = {}
  for k, v in pairs(env) do e[k] = v end
  return e
end

-- record the same node again in the active trace (a graph holding it is being inlined); its tape node holds the
-- new node's attrs (a copy), so a backward of the copy changes the copy only
local function replay(node, ins)
  local tr = state.trace
  local outs = tr.record(node.def, ins, node.attrs, node.metas, nil)
  local a = node.attrs
  for j, k in ipairs(a.written or {}) do tr.rebind_outer(ins[a.first_capture + k - 1], outs[a.nresults + j]) end
  if state.grad_enabled and node.def.backward then
    tape.maybe_record(node.def, ins, tr.graph.nodes[#tr.graph.nodes].attrs, outs)
  end
  return outs
end

-- inputs: pred, operands..., captures...; outputs: results..., updated captures...
D.define {
  name = "cond", doc = "runs then_graph or else_graph by a 0-d predicate (ds.cond)", kind = "control", noutputs = 0,
  attrs = { { "then_graph", "any" }, { "else_graph", "any" }, { "nresults", "int" }, { "first_capture", "int" },
            { "written", "ints", {} } },
  run = function(node, ins, env, attrs)
    local g = truth(ins[1], "cond") and attrs.then_graph or attrs.else_graph
    return (g:run({ unpack(ins, 2) }, copy(env), true))
  end,
  replay = replay,
  backward = function(ctx, ...)
    return control.cond_backward(ctx, ...)
  end,
  sample = function() return control.sample("cond") end,
}

-- the trips a reverse loop reads (its forward loop saved them in this graph run); dropped once read
local function take_trips(key)
  local trips = control.saved_trips[key]
  if not trips then
    errors.raise(string.format("while_loop: the reverse loop reads the trips saved under key %d, but no loop saved "
      .. "them in this run (the graph's forward loop with saves = {..., %d} must run first)", key, key))
  end
  control.saved_trips[key] = nil
  return trips
end

-- inputs: loop vars..., captures...; outputs: final vars..., updated captures...
-- max_trips: more trips than this is an error (ds.load sets it on every loop it reads; nil: unbounded)
-- saves: keys under which each run keeps, per trip, the loop vars saved_vars (1-based) the trip starts from (set when
-- the loop is differentiated: the vars its reverse loops read)
-- reads: a reverse loop: one trip per trip saved under this key, last first; its body's inputs end with that trip's
-- saved loop vars reads_vars (loop vars..., captures..., saved...)
D.define {
  name = "while_loop", doc = "runs body_graph while cond_graph is true, carrying loop values (ds.while_loop)",
  kind = "control", noutputs = 0,
  attrs = { { "cond_graph", "any" }, { "body_graph", "any" }, { "nresults", "int" }, { "first_capture", "int" },
            { "written", "ints", {} }, { "max_trips", "float" }, { "saves", "ints", {} }, { "saved_vars", "ints", {} },
            { "reads", "int" }, { "reads_vars", "ints", {} } },
  run = function(node, ins, env, attrs)
    local n = attrs.nresults
    local vars, caps = { unpack(ins, 1, n) }, { unpack(ins, n + 1) }
    local saved = attrs.reads and take_trips(attrs.reads)
    local function args(trip)
      local a = {}
      for i = 1, n do a[i] = vars[i] end
      for k = 1, #caps do a[n + k] = caps[k] end
      for k, i in ipairs(trip and attrs.reads_vars or {}) do
        a[n + #caps + k] = trip[i] or errors.raise(string.format("while_loop: the reverse loop reads loop variable %d "
          .. "of the trips saved under key %d, which its forward loop did not save", i, attrs.reads))
      end
      return a
    end
    local saves, saved_vars = attrs.saves or {}, attrs.saved_vars or {}
    local saving = #saves > 0 and {} or nil
    local trips, max_trips = 0, attrs.max_trips or math.huge
    while (not saved or trips < #saved) and truth(attrs.cond_graph:run(args(), copy(env), true)[1], "while_loop") do
      trips = trips + 1
      if trips > max_trips then
        errors.raise(string.format("while_loop: more than %d trips (the loop's max_trips; ds.load(path, "
          .. "{max_loop_trips = n}) sets it for loaded graphs)", max_trips))
      end
      if saving then
        local trip = {}
        for _, i in ipairs(saved_vars) do trip[i] = vars[i] end
        saving[trips] = trip
      end
      local outs = attrs.body_graph:run(args(saved and saved[#saved - trips + 1]), copy(env), true)
      for i = 1, n do vars[i] = outs[i] end
      for j, k in ipairs(attrs.written) do caps[k] = outs[n + j] end
    end
    for _, key in ipairs(saves) do control.saved_trips[key] = saving end
    for j, k in ipairs(attrs.written) do vars[n + j] = caps[k] end
    return vars
  end,
  replay = replay,
  backward = function(ctx, ...)
    return control.while_backward(ctx, ...)
  end,
  sample = function() return control.sample("while_loop") end,
}

-- prints its tensors (and the literal text between them) every time the graph runs
D.define {
  name = "print", doc = "prints tensors and text each time a traced graph runs (ds.print)", kind = "control",
  noutputs = 0, side_effects = true,
  attrs = { { "parts", "any" } },
  -- parts: a list of strings and { tensor = k } (k: one of the node's inputs)
  check_attrs = function(attrs, ninputs)
    local parts = attrs.parts
    if type(parts) ~= "table" or #parts > 1000 then
      errors.raise("print: attr 'parts' must be a list of at most 1000 parts")
    end
    for k in pairs(parts) do
      if type(k) ~= "number" or k < 1 or k > #parts or k ~= math.floor(k) then
        errors.raise("print: attr 'parts' must be a list")
      end
    end
    for i, p in ipairs(parts) do
      local t = type(p) == "table" and p.tensor
      if not (type(p) == "string" or type(t) == "number" and t >= 1 and t <= ninputs and t == math.floor(t)
        and next(p, next(p)) == nil) then
        errors.raise(string.format("print: part %d must be a string or { tensor = k } with k in 1..%d", i, ninputs))
      end
    end
  end,
  run = function(node, ins, env, attrs)
    control.emit(attrs.parts, ins)
    return {}
  end,
  replay = replay,
  sample = function() return control.sample("print") end,
}

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
