-- onnx/export.lua: ds.onnx.export: a ds.Graph (or a compiled graph) -> an ONNX ModelProto file (opset 17).
--[[ Values keep their ds value ids as names ("v12"; inputs and state keep their own names); every node is
  written by its op's entry in onnx/export_ops.lua (ONNX nodes, decompositions), and an op without an entry
  there is an error naming it and its Lua line. State tensors and constants become initializers; named
  dynamic dims become dim_params on the inputs and outputs, and shapes that depend on them are computed in
  the ONNX graph from Shape(input) (Writer:dim). cond/while_loop become If/Loop with their sub-graphs
  written into the attributes (a sub-graph reads outer values by name, as ONNX allows). ]]
local Graph = require("ds.graph")
local compile = require("ds.compile")
local sym = require("ds.sym")
local types = require("ds.onnx.types")
local A = require("ds.onnx.attr")
local proto = require("ds.onnx.proto")
local ops = require("ds.onnx.export_ops")
local control_forms = require("ds.onnx.export_control") -- the forms of cond and while_loop
local files = require("ds.files")

local M = {}
M.OPSET = 17
M.IR_VERSION = 8 -- the IR version of ONNX 1.12, whose checker validates opset 17

-- FORMS[op](w, n): every op's ONNX form: export_ops.lua's and export_control.lua's
local FORMS = {}
for op, form in pairs(ops.FORMS) do FORMS[op] = form end
for op, form in pairs(control_forms) do FORMS[op] = form end
M.FORMS = FORMS

-- ---- the writer: one per model; scopes for sub-graphs ----
local Writer = {}
Writer.__index = Writer
M.Writer = Writer

function Writer.new(opts)
  local w = setmetatable({ opts = opts, initializers = {}, used = {}, counter = 0, consts = {} }, Writer)
  return w
end

-- a fresh, model-wide unique name
function Writer:fresh(prefix)
  self.counter = self.counter + 1
  local name = (prefix or "t") .. "_" .. self.counter
  while self.used[name] do self.counter = self.counter + 1; name = (prefix or "t") .. "_" .. self.counter end
  self.used[name] = true
  return name
end

-- claim `name` (a graph input or state name) or a unique variant of it
function Writer:claim(name)
  local n, k = name, 1
  while self.used[n] do k = k + 1; n = name .. "_" .. k end
  self.used[n] = true
  return n
end

-- the ONNX name of value v of the ds graph being written (a sub-graph reads outer values through its inputs)
function Writer:name(v)
  local n = self.names[v]
  if not n then error("ds.onnx.export: value %" .. tostring(v) .. " is read before it is written", 0) end
  return n
end

