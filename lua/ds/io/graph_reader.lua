-- io/graph_reader.lua: the graph file's validator: a decoded graph document -> the graph IR (ds.Graph), every field
-- checked
-- (values defined once and before use; ops, input counts, attrs through the op table's schema, output
-- shapes and dtypes as the op's shape inference gives; state and constants against the params file).
-- Errors name the file and the node or field (L.fail).
local cjson = require("cjson.safe")
local D = require("ds.dispatch")
local S = require("ds.shape")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local Graph = require("ds.graph")
local random = require("ds.random")

local M = {}

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v >= 0 and v < 2 ^ 53 end

-- "10*batch-2" -> a symbolic dim (or number)
local function parse_dim(L, text, where)
  if type(text) == "number" then
    if not is_int(text) then L.fail(where .. ": dim " .. text .. " is not a non-negative integer") end
    return text
  end
  local ok, dim, err = pcall(sym.parse, text)
  if not ok or dim == nil then L.fail(where .. ": " .. tostring(ok and err or dim)) end
  return dim
end

local function parse_shape(L, shape, where)
  if type(shape) ~= "table" or #shape > 8 then L.fail(where .. ": shape must be a list of at most 8 dims") end
  for k in pairs(shape) do if not is_int(k) or k < 1 or k > #shape then L.fail(where .. ": shape is not a list") end end
  local out = {}
  for i, d in ipairs(shape) do out[i] = parse_dim(L, d, where) end
  return out
end

local function parse_dtype(L, dt, where)
  if type(dt) ~= "string" or not dtype.code[dt] then L.fail(where .. ": unknown dtype " .. tostring(dt)) end
  return dt
end

local load_subgraph
-- attr values from JSON: {"$float": "inf"}, {"$dim": "batch"}, {"$graph": ...}, lists and objects
local function attr_in(L, v, where)
  if type(v) == "table" then
    if v["$float"] ~= nil then
      local m = { inf = math.huge, ["-inf"] = -math.huge, nan = 0 / 0 }
      if m[v["$float"]] == nil then L.fail(where .. ": bad $float " .. tostring(v["$float"])) end
      return m[v["$float"]]
    end
    if v["$dim"] ~= nil then return parse_dim(L, v["$dim"], where) end
    if v["$graph"] ~= nil then return load_subgraph(L, v["$graph"], where .. " sub-graph") end
    local out = {}
    for k, x in pairs(v) do out[k] = attr_in(L, x, where) end
    return out
  end
  if v == cjson.null then L.fail(where .. ": null attribute") end
  return v
end

local function check_keys(L, obj, allowed, where)
  if type(obj) ~= "table" then L.fail(where .. " must be a JSON object") end
  for k in pairs(obj) do
    if not allowed[k] then L.fail(string.format("%s: unknown field '%s'", where, tostring(k))) end
  end
end

local function list(L, v, where)
  if v == nil then return {} end
  if type(v) ~= "table" then L.fail(where .. " must be a list") end
  for k in pairs(v) do if not is_int(k) or k < 1 or k > #v then L.fail(where .. " must be a list") end end
  return v
end

local function set(t) local s = {}; for _, k in ipairs(t) do s[k] = true end; return s end
local TOP = set { "format", "format_version", "ds_version", "name", "params", "inputs", "args", "state", "constants",
                  "nodes", "outputs", "state_writes", "input_writes", "grad_writes", "training", "train_sites", "plan" }

-- the document's top level: known fields, format and version; returns its params field
-- ({file: a name in the graph file's directory, bytes, crc32})
function M.check_document(L, doc, format, version)
  if type(doc) ~= "table" then L.fail("not valid JSON (not an object)") end
  check_keys(L, doc, TOP, "the graph file")
  if doc.format ~= format then L.fail("not a ds graph file (format is " .. tostring(doc.format) .. ")") end
  if doc.format_version ~= version then
    L.fail(string.format("format version %s is not supported (this ds reads version %d)",
      tostring(doc.format_version), version))
  end
  local p = doc.params
  check_keys(L, p, set { "file", "bytes", "crc32" }, "params")
  if type(p.file) ~= "string" or p.file:find("/", 1, true) or p.file:sub(1, 1) == "." or p.file == "" then
    L.fail("params.file must be a file name next to the graph file")
  end
  if not is_int(p.bytes) or type(p.crc32) ~= "string" then L.fail("params: bytes and crc32 missing") end
  return p
end

-- a loop from a file runs at most min(its max_trips attr, ds.load's max_loop_trips option) trips
local function loop_bound(L, given, where)
  if given ~= nil and not ((is_int(given) or given == math.huge) and given >= 1) then
    L.fail(where .. ": max_trips must be a positive integer")
  end
  return math.min(given or math.huge, L.max_loop_trips)
end

-- One node of a graph document: op known, inputs defined, attrs as the op's schema says, outputs as its
-- shape inference gives (control nodes: as many as their sub-graphs give; checked again when they run).
local function load_node(L, n, where, values, define, use)
  check_keys(L, n, set { "op", "inputs", "attrs", "outputs", "source" }, where)
  local def = type(n.op) == "string" and D.by_name[n.op] or nil
  if not def or def.internal then L.fail(string.format("%s: unknown op '%s'", where, tostring(n.op))) end
  where = string.format("%s (%s%s)", where, n.op, type(n.source) == "string" and (", " .. n.source) or "")
  if not (def.kernel or def.view or def.run) then L.fail(where .. ": op cannot run in a compiled graph") end
  local inputs = {}
  for k, id in ipairs(list(L, n.inputs, where .. " inputs")) do inputs[k] = use(id, where) end
  local ninputs = def.ninputs
  if not def.variadic and not def.run and ninputs and #inputs ~= ninputs then
    L.fail(string.format("%s: %d inputs, the op takes %d", where, #inputs, ninputs))
  end
  -- attrs and inputs checked as the op table says (D.validate: schema, dim ranges, def.check_attrs, shape
  -- inference); symbolic sizes ({"$dim": ...}) are accepted where ints are, as while tracing
  local given = attr_in(L, n.attrs or {}, where)
  if type(given) ~= "table" then L.fail(where .. ": attrs must be an object") end
  local fake = {}
  for k, id in ipairs(inputs) do fake[k] = { dtype = values[id].dtype, _shape = values[id].shape } end
  local ok, attrs, metas = pcall(D.validate, def, fake, given)
  if not ok then L.fail(where .. ": " .. tostring(attrs):gsub("^[^\n:]*:%d+: ", "")) end
  if def.attr_index.max_trips then attrs.max_trips = loop_bound(L, attrs.max_trips, where) end
  local outs = list(L, n.outputs, where .. " outputs")
  if def.run then
    local nres = attrs.nresults
    if def.name ~= "print" and (type(nres) ~= "number" or #outs ~= nres + #(attrs.written or {})) then
      L.fail(where .. ": output count does not match nresults and written")
    end
    for _, key in ipairs { "then_graph", "else_graph", "cond_graph", "body_graph" } do
      if def.attr_index[key] and not Graph.is_graph(attrs[key]) then
        L.fail(where .. ": " .. key .. " must be a graph")
      end
    end
  else
    -- outputs as the op's shape inference says, for these inputs and attrs
    local mut = def.mutates or {}
    if #outs ~= def.noutputs + #mut then
      L.fail(string.format("%s: %d outputs, the op gives %d", where, #outs, def.noutputs + #mut))
    end
    for k, j in ipairs(mut) do
      local src = values[inputs[j]]
      if not src then L.fail(where .. ": mutated input missing") end
      metas[def.noutputs + k] = { shape = src.shape, dtype = src.dtype }
    end
  end
  local node = { op = n.op, def = def, inputs = inputs, attrs = attrs, outputs = {},
                 line = type(n.source) == "string" and n.source or nil }
  for k, o in ipairs(outs) do
    local ow = where .. " output " .. k
    check_keys(L, o, set { "value", "dtype", "shape" }, ow)
    local shape, dt = parse_shape(L, o.shape, ow), parse_dtype(L, o.dtype, ow)
    local m = metas and metas[k]
    if metas and (type(m) ~= "table" or m.dtype ~= dt or type(m.shape) ~= "table" or not S.equal(m.shape, shape)) then
      L.fail(string.format("%s: is %s %s, the op gives %s %s", ow, dt, S.str(shape),
        type(m) == "table" and tostring(m.dtype) or "?", type(m) == "table" and type(m.shape) == "table" and
          S.str(m.shape) or "?"))
    end
    define(o.value, shape, dt, "node", ow)
    node.outputs[k] = o.value
  end
  if def.kernel then
    local fo = {}
    for k, id in ipairs(node.outputs) do fo[k] = { dtype = values[id].dtype, _shape = values[id].shape } end
    local kdt = def.kernel_dtype and def.kernel_dtype(fake, fo, attrs) or (fake[1] and fake[1].dtype) or fo[1].dtype
    if not def.dtypes[kdt] then L.fail(string.format("%s: no %s kernel", where, tostring(kdt))) end
  end
  return node
end

-- define(id, shape, dtype, kind, where) and use(id, where) for a graph document's value ids: each id a
-- positive integer, defined once and before its uses; make(id, shape, dtype, kind) records the value
local function value_ids(L, make)
  local defined = {}
  local function define(id, shape, dt, kind, where)
    if not is_int(id) or id < 1 or id > 2 ^ 31 then
      L.fail(where .. ": value id " .. tostring(id) .. " is not a positive integer")
    end
    if defined[id] then L.fail(string.format("%s: value %%%d is defined twice", where, id)) end
    defined[id] = true
    return make(id, shape, dt, kind)
  end
  local function use(id, where)
    if not is_int(id) or not defined[id] then
      L.fail(string.format("%s: value %s is used before it is defined", where, tostring(id)))
    end
    return id
  end
  return define, use
end

-- value ids of g as the file gives them: define(id, shape, dtype, kind, where) records one, use(id, where) checks one
local function graph_values(L, g)
  return value_ids(L, function(id, shape, dt, kind)
    g.values[id] = { id = id, shape = shape, dtype = dt, kind = kind }
    if id >= g.next_id then g.next_id = id + 1 end
    return g.values[id]
  end)
end

-- the graph's inputs from the document's list (where: "input" or "<sub-graph> input")
local function load_inputs(L, g, inputs, where, define)
  for i, inp in ipairs(inputs) do
    local w = where .. " " .. i
    check_keys(L, inp, set { "name", "value", "dtype", "shape" }, w)
    define(inp.value, parse_shape(L, inp.shape, w), parse_dtype(L, inp.dtype, w), "input", w)
    Graph.add_input(g, inp.value, type(inp.name) == "string" and inp.name or ("x" .. i))
  end
end

-- a sub-graph document -> a ds.Graph (values local to it; checked like the top level)
load_subgraph = function(L, doc, where)
  check_keys(L, doc, set { "name", "inputs", "constants", "nodes", "outputs" }, where)
  local g = Graph.new(type(doc.name) == "string" and doc.name or "subgraph")
  local define, use = graph_values(L, g)
  load_inputs(L, g, list(L, doc.inputs, where .. " inputs"), where .. " input", define)
  for i, c in ipairs(list(L, doc.constants, where .. " constants")) do
    local w = where .. " constant " .. i
    check_keys(L, c, set { "value", "number", "dtype" }, w)
    local dt = parse_dtype(L, c.dtype, w)
    if type(c.number) == "table" and c.number["$float"] ~= nil then c.number = attr_in(L, c.number, w) end -- -inf
    if type(c.number) ~= "number" and type(c.number) ~= "boolean" then L.fail(w .. ": number missing") end
    define(c.value, {}, dt, "const", w)
    g.consts[i] = { name = "c" .. c.value, value = c.value, number = c.number, tensor = D.scalar(c.number, dt) }
  end
  for i, n in ipairs(list(L, doc.nodes, where .. " nodes")) do
    g.nodes[i] = load_node(L, n, string.format("%s node %d", where, i), g.values, define, use)
  end
  for k, id in ipairs(list(L, doc.outputs, where .. " outputs")) do g.outputs[k] = use(id, where .. " output " .. k) end
  return g:finalize()
end

-- The graph document -> a ds.Graph (values defined once, before use; ops, attrs and shapes as the op table says).
-- params: { entries = name -> safetensors entry (dtype, shape), tensor = function(entry) -> tensor }: a
-- state or constant tensor is made when the graph names it, and the file may hold no other tensor.
function M.build(L, doc, params)
  local ir = Graph.new(type(doc.name) == "string" and doc.name or "graph")
  local define, use = graph_values(L, ir)
  local unused = {}
  for name in pairs(params.entries) do unused[name] = true end
  local function tensor_for(name, dt, shape, where)
    local e = type(name) == "string" and unused[name] and params.entries[name]
    if not e then L.fail(string.format("%s: tensor '%s' is missing from the params file", where, tostring(name))) end
    unused[name] = nil
    if e.dtype ~= dt or not S.equal(e.shape, shape) then
      L.fail(string.format("%s: params file has '%s' as %s %s, the graph says %s %s", where, name, e.dtype,
        S.str(e.shape), dt, S.str(shape)))
    end
    return params.tensor(e)
  end
  -- a state or constant entry: a concrete shape, its value defined, its tensor taken from the params file
  local function stored(e, i, kind, what)
    local where = what .. " " .. i
    check_keys(L, e, set { "name", "value", "dtype", "shape" }, where)
    local shape = parse_shape(L, e.shape, where)
    if sym.contains(shape) then L.fail(where .. ": " .. what .. " shapes are concrete") end
    local v = define(e.value, shape, parse_dtype(L, e.dtype, where), kind, where)
    return { name = e.name, tensor = tensor_for(e.name, v.dtype, shape, where), value = e.value }
  end
  load_inputs(L, ir, list(L, doc.inputs, "inputs"), "input", define)
  for i, s in ipairs(list(L, doc.state, "state")) do
    ir.state[i] = stored(s, i, "state", "state")
    -- the generator state binds to this process's generator, so ds.manual_seed drives loaded graphs as eager code
    if s.name == "rng_state" then ir.state[i].tensor = random.state() end
  end
  for i, c in ipairs(list(L, doc.constants, "constants")) do ir.consts[i] = stored(c, i, "const", "constant") end
  for name in pairs(unused) do L.fail("params file holds tensor '" .. name .. "' that the graph does not name") end
  for i, n in ipairs(list(L, doc.nodes, "nodes")) do
    ir.nodes[i] = load_node(L, n, string.format("node %d", i), ir.values, define, use)
  end
  for k, id in ipairs(list(L, doc.outputs, "outputs")) do ir.outputs[k] = use(id, "output " .. k) end
  for k, w in ipairs(list(L, doc.state_writes, "state_writes")) do
    check_keys(L, w, set { "state", "value" }, "state write " .. k)
    if not is_int(w.state) or not ir.state[w.state] then
      L.fail("state write " .. k .. ": no state " .. tostring(w.state))
    end
    local v, s = ir.values[use(w.value, "state write " .. k)], ir.values[ir.state[w.state].value]
    if v.dtype ~= s.dtype or not S.equal(v.shape, s.shape) then
      L.fail("state write " .. k .. ": value does not match the state's shape")
    end
    ir.state_writes[k] = { state = w.state, value = w.value }
  end
  for k, w in ipairs(list(L, doc.input_writes, "input_writes")) do
    local where = "input write " .. k
    check_keys(L, w, set { "input", "value" }, where)
    if not is_int(w.input) or not ir.inputs[w.input] then L.fail(where .. ": no input " .. tostring(w.input)) end
    local v, x = ir.values[use(w.value, where)], ir.values[ir.inputs[w.input]]
    if v.dtype ~= x.dtype or not S.equal(v.shape, x.shape) then
      L.fail(where .. ": value does not match the input's shape and dtype")
    end
    ir.input_writes[k] = { input = w.input, value = w.value }
  end
  for k, w in ipairs(list(L, doc.grad_writes, "grad_writes")) do
    check_keys(L, w, set { "state", "value", "into_existing" }, "grad write " .. k)
    if not is_int(w.state) or not ir.state[w.state] then
      L.fail("grad write " .. k .. ": no state " .. tostring(w.state))
    end
    ir.grad_writes[k] = { state = w.state, value = w.value and use(w.value, "grad write " .. k) or false,
                          into_existing = w.into_existing == true }
  end
  if doc.args ~= nil then
    ir.args = {}
    for k, a in ipairs(list(L, doc.args, "args")) do
      check_keys(L, a, set { "input", "value" }, "arg " .. k)
      if a.input ~= nil and not (is_int(a.input) and ir.inputs[a.input]) then
        L.fail("arg " .. k .. ": no input " .. tostring(a.input))
      end
      ir.args[k] = { input = a.input, value = a.value }
    end
  end
  if type(doc.training) == "boolean" then ir.training = doc.training end
  for k, site in ipairs(list(L, doc.train_sites, "train_sites")) do -- written for readers; recomputed on save
    if type(site) ~= "string" then L.fail("train_sites " .. k .. " must be a string") end
  end
  return Graph.link(ir)
end


return M
