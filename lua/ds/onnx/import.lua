-- onnx/import.lua: ds.onnx.load: an ONNX model file -> a ds.Graph (then ds.compile, ds.save, serving).
--[[ The ONNX graph is interpreted by a Lua function that ds.trace records: each node runs its handler from
  onnx/import_ops.lua on ds tensors (abstract while tracing), so the result is an ordinary traced graph whose
  initializers are its state. Small integer tensors (Constant nodes, Shape outputs, small initializers) are
  also kept as Lua values ("consts": dtype, shape, flat data whose entries may be symbolic dims), and every
  node whose inputs are all consts is folded in Lua: Shape -> Gather -> Concat -> Reshape chains become a
  reshape to symbolic dims, so the graph's dynamic dims (dim_params) stay dynamic. Unknown ops, attributes a
  handler does not implement and malformed files are errors naming the node; nothing is run until the
  whole file has been decoded and checked. ]]
local trace = require("ds.trace")
local files = require("ds.files")
local proto = require("ds.onnx.proto")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local C = require("ds.onnx.import_containers")
local handlers = require("ds.onnx.import_ops")
local ARITY = require("ds.onnx.arity")
local specialized = require("ds.onnx.specialized")

local M = {}
M.MAX_BYTES = 2 ^ 31 -- a model file larger than this is refused (protobuf's own limit is 2 GiB)
M.OPSETS = { min = 1, max = 21 } -- older opsets: handlers refuse what differs (attributes they do not know)

-- the ops of domain com.microsoft ds reads (ONNX Runtime's quantization tool writes them; handlers/quantize.lua),
-- with their input counts {fewest, most} from ONNX Runtime's contrib schemas (arity.lua has ONNX's own ops)
local MICROSOFT = { DynamicQuantizeMatMul = { 3, 5 }, MatMulIntegerToFloat = { 4, 7 } }
M.MICROSOFT = MICROSOFT

local function fail(path, msg) error("ds.onnx.load: " .. path .. ": " .. msg, 0) end

local run_graph -- below

-- an error message without the "file:line: " position Lua put in front of it
local function message(err) return (tostring(err):gsub("^[^\n:]*:%d+: ", "")) end

-- the spec of a graph input: dim_value -> number, dim_param -> named dynamic dim, unknown -> -1
local function spec_of(vi, path)
  local tt = vi.type and vi.type.tensor_type
  if not tt then fail(path, "input " .. tostring(vi.name) .. " is not a tensor") end
  local dt = types.DS[tt.elem_type or 0]
  if not dt then
    fail(path, "input " .. vi.name .. " has element type " .. (types.NAME[tt.elem_type or 0] or
      tostring(tt.elem_type)) ..
      ", which ds does not support")
  end
  if not tt.shape then fail(path, "input " .. vi.name .. " has no shape (rank unknown)") end
  local shape = {}
  for i, d in ipairs(tt.shape.dim or {}) do
    if d.dim_value and (d.dim_value < 0 or d.dim_value >= 2 ^ 50) then
      fail(path, string.format("input %s has the invalid dim %s", vi.name, tostring(d.dim_value)))
    end
    if d.dim_value then shape[i] = d.dim_value
    elseif d.dim_param and d.dim_param:match("^[%a_][%w_]*$") then shape[i] = d.dim_param
    else shape[i] = -1 end
  end
  return shape, dt
end

-- check the model before anything runs: opset, every op known, attributes of a known type, input counts.
-- Every node ds cannot read is listed in one error (op, name, reason), not just the first.
local function validate(model, path)
  if not model.graph then fail(path, "has no graph") end
  local opset
  for _, o in ipairs(model.opset_import or {}) do
    -- other domains (ai.onnx.ml, com.microsoft, ...) may be imported; a node that uses one is refused below
    if o.domain == nil or o.domain == "" or o.domain == "ai.onnx" then opset = o.version end
  end
  opset = opset or 1
  if opset < M.OPSETS.min or opset > M.OPSETS.max then
    fail(path, string.format("uses opset %d; ds reads opsets %d to %d", opset, M.OPSETS.min, M.OPSETS.max))
  end
  local problems = {}
  local function check_nodes(graph, prefix)
    -- every name is defined once in a graph: by an input, an initializer (which may give an input its default)
    -- or a node output (a second definition would silently win)
    local defined = {}
    local function define(name, by, input)
      if name == nil or name == "" then return end
      local before = defined[name]
      if before and not (input and before.initializer) and not (before.input and by == "an initializer") then
        problems[#problems + 1] = string.format("%s%s defines %s, which %s defines already", prefix, by, name, before.by)
      end
      defined[name] = { by = by, input = input, initializer = by == "an initializer" }
    end
    for _, init in ipairs(graph.initializer or {}) do define(init.name, "an initializer") end
    for _, vi in ipairs(graph.input or {}) do define(vi.name, "graph input " .. tostring(vi.name), true) end
    for i, node in ipairs(graph.node or {}) do
      local named = node.name and (" '" .. node.name .. "'") or ""
      local where = string.format("%snode %d (%s%s)", prefix, i, tostring(node.op_type), named)
      for _, nm in ipairs(node.output) do define(nm, where:sub(#prefix + 1)) end
      local ok, err = pcall(function()
        local microsoft = MICROSOFT[node.op_type or ""]
        if node.domain and node.domain ~= "" and node.domain ~= "ai.onnx" and
          not (node.domain == "com.microsoft" and microsoft) then
          error("it is in domain '" .. node.domain .. "', which ds does not implement", 0)
        end
        if microsoft and node.domain ~= "com.microsoft" then
          error("it is an op of domain com.microsoft; the node does not say so", 0)
        end
        if not handlers.OPS[node.op_type or ""] then
          error("the ONNX op " .. tostring(node.op_type) .. " is not supported by ds.onnx.load", 0)
        end
        handlers.check_attrs(node)
        local arity = ARITY.ops[node.op_type] or microsoft or { 0, math.huge }
        local inputs = node.input or {}
        if #inputs > arity[2] and opset <= ARITY.max_opset then
          error(string.format("it has %d inputs; the op takes at most %d", #inputs, arity[2]), 0)
        end
        for k = 1, arity[1] do
          if inputs[k] == nil or inputs[k] == "" then
            error(string.format("it has no input %d; the op needs at least %d", k, arity[1]), 0)
          end
        end
      end)
      if not ok then problems[#problems + 1] = where .. ": " .. message(err) end
      for _, a in ipairs(node.attribute or {}) do -- subgraphs (If's branches, Loop's body, ...)
        if a.g then check_nodes(a.g, where .. ", attribute " .. tostring(a.name) .. ": ") end
      end
    end
  end
  check_nodes(model.graph, "")
  if #problems == 1 then fail(path, problems[1]) end
  if #problems > 1 then
    fail(path, #problems .. " nodes cannot be read:\n  " .. table.concat(problems, "\n  "))
  end
  return opset
end

-- runs the nodes of GraphProto g on the values in env (name -> value; outer-scope values through its
-- __index) and returns g's output values in order. A handler reaches subgraphs (If's branches, Loop's body)
-- through its ctx: ctx.run_graph(sub, inputs) runs sub with its inputs bound to the list inputs, seeing the
-- values visible at the node. prefix names the enclosing node in errors.
run_graph = function(g, env, path, opset, prefix)
  for i, node in ipairs(g.node or {}) do
    local where = string.format("%snode %d (%s%s)", prefix, i, node.op_type, node.name and (" '" .. node.name .. "'")
      or "")
    local ins = {}
    for k, nm in ipairs(node.input or {}) do
      if nm ~= "" then
        ins[k] = env[nm]
        if ins[k] == nil then fail(path, where .. " reads " .. nm .. ", which no node or input defines") end
      end
    end
    local ctx = { opset = opset }
    function ctx.run_graph(sub, inputs)
      local inner = setmetatable({}, { __index = env })
      for _, init in ipairs(sub.initializer or {}) do
        inner[init.name] = V.tensor_of(init, "initializer " .. tostring(init.name))
      end
      for k, vi in ipairs(sub.input or {}) do inner[vi.name] = inputs[k] end
      return run_graph(sub, inner, path, opset, where .. ", subgraph " .. tostring(sub.name) .. ": ")
    end
    local label = string.format("onnx %s (%s)", node.name and node.name ~= "" and node.name or "#" .. i, node.op_type)
    local ok, outs = pcall(trace.with_source, label, handlers.run, node, ins, opset, ctx)
    if not ok then
      local msg = message(outs)
      if msg:sub(1, 14) == "ds.onnx.load: " then error(msg, 0) end -- a subgraph's own failure, already placed
      fail(path, where .. ": " .. msg)
    end
    for k, nm in ipairs(node.output or {}) do if nm ~= "" then env[nm] = outs[k] end end
  end
  local res = {}
  for k, vi in ipairs(g.output or {}) do
    local v = env[vi.name]
    if v == nil then fail(path, prefix .. "output " .. tostring(vi.name) .. " is not computed by the graph") end
    res[k] = v
  end
  return res
end

-- the model in path as a ds.Graph, or as a Specialized model when its graph depends on input values (M.load,
-- past its argument checks)
local function load(path)
  local bytes = files.read_string(path, M.MAX_BYTES, files.raiser("ds.onnx.load: "))
  local model = proto.decode("ModelProto", bytes, path)
  local opset = validate(model, path)
  local g = model.graph
  local values = {}
  for _, init in ipairs(g.initializer or {}) do
    local ok, c = pcall(V.tensor_of, init, "initializer " .. tostring(init.name))
    if not ok then fail(path, message(c)) end
    values[init.name] = c
  end
  -- kinds: the sequence and optional inputs' kinds (import_containers.lua), and those of the tensor inputs whose
  -- dims are named like dims of a sequence's elements: all traced with their arguments' shapes
  local inputs, input_specs, input_types, kinds, container_dims = {}, {}, {}, {}, {}
  for _, vi in ipairs(g.input or {}) do
    if not values[vi.name] then
      inputs[#inputs + 1] = vi.name
      if vi.type and (vi.type.sequence_type or vi.type.optional_type) then
        local ok, kind = pcall(C.kind_of, vi.type, "input " .. vi.name, container_dims)
        if not ok then fail(path, message(kind)) end
        kinds[vi.name] = kind
      else
        local shape, dt = spec_of(vi, path)
        input_specs[vi.name] = trace.spec(shape, dt, vi.name)
        input_types[vi.name] = vi.type.tensor_type.elem_type -- FLOAT16 read as f32, ... (types.lua): CastLike's type
      end
    end
  end
  for nm, spec in pairs(input_specs) do
    for _, d in ipairs(spec.shape) do
      if container_dims[d] then kinds[nm] = { dtype = spec.dtype, onnx_type = input_types[nm] } end
    end
  end
  if #(g.output or {}) == 0 then fail(path, "the graph has no outputs") end
  local name = g.name and g.name:gsub("[^%w_]", "_") or "onnx"

  -- the graph traced with the inputs in fixed (name -> importer value) bound to their values and the sequence
  -- and optional inputs in shaped (name -> argument: a Lua list of tensors, ...) traced with the structure of
  -- their arguments, each tensor they hold a graph input: graph and the layouts of its outputs
  -- (import_containers.lua), or nil, the error and the names of the inputs whose values a handler asked for
  local function trace_fixed(fixed, shaped)
    local specs, names = {}, {}
    for _, nm in ipairs(inputs) do
      if not fixed[nm] then
        names[#names + 1] = nm
        if kinds[nm] then
          local leaves = C.leaves(kinds[nm], shaped[nm])
          for k, t in ipairs(leaves) do
            specs[#specs + 1] = trace.spec(t.shape, t.dtype, #leaves == 1 and nm or nm .. "_" .. k)
          end
        else
          specs[#specs + 1] = input_specs[nm]
        end
      end
    end
    local input_of, wanted, layouts = setmetatable({}, { __mode = "k" }), {}, {}
    local function run(...)
      local args, pos = { ... }, 0
      local function next_input(nm, onnx_type)
        pos = pos + 1
        input_of[args[pos]] = nm
        return V.note_onnx_type(args[pos], onnx_type)
      end
      local env = setmetatable({}, { __index = values })
      for nm, c in pairs(fixed) do env[nm] = c end
      for _, nm in ipairs(names) do
        if kinds[nm] then
          env[nm] = C.value_of(kinds[nm], shaped[nm], function(_, kind) return next_input(nm, kind.onnx_type) end)
        else
          env[nm] = next_input(nm, input_types[nm])
        end
      end
      local res, outs = run_graph(g, env, path, opset, ""), {}
      for k, v in ipairs(res) do layouts[k] = C.flatten(v, outs) end
      return unpack(outs)
    end
    V.on_value_wanted = function(t) if input_of[t] then wanted[input_of[t]] = true end end
    local ok, graph = pcall(trace.trace, run, specs)
    V.on_value_wanted = nil
    if not ok then return nil, graph, wanted end
    graph.name = name
    return graph, layouts
  end

  if next(kinds) then return specialized.new(name, trace_fixed, inputs, kinds, {}) end
  local graph, layouts, wanted = trace_fixed({}, {})
  if graph then
    for _, layout in ipairs(layouts) do
      if layout ~= C.TENSOR then return specialized.new(name, trace_fixed, inputs, kinds, {}, { graph = graph,
        outputs = layouts }) end
    end
    return graph
  end
  if not message(layouts):find("must be a constant", 1, true) then error(layouts, 0) end
  return specialized.new(name, trace_fixed, inputs, kinds, wanted)
end

-- ds.onnx.load(path): the model as a ds.Graph whose inputs are the model's (names and dims kept), or as a
-- specialized model (specialized.lua) when its graph needs input values or it has sequence or optional inputs or
-- outputs (a sequence is a Lua list of tensors, an optional its value or nil). Every error names the file:
-- "ds.onnx.load: <path>: what is wrong".
function M.load(path, opts)
  if type(path) ~= "string" then error("ds.onnx.load: expects a file path", 2) end
  if opts ~= nil and type(opts) ~= "table" then error("ds.onnx.load: options must be a table", 2) end
  for k in pairs(opts or {}) do error("ds.onnx.load: unknown option " .. tostring(k), 2) end
  local ok, res = pcall(load, path)
  if ok then return res end
  local msg = message(res)
  if msg:sub(1, 14) == "ds.onnx.load: " and msg:find(path, 15, true) == 15 then error(msg, 0) end
  fail(path, msg)
end

return M