-- add a node; outs: a list of names or a count (fresh names); returns the output names
function Writer:node(op_type, inputs, attrs, outs, domain)
  if type(outs) ~= "table" then
    local n = outs or 1
    outs = {}
    for i = 1, n do outs[i] = self:fresh(op_type:lower()) end
  end
  local alist = {}
  if attrs then
    local keys = {}
    for k in pairs(attrs) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local a = attrs[k]
      a.name = k
      alist[#alist + 1] = a
    end
  end
  local nodes = self.scope.nodes
  nodes[#nodes + 1] = { op_type = op_type, input = inputs, output = outs, attribute = alist,
    name = self:fresh("n_" .. op_type), domain = domain }
  return outs
end

function Writer:one(op_type, inputs, attrs) return self:node(op_type, inputs, attrs, 1)[1] end

-- an initializer holding a Lua list (shape dims or {} for a scalar) of dtype dt; identical ones are shared
function Writer:const(list, dt, dims)
  dims = dims or { #list }
  local key = dt .. "|" .. table.concat(dims, ",") .. "|" .. table.concat(list, ",")
  if self.consts[key] then return self.consts[key] end
  local name = self:fresh("c")
  self.initializers[#self.initializers + 1] = { name = name, data_type = types.onnx_type(dt, "a constant"),
    dims = dims, raw_data = types.list_bytes(list, dt) }
  self.consts[key] = name
  return name
end
function Writer:scalar(v, dt) return self:const({ v }, dt, {}) end
function Writer:i64s(list) return self:const(list, "i64") end

-- the 1-element i64 tensor of the named dim nm: a dim of a graph input, or a floor symbol (sym.lua:
-- floor(expr / c), the output size of a strided conv or pool over a dynamic dim) computed from its definition
function Writer:named_dim(nm)
  local fl = sym.floor_of(nm)
  if fl then return self:root_node("Div", { self:dim(fl.expr), self:i64s({ fl.c }) }) end
  local src = self.root.dim_source[nm]
  if not src then error("ds.onnx.export: named dim " .. nm .. " is not a dim of any graph input", 0) end
  return self:root_node("Gather", { src.shape, self:i64s({ src.axis - 1 }) }, { axis = A.int(0) })
end

-- the 1-element i64 tensor holding dim d (a number or a symbolic dim over the named dims of the inputs)
function Writer:dim(d)
  if type(d) == "number" then return self:i64s({ d }) end
  local root = self.root
  if root.dim_cache[d] then return root.dim_cache[d] end
  local acc
  for mono, coef in pairs(d.terms) do
    local term
    if mono == "" then term = self:i64s({ coef }) end
    for nm in mono:gmatch("[^*]+") do
      local piece = self:named_dim(nm)
      term = term and self:root_node("Mul", { term, piece }) or piece
    end
    if mono ~= "" and coef ~= 1 then term = self:root_node("Mul", { term, self:i64s({ coef }) }) end
    acc = acc and self:root_node("Add", { acc, term }) or term
  end
  root.dim_cache[d] = acc
  return acc
end

-- a node in the top-level graph (dim computations are shared by all scopes)
function Writer:root_node(op_type, inputs, attrs)
  local saved = self.scope
  self.scope = self.root
  local out = self:one(op_type, inputs, attrs)
  self.scope = saved
  return out
end

-- the 1-D i64 tensor of a shape whose dims may be symbolic
function Writer:shape(shape)
  if not sym.contains(shape) then return self:i64s(shape) end
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = self:dim(d) end
  return self:root_node("Concat", parts, { axis = A.int(0) })
end

-- a scalar (0-d) i64 tensor holding d
function Writer:dim_scalar(d)
  if type(d) == "number" then return self:scalar(d, "i64") end
  return self:root_node("Squeeze", { self:dim(d), self:i64s({ 0 }) })
end

-- Cast x (dtype from) to dtype to unless they agree
function Writer:cast(x, from, to)
  if from == to then return x end
  return self:one("Cast", { x }, { to = A.int(types.onnx_type(to, "a cast")) })
end

-- ValueInfoProto of a ds value meta: named dims become dim_params
local function dim_proto(d)
  if type(d) == "number" then return { dim_value = d } end
  return { dim_param = sym.symbol_name(d) or tostring(d) }
end
function M.value_info(name, val, what, with_shape)
  local tt = { elem_type = types.onnx_type(val.dtype, what) }
  if with_shape ~= false then
    local dims = {}
    for i, d in ipairs(val.shape) do dims[i] = dim_proto(d) end
    tt.shape = { dim = dims }
  end
  return { name = name, type = { tensor_type = tt } }
end

-- write the nodes of ds graph g into the current node list; bind: ds value -> ONNX name for its inputs (and
-- state). Returns the names of all its values.
function Writer:write_graph(g, bind)
  local saved = self.names
  local names = {}
  for v, name in pairs(bind) do names[v] = name end
  self.names = names
  for _, c in ipairs(g.consts) do
    local name = self:fresh("k")
    local t = c.tensor
    self.initializers[#self.initializers + 1] = { name = name,
      data_type = types.onnx_type(g.values[c.value].dtype, "a constant"), dims = t.shape, raw_data = types.tensor_bytes(t) }
    names[c.value] = name
  end
  local used = {}
  for _, node in ipairs(g.nodes) do for _, v in ipairs(node.inputs) do used[v] = true end end
  for _, v in ipairs(g.outputs) do used[v] = true end
  local function meta(v) local val = g.values[v]; return { shape = val.shape, dtype = val.dtype } end
  for _, node in ipairs(g.nodes) do
    local n = { node = node, ins = {}, outs = {}, inm = {}, outm = {}, used = {} }
    for k, v in ipairs(node.inputs) do n.ins[k], n.inm[k] = self:name(v), meta(v) end
    for k, v in ipairs(node.outputs) do
      n.outs[k], n.outm[k], n.used[k] = self:claim("v" .. v), meta(v), used[v] == true
    end
    local control = control_forms[node.op]
    if control then control(self, n) else ops.write(self, node, n) end
    for k, v in ipairs(node.outputs) do names[v] = n.outs[k] end
  end
  self.names = saved
  return names
end

-- run fn() with a fresh node list (a sub-graph's); returns the nodes fn wrote
function Writer:subgraph_nodes(fn)
  local saved = self.scope
  self.scope = { nodes = {} }
  fn()
  local nodes = self.scope.nodes
  self.scope = saved
  return nodes
end

function Writer:value_info(name, val, what, with_shape) return M.value_info(name, val, what, with_shape) end

-- the graph a compiled object was made from
local function graph_of(x)
  if Graph.is_graph(x) then return x end
  if compile.is_compiled(x) then
    if x.opts.dtype ~= nil and x.opts.dtype ~= "f32" and x.opts.dtype ~= "float32" and x.opts.dtype ~= "float" then
      error("ds.onnx.export: this graph was compiled with dtype = '" .. tostring(x.opts.dtype) .. "', whose bf16 " ..
        "products have no ONNX form (docs/DTYPES.md); export the graph or its f32 compile", 0)
    end
    if x.graph then return x.graph end
    error("ds.onnx.export: this compiled graph was loaded from a file (ds.load) and has no ds.Graph; export the " ..
      "graph (or its ds.compile result) before ds.save", 0)
  end
  error("ds.onnx.export: expects a ds.Graph or a ds.compile result made from one (ds.trace / ds.compile with " ..
    "specs), got " ..
    (type(x) == "table" and "a table" or type(x)), 0)
end

local KNOWN_OPTS = { opset = true, dynamic = true, name = true, producer_version = true }

-- the ModelProto table of graph_or_compiled (see M.export)
function M.model(graph_or_compiled, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not KNOWN_OPTS[k] then
      error("ds.onnx.export: unknown option " .. tostring(k) .. " (opset, dynamic, name)", 0)
    end
  end
  if opts.opset ~= nil and opts.opset ~= M.OPSET then
    error("ds.onnx.export: opset " .. tostring(opts.opset) .. " is not supported (ds writes opset " ..
      M.OPSET .. ")", 0)
  end
  local g = graph_of(graph_or_compiled)
  if #g.state_writes > 0 or #g.input_writes > 0 or #g.grad_writes > 0 then
    error("ds.onnx.export: graph " .. g.name .. " updates state, inputs or gradients (a training step); only " ..
      "inference graphs export to ONNX", 0)
  end
  local w = Writer.new(opts)
  local root = { nodes = {}, dim_source = {}, dim_cache = {} }
  w.root, w.scope = root, root
  local graph = { name = opts.name or g.name, input = {}, output = {}, initializer = w.initializers }
  local bind = {}
  for i, id in ipairs(g.inputs) do
    local val, iname = g.values[id], g.specs[i].name
    local name = w:claim(iname)
    bind[id] = name
    for axis, d in ipairs(val.shape) do
      if type(d) ~= "number" then
        if opts.dynamic == false then
          error("ds.onnx.export: input " .. iname .. " has the dynamic dim " .. tostring(d) .. " and {dynamic = " ..
            "false} was asked; trace with fixed sizes, or export with dynamic = true", 0)
        end
        local nm = sym.symbol_name(d)
        if nm and not root.dim_source[nm] then root.dim_source[nm] = { input = name, axis = axis } end
      end
    end
    graph.input[#graph.input + 1] = M.value_info(name, val, "input " .. iname)
  end
  -- Shape(input) once per input that names a dim
  local shape_of = {}
  for _, src in pairs(root.dim_source) do
    shape_of[src.input] = shape_of[src.input] or w:one("Shape", { src.input })
    src.shape = shape_of[src.input]
  end
  for _, st in ipairs(g.state) do
    local name = w:claim(st.name)
    bind[st.value] = name
    local t = st.tensor
    w.initializers[#w.initializers + 1] = { name = name, data_type = types.onnx_type(t.dtype, "state " .. st.name),
      dims = t.shape, raw_data = types.tensor_bytes(t) }
  end
  w.names = w:write_graph(g, bind)
  for k, v in ipairs(g.outputs) do
    local name = w:claim(#g.outputs == 1 and "output" or ("output" .. k))
    w:node("Identity", { w:name(v) }, nil, { name })
    graph.output[k] = M.value_info(name, g.values[v], "output " .. k)
  end
  graph.node = root.nodes
  return {
    ir_version = M.IR_VERSION, producer_name = "ds", producer_version = opts.producer_version or "scm",
    opset_import = { { domain = "", version = M.OPSET } }, graph = graph,
  }
end

-- ds.onnx.export(graph_or_compiled, path, {opset = 17, dynamic = true, name =}): writes the model file
-- (crash-safe: a temporary file renamed into place); returns path
function M.export(graph_or_compiled, path, opts)
  if type(path) ~= "string" then error("ds.onnx.export: expects a file path as argument 2", 2) end
  local bytes = proto.encode("ModelProto", M.model(graph_or_compiled, opts))
  files.write_atomic(path, { bytes }, files.raiser("ds.onnx.export: "))
  return path
end

return M
