-- io.lua: ds.save(compiled, "dir/name") -> name.json (the graph as data) + name.safetensors (state and
-- constants); ds.load("dir/name") -> a compiled callable, without the model's code. Loading validates
-- everything (format, ops, attrs, ids, shapes, checksum) and answers bad files with clear errors.
-- docs/FORMAT.md documents both files.
local ffi = require("ffi")
local cjson = require("cjson.safe")
local D = require("ds.dispatch")
local S = require("ds.shape")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local state = require("ds.state")
local Tensor = require("ds.tensor")
local IR = require("ds.passes.ir")

local M = { FORMAT = "ds-graph", FORMAT_VERSION = 1, MAX_JSON_BYTES = 256 * 2 ^ 20 }

-- ---- checksum: CRC-32 (zlib's) of the whole params file ----
local C = require("ds.ffi").C
local function crc32(ptr, n) return string.format("%08x", tonumber(C.ds_crc32(ptr, n))) end
M.crc32 = crc32

-- ---- JSON writer (exact doubles: %.17g; inf/nan as {"$float": "inf"}; sorted keys) ----
local function encode(v, out)
  local tv = type(v)
  if tv == "number" then
    if v ~= v then out[#out + 1] = '{"$float":"nan"}'
    elseif v == math.huge then out[#out + 1] = '{"$float":"inf"}'
    elseif v == -math.huge then out[#out + 1] = '{"$float":"-inf"}'
    elseif v == math.floor(v) and math.abs(v) < 2 ^ 53 then out[#out + 1] = string.format("%d", v)
    else out[#out + 1] = string.format("%.17g", v) end
  elseif tv == "string" then out[#out + 1] = cjson.encode(v)
  elseif tv == "boolean" then out[#out + 1] = tostring(v)
  elseif sym.is(v) then out[#out + 1] = '{"$dim":' .. cjson.encode(tostring(v)) .. "}"
  elseif require("ds.graph").is_graph(v) then
    out[#out + 1] = '{"$graph":'
    encode(M.subgraph_doc(v), out)
    out[#out + 1] = "}"
  elseif tv == "table" and getmetatable(v) == nil then
    if next(v) == nil or v[1] ~= nil then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then errors.raise("save: cannot write a table mixing list and named entries") end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = cjson.encode(k) .. ":"
        encode(v[k], out)
      end
      out[#out + 1] = "}"
    end
  else
    errors.raise("save: cannot write a " .. (Tensor.is_tensor(v) and "tensor" or tv) .. " attribute into the graph file")
  end
end

local function json_text(v)
  local out = {}
  encode(v, out)
  return table.concat(out)
end

-- the graph document: one top-level field per line, one node per line (readable, diffable)
local function doc_text(doc)
  local keys = {}
  for k in pairs(doc) do keys[#keys + 1] = k end
  table.sort(keys)
  local lines = {}
  for i, k in ipairs(keys) do
    local v = doc[k]
    local text
    if k == "nodes" and #v > 0 then
      local items = {}
      for j, n in ipairs(v) do items[j] = "  " .. json_text(n) end
      text = "[\n" .. table.concat(items, ",\n") .. "\n ]"
    else
      text = json_text(v)
    end
    lines[i] = " " .. cjson.encode(k) .. ": " .. text
  end
  return "{\n" .. table.concat(lines, ",\n") .. "\n}\n"
end

-- dims: numbers, or symbolic dims as their expression text ("batch", "10*batch", "n-2")
local function dims_out(shape)
  local s = {}
  for i, d in ipairs(shape) do s[i] = type(d) == "number" and d or tostring(d) end
  return s
end

local function atomic_write(path, text)
  local dir = path:match("^(.*)/[^/]*$") or "."
  local tmp = string.format("%s/.%s.%d.%s.tmp", dir, path:match("([^/]*)$"), os.time(), tostring({}):match("0x(%x+)") or "0")
  local f, err = io.open(tmp, "wb")
  if not f then errors.raise("save: cannot write " .. path .. ": " .. tostring(err)) end
  local ok, werr = f:write(text)
  local closed, cerr = f:close()
  if not ok or not closed then os.remove(tmp); errors.raise("save: write of " .. path .. " failed: " .. tostring(werr or cerr)) end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then os.remove(tmp); errors.raise("save: cannot rename into " .. path .. ": " .. tostring(rerr)) end
end

local function read_file(path, what, limit)
  local f, err = io.open(path, "rb")
  if not f then errors.raise(string.format("load: cannot open %s %s: %s", what, path, tostring(err))) end
  local size = f:seek("end")
  if limit and size > limit then f:close(); errors.raise(string.format("load: %s %s is %d bytes (limit %d)", what, path, size, limit)) end
  f:seek("set", 0)
  local s = f:read("*a") or ""
  f:close()
  return s
end

-- ---- name.plan: the lowered plan of one shape binding, for src/model.c (C only, no JSON) ----
pcall(ffi.cdef, [[
typedef struct { char magic[8]; uint32_t version, nbuffers, nsteps, ninputs, noutputs, params_crc32;
                 int64_t arena_bytes, params_bytes; } ds_planfile_header;
typedef struct { int32_t kind, base, dtype, ndim, role, index, has_strides, pad;
                 int64_t offset, data_offset, data_bytes; int64_t shape[8], strides[8]; } ds_planfile_buffer;
typedef struct { char kernel[64]; int32_t nbuf, nattrs; } ds_planfile_step;
]])
local ROLE = { arena = 0, input = 1, output = 2, state = 3, const = 4, view = 5 }
M.PLAN_MAGIC = "DSPLAN01"

-- the safetensors data offsets (absolute in the file) of each tensor name
local function params_offsets(bytes)
  local n = 0
  for i = 8, 1, -1 do n = n * 256 + bytes:byte(i) end
  local header = cjson.decode(bytes:sub(9, 8 + n))
  local out = {}
  for name, e in pairs(header) do
    if name ~= "__metadata__" then out[name] = { 8 + n + e.data_offsets[1], e.data_offsets[2] - e.data_offsets[1] } end
  end
  return out
end

-- one plan as a record of the plan file
local function plan_record(p, ir, names, offsets, params_size, params_crc)
  local log = p.log
  local parts = {}
  local h = ffi.new("ds_planfile_header")
  ffi.copy(h.magic, M.PLAN_MAGIC, 8)
  h.version = 1; h.nbuffers = #log.buffers; h.nsteps = #log.steps
  h.ninputs = #ir.inputs; h.noutputs = #ir.outputs
  h.arena_bytes = log.arena_bytes; h.params_bytes = params_size; h.params_crc32 = tonumber(params_crc, 16)
  parts[1] = ffi.string(h, ffi.sizeof(h))
  for _, b in ipairs(log.buffers) do
    local r = ffi.new("ds_planfile_buffer")
    r.kind = b.kind; r.base = b.base; r.dtype = dtype.code[b.dtype]; r.ndim = #b.shape
    r.role = ROLE[b.role] or errors.raise("save: plan buffer role " .. b.role)
    r.index = b.index or 0; r.offset = b.offset
    for i, d in ipairs(b.shape) do r.shape[i - 1] = d end
    if b.strides then r.has_strides = 1; for i, d in ipairs(b.strides) do r.strides[i - 1] = d end end
    if b.role == "state" or b.role == "const" then
      local o = offsets[names[b.role][b.index]]
      r.data_offset, r.data_bytes = o[1], o[2]
    end
    parts[#parts + 1] = ffi.string(r, ffi.sizeof(r))
  end
  for _, st in ipairs(log.steps) do
    local r = ffi.new("ds_planfile_step")
    ffi.copy(r.kernel, st.kernel, math.min(#st.kernel, 63))
    r.nbuf = #st.buffers; r.nattrs = #st.attrs
    parts[#parts + 1] = ffi.string(r, ffi.sizeof(r))
    parts[#parts + 1] = ffi.string(ffi.new("int32_t[?]", #st.buffers, st.buffers), 4 * #st.buffers)
    if #st.attrs > 0 then parts[#parts + 1] = ffi.string(ffi.new("double[?]", #st.attrs, st.attrs), 8 * #st.attrs) end
  end
  return table.concat(parts)
end

-- The plan file: one record per shape binding planned so far (the only one for concrete specs), so a C
-- program can run every input shape the model was called with. Returns bytes and the bindings, or nil.
local function plan_bytes(compiled, ir, names, offsets, params_size, params_crc)
  local keys = {}
  for k in pairs(compiled._plans) do keys[#keys + 1] = k end
  if #keys == 0 then
    if sym.contains(ir.specs) then return nil end
    compiled:plan_for({})
    keys[1] = next(compiled._plans)
  end
  table.sort(keys)
  local records, bindings = {}, {}
  for i, k in ipairs(keys) do
    local p = compiled._plans[k]
    for _, seg in ipairs(p.segments) do if seg.lua then return nil end end
    if #p.L.grads > 0 then return nil end
    records[i] = plan_record(p, ir, names, offsets, params_size, params_crc)
    local env = {}
    for name, v in pairs(p.env) do env[name] = v end
    bindings[i] = env
  end
  return table.concat(records), bindings
end

-- a node as the graph file holds it (values: the id -> {shape, dtype} table of its graph)
local function node_doc(node, values, source)
  local outs = {}
  for k, id in ipairs(node.outputs) do
    local v = values[id]
    outs[k] = { value = id, dtype = v.dtype, shape = dims_out(v.shape) }
  end
  local attrs = {}
  for k, a in pairs(node.attrs) do attrs[k] = a end
  return { op = node.op, inputs = node.inputs, attrs = attrs, outputs = outs, source = source }
end

-- a sub-graph (cond branch, loop body; graph.lua's layout): inputs, 0-d constants inline, nodes, outputs
function M.subgraph_doc(g)
  local doc = { name = g.name, inputs = {}, constants = {}, nodes = {}, outputs = g.outputs }
  if #g.state > 0 or #g.state_writes > 0 then errors.raise("save: sub-graph " .. g.name .. " has state") end
  for i, inp in ipairs(g.inputs) do
    local v = g.values[inp.value]
    doc.inputs[i] = { name = inp.name, value = inp.value, dtype = v.dtype, shape = dims_out(v.shape) }
  end
  for i, c in ipairs(g.constants) do
    if type(c.number) ~= "number" and type(c.number) ~= "boolean" then errors.raise("save: sub-graph constant is not a number") end
    doc.constants[i] = { value = c.value, number = c.number, dtype = c.dtype }
  end
  for i, node in ipairs(g.nodes) do doc.nodes[i] = node_doc(node, g.values, node.source) end
  return doc
end

-- ---- save ----
function M.save(compiled, path)
  local compile = require("ds.compile")
  if type(path) ~= "string" or path == "" then errors.raise("save: path must be a non-empty string like \"dir/name\"") end
  if require("ds.graph").is_graph(compiled) then compiled = compile.compile_graph(compiled) end
  local Lazy = require("ds").Lazy
  if Lazy and getmetatable(compiled) == Lazy then
    -- ds.compile(fn) without specs: one traced signature can be saved
    local entries = {}
    if compiled.fixed then entries[1] = compiled.fixed end
    for _, e in pairs(compiled.cache) do entries[#entries + 1] = e end
    if #entries ~= 1 then
      errors.raise(string.format("save: %s was traced %d times (one graph per signature); save one with "
        .. "ds.compile(fn, specs)", tostring(compiled), #entries))
    end
    compiled = entries[1].run
  end
  if not compile.is_compiled(compiled) then errors.raise("save: expects a compiled graph (ds.compile) or a ds.Graph") end
  local ir = compiled.base
  local base = path:gsub("%.json$", "")
  local tensors = {}
  local doc = {
    format = M.FORMAT, format_version = M.FORMAT_VERSION, ds_version = require("ds").version,
    name = ir.name or "graph", inputs = {}, state = {}, constants = {}, nodes = {}, outputs = {},
    state_writes = {}, grad_writes = {},
  }
  for i, id in ipairs(ir.inputs) do
    local v, spec = ir.values[id], ir.specs[i]
    doc.inputs[i] = { name = spec.name or ("x" .. i), value = id, dtype = v.dtype, shape = dims_out(v.shape) }
  end
  if ir.args then
    local args, ok = {}, true
    for k, a in ipairs(ir.args) do
      if a.input then args[k] = { input = a.input }
      elseif type(a.value) == "number" or type(a.value) == "string" or type(a.value) == "boolean" then args[k] = { value = a.value }
      else ok = false end
    end
    if ok and #args > 0 then doc.args = args end
  end
  for i, s in ipairs(ir.state) do
    local v = ir.values[s.value]
    if tensors[s.name] then errors.raise("save: two state tensors are named " .. s.name) end
    tensors[s.name] = s.tensor
    doc.state[i] = { name = s.name, value = s.value, dtype = v.dtype, shape = dims_out(v.shape) }
  end
  for i, c in ipairs(ir.consts) do
    local name = "const." .. c.value
    if tensors[name] then errors.raise("save: a state tensor is named " .. name .. ", which names a constant") end
    tensors[name] = c.tensor
    local v = ir.values[c.value]
    doc.constants[i] = { name = name, value = c.value, dtype = v.dtype, shape = dims_out(v.shape) }
  end
  for i, node in ipairs(ir.nodes) do doc.nodes[i] = node_doc(node, ir.values, node.line) end
  doc.outputs = ir.outputs
  for i, w in ipairs(ir.state_writes) do doc.state_writes[i] = { state = w.state, value = w.value } end
  for i, w in ipairs(ir.grad_writes or {}) do
    doc.grad_writes[i] = { state = w.state, value = w.value or false, into_existing = w.into_existing or false }
  end
  if ir.training ~= nil then doc.training = ir.training end
  -- params first (the graph file names its checksum), each through a temporary file + rename
  local params = base .. ".safetensors"
  require("ds.state_file").write(params, tensors, { format = M.FORMAT, graph = (base:match("([^/]*)$")) })
  local bytes = read_file(params, "params file")
  doc.params = { file = params:match("([^/]*)$"), bytes = #bytes, crc32 = crc32(bytes, #bytes) }
  local names = { state = {}, const = {} }
  for i, st in ipairs(ir.state) do names.state[i] = st.name end
  for i, c in ipairs(ir.consts) do names.const[i] = "const." .. c.value end
  -- the plan is lowered from the fused IR, whose states/constants are the same as the saved IR's
  local plan, bindings = plan_bytes(compiled, compiled.ir, names, params_offsets(bytes), #bytes, doc.params.crc32)
  if plan then
    atomic_write(base .. ".plan", plan)
    doc.plan = { file = (base .. ".plan"):match("([^/]*)$"), bytes = #plan, bindings = bindings }
  end
  atomic_write(base .. ".json", doc_text(doc))
  return base
end

-- ---- load: every field checked; errors name the file and the node ----
local map_params
local function loader(path)
  local L = { path = path }
  function L.fail(msg) errors.raise(string.format("load %s: %s", path, msg)) end
  return L
end

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v >= 0 and v < 2 ^ 53 end

-- "10*batch-2" -> a symbolic dim (or number)
local function parse_dim(L, text, where)
  if type(text) == "number" then
    if not is_int(text) then L.fail(where .. ": dim " .. text .. " is not a non-negative integer") end
    return text
  end
  if type(text) ~= "string" or #text == 0 or #text > 200 or not text:match("^[%w_#*+%-]+$") then
    L.fail(where .. ": bad dim " .. tostring(text))
  end
  local total = 0
  local s = text:sub(1, 1) == "-" and text or ("+" .. text)
  local pos = 1
  while pos <= #s do
    local sign, term, nxt = s:match("^([+-])([^+-]+)()", pos)
    if not sign then L.fail(where .. ": bad dim expression " .. text) end
    local t = sign == "-" and -1 or 1
    for f in term:gmatch("[^*]+") do
      if f:match("^%d+$") then t = sym.mul(t, tonumber(f))
      elseif f:match("^[%a_][%w_#]*$") then t = sym.mul(t, sym.named(f))
      else L.fail(where .. ": bad factor '" .. f .. "' in dim " .. text) end
    end
    if term:sub(-1) == "*" or term:sub(1, 1) == "*" or term:find("**", 1, true) then L.fail(where .. ": bad dim expression " .. text) end
    total = sym.add(total, t)
    pos = nxt
  end
  return total
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
                  "nodes", "outputs", "state_writes", "grad_writes", "training", "plan" }

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
  -- attrs: names and types from the op table's schema
  local given = attr_in(L, n.attrs or {}, where)
  if type(given) ~= "table" then L.fail(where .. ": attrs must be an object") end
  -- symbolic sizes ({"$dim": ...}) are accepted where ints are, as while tracing
  local prev = state.trace
  state.trace = state.trace or {}
  local ok, attrs = pcall(D.attrs, def, given)
  state.trace = prev
  if not ok then L.fail(where .. ": " .. tostring(attrs)) end
  local fake = {}
  for k, id in ipairs(inputs) do fake[k] = { dtype = values[id].dtype, _shape = values[id].shape } end
  local outs = list(L, n.outputs, where .. " outputs")
  local metas
  if def.run then
    local nres = attrs.nresults
    if def.name ~= "print" and (type(nres) ~= "number" or #outs ~= nres + #(attrs.written or {})) then
      L.fail(where .. ": output count does not match nresults and written")
    end
    for _, key in ipairs { "then_graph", "else_graph", "cond_graph", "body_graph" } do
      if def.attr_index[key] and not require("ds.graph").is_graph(attrs[key]) then L.fail(where .. ": " .. key .. " must be a graph") end
    end
  else
    -- outputs as the op's shape inference says, for these inputs and attrs
    local ok2
    ok2, metas = pcall(def.infer, fake, attrs, def)
    if not ok2 or type(metas) ~= "table" then L.fail(where .. ": inputs and attrs do not fit the op: " .. tostring(metas)) end
    if metas.shape then metas = { metas } end
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
                 source = type(n.source) == "string" and n.source or nil }
  for k, o in ipairs(outs) do
    local ow = where .. " output " .. k
    check_keys(L, o, set { "value", "dtype", "shape" }, ow)
    local shape, dt = parse_shape(L, o.shape, ow), parse_dtype(L, o.dtype, ow)
    local m = metas and metas[k]
    if metas and (type(m) ~= "table" or m.dtype ~= dt or type(m.shape) ~= "table" or not S.equal(m.shape, shape)) then
      L.fail(string.format("%s: is %s %s, the op gives %s %s", ow, dt, S.str(shape),
        type(m) == "table" and tostring(m.dtype) or "?", type(m) == "table" and type(m.shape) == "table" and S.str(m.shape) or "?"))
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
    if not is_int(id) or id < 1 or id > 2 ^ 31 then L.fail(where .. ": value id " .. tostring(id) .. " is not a positive integer") end
    if defined[id] then L.fail(string.format("%s: value %%%d is defined twice", where, id)) end
    defined[id] = true
    return make(id, shape, dt, kind)
  end
  local function use(id, where)
    if not is_int(id) or not defined[id] then L.fail(string.format("%s: value %s is used before it is defined", where, tostring(id))) end
    return id
  end
  return define, use
end

-- a sub-graph document -> a ds.Graph (values local to it; checked like the top level)
load_subgraph = function(L, doc, where)
  local Graph = require("ds.graph")
  check_keys(L, doc, set { "name", "inputs", "constants", "nodes", "outputs" }, where)
  local g = Graph.new(type(doc.name) == "string" and doc.name or "subgraph")
  local define, use = value_ids(L, function(id, shape, dt, kind)
    g.values[id] = { shape = shape, dtype = dt, kind = kind }
    return g.values[id]
  end)
  for i, inp in ipairs(list(L, doc.inputs, where .. " inputs")) do
    local w = where .. " input " .. i
    check_keys(L, inp, set { "name", "value", "dtype", "shape" }, w)
    define(inp.value, parse_shape(L, inp.shape, w), parse_dtype(L, inp.dtype, w), "input", w)
    g.inputs[i] = { name = type(inp.name) == "string" and inp.name or ("x" .. i), value = inp.value }
  end
  for i, c in ipairs(list(L, doc.constants, where .. " constants")) do
    local w = where .. " constant " .. i
    check_keys(L, c, set { "value", "number", "dtype" }, w)
    local dt = parse_dtype(L, c.dtype, w)
    if type(c.number) ~= "number" and type(c.number) ~= "boolean" then L.fail(w .. ": number missing") end
    define(c.value, {}, dt, "const", w)
    g.constants[i] = { value = c.value, number = c.number, dtype = dt, tensor = D.scalar(c.number, dt) }
  end
  for i, n in ipairs(list(L, doc.nodes, where .. " nodes")) do
    g.nodes[i] = load_node(L, n, string.format("%s node %d", where, i), g.values, define, use)
  end
  for k, id in ipairs(list(L, doc.outputs, where .. " outputs")) do g.outputs[k] = use(id, where .. " output " .. k) end
  return g:finalize()
end

-- the graph document + tensors -> IR (values defined once, before use; ops, attrs and shapes as the op table says)
local function build_ir(L, doc, tensors)
  local ir = IR.new()
  ir.name = type(doc.name) == "string" and doc.name or "graph"
  local define, use = value_ids(L, function(id, shape, dt, kind)
    ir.values[id] = { id = id, shape = shape, dtype = dt, kind = kind }
    if id >= ir.next_id then ir.next_id = id + 1 end
    return ir.values[id]
  end)
  local function tensor_for(name, dt, shape, where)
    local t = tensors[name]
    if not t then L.fail(string.format("%s: tensor '%s' is missing from the params file", where, tostring(name))) end
    tensors[name] = nil
    if t.dtype ~= dt or not S.equal(t._shape, shape) then
      L.fail(string.format("%s: params file has '%s' as %s %s, the graph says %s %s", where, name, t.dtype,
        S.str(t._shape), dt, S.str(shape)))
    end
    return t
  end
  -- a state or constant entry: a concrete shape, its value defined, its tensor taken from the params file
  local function stored(e, i, kind, what)
    local where = what .. " " .. i
    check_keys(L, e, set { "name", "value", "dtype", "shape" }, where)
    local shape = parse_shape(L, e.shape, where)
    if sym.contains(shape) then L.fail(where .. ": " .. what .. " shapes are concrete") end
    local v = define(e.value, shape, parse_dtype(L, e.dtype, where), kind, where)
    v.index = i
    return { name = e.name, tensor = tensor_for(e.name, v.dtype, shape, where), value = e.value }
  end
  for i, inp in ipairs(list(L, doc.inputs, "inputs")) do
    local where = "input " .. i
    check_keys(L, inp, set { "name", "value", "dtype", "shape" }, where)
    local v = define(inp.value, parse_shape(L, inp.shape, where), parse_dtype(L, inp.dtype, where), "input", where)
    v.index = i
    ir.inputs[i] = inp.value
    ir.specs[i] = { name = type(inp.name) == "string" and inp.name or ("x" .. i), shape = v.shape, dtype = v.dtype }
  end
  for i, s in ipairs(list(L, doc.state, "state")) do
    ir.state[i] = stored(s, i, "state", "state")
    -- the generator state binds to this process's generator, so ds.manual_seed drives loaded graphs as eager code
    if s.name == "rng_state" then ir.state[i].tensor = require("ds.random").state() end
  end
  for i, c in ipairs(list(L, doc.constants, "constants")) do ir.consts[i] = stored(c, i, "const", "constant") end
  for name in pairs(tensors) do L.fail("params file holds tensor '" .. name .. "' that the graph does not name") end
  for i, n in ipairs(list(L, doc.nodes, "nodes")) do
    local node = load_node(L, n, string.format("node %d", i), ir.values, define, use)
    node.line = node.source
    for k, id in ipairs(node.outputs) do ir.values[id].node = node; ir.values[id].index = k end
    ir.nodes[i] = node
  end
  for k, id in ipairs(list(L, doc.outputs, "outputs")) do ir.outputs[k] = use(id, "output " .. k) end
  for k, w in ipairs(list(L, doc.state_writes, "state_writes")) do
    check_keys(L, w, set { "state", "value" }, "state write " .. k)
    if not is_int(w.state) or not ir.state[w.state] then L.fail("state write " .. k .. ": no state " .. tostring(w.state)) end
    local v, s = ir.values[use(w.value, "state write " .. k)], ir.values[ir.state[w.state].value]
    if v.dtype ~= s.dtype or not S.equal(v.shape, s.shape) then L.fail("state write " .. k .. ": value does not match the state's shape") end
    ir.state_writes[k] = { state = w.state, value = w.value }
  end
  ir.grad_writes = {}
  for k, w in ipairs(list(L, doc.grad_writes, "grad_writes")) do
    check_keys(L, w, set { "state", "value", "into_existing" }, "grad write " .. k)
    if not is_int(w.state) or not ir.state[w.state] then L.fail("grad write " .. k .. ": no state " .. tostring(w.state)) end
    ir.grad_writes[k] = { state = w.state, value = w.value and use(w.value, "grad write " .. k) or false,
                          into_existing = w.into_existing == true }
  end
  if doc.args ~= nil then
    ir.args = {}
    for k, a in ipairs(list(L, doc.args, "args")) do
      check_keys(L, a, set { "input", "value" }, "arg " .. k)
      if a.input ~= nil and not (is_int(a.input) and ir.inputs[a.input]) then L.fail("arg " .. k .. ": no input " .. tostring(a.input)) end
      ir.args[k] = { input = a.input, value = a.value }
    end
  end
  if type(doc.training) == "boolean" then ir.training = doc.training end
  return ir
end

-- The params file, mapped copy-on-write (worker processes share its pages): size, checksum, then the
-- safetensors header; tensors are views of the mapping (copied when misaligned for their dtype).
local from_st = require("ds.state_file").dtype_from_safetensors
local size_box = ffi.new("int64_t[1]")
map_params = function(L, path, p)
  local base = C.ds_file_map(path, size_box)
  if base == nil then L.fail("params file: " .. require("ds.ffi").last_error()) end
  local size = tonumber(size_box[0])
  local map = ffi.gc(ffi.cast("uint8_t *", base), function(q) C.ds_file_unmap(q, size) end)
  if size ~= p.bytes then
    L.fail(string.format("params file %s has %d bytes, the graph file says %s (truncated or replaced?)", path, size, tostring(p.bytes)))
  end
  if crc32(map, size) ~= p.crc32 then L.fail("params file " .. path .. " does not match its checksum (corrupted or replaced)") end
  if size < 8 then L.fail("params file " .. path .. " is truncated") end
  local n = 0
  for i = 7, 0, -1 do n = n * 256 + map[i] end
  if n > size - 8 then L.fail("params file " .. path .. ": header length beyond the end of the file") end
  local header = cjson.decode(ffi.string(map + 8, n))
  if type(header) ~= "table" then L.fail("params file " .. path .. ": header is not a JSON object") end
  local data, data_len = map + 8 + n, size - 8 - n
  local tensors, spans = {}, {}
  for name, e in pairs(header) do
    if name ~= "__metadata__" then
      local where = "params file tensor '" .. tostring(name) .. "'"
      if type(e) ~= "table" then L.fail(where .. ": not an object") end
      local dt = from_st[e.dtype]
      if not dt then L.fail(where .. ": unknown dtype " .. tostring(e.dtype)) end
      local shape = parse_shape(L, e.shape, where)
      if sym.contains(shape) then L.fail(where .. ": symbolic shape") end
      local off = e.data_offsets
      if type(off) ~= "table" or not is_int(off[1]) or not is_int(off[2]) or off[2] < off[1] or off[2] > data_len then
        L.fail(where .. ": data_offsets out of range")
      end
      local numel = 1
      for _, d in ipairs(shape) do numel = numel * d end
      local nbytes = off[2] - off[1]
      if numel * dtype.size[dt] ~= nbytes then L.fail(where .. ": shape and data_offsets disagree") end
      spans[#spans + 1] = { off[1], off[2], name }
      local t
      local ptr = data + off[1]
      if nbytes > 0 and tonumber(ffi.cast("uintptr_t", ptr)) % dtype.size[dt] == 0 then
        local sb = ffi.new("int64_t[8]", shape)
        local c = C.ds_tensor_wrap(ptr, nbytes, dtype.code[dt], #shape, sb)
        if c == nil then L.fail(where .. ": " .. require("ds.ffi").last_error()) end
        t = Tensor._wrap(c, shape, dt)
        rawset(t, "_mapping", map)
      else
        t = Tensor._empty(dt, shape, "load")
        if nbytes > 0 then ffi.copy(t:data_ptr(), ptr, nbytes) end
      end
      tensors[name] = t
    end
  end
  table.sort(spans, function(a, b) return a[1] < b[1] end)
  for i = 2, #spans do
    if spans[i][1] < spans[i - 1][2] then L.fail("params file tensors '" .. spans[i - 1][3] .. "' and '" .. spans[i][3] .. "' overlap") end
  end
  return tensors
end

function M.load(path, opts)
  if type(path) ~= "string" or path == "" then errors.raise("load: path must be a non-empty string like \"dir/name\"") end
  local base = path:gsub("%.json$", "")
  local L = loader(base .. ".json")
  local text = read_file(base .. ".json", "graph file", M.MAX_JSON_BYTES)
  local doc, jerr = cjson.decode(text)
  if type(doc) ~= "table" then L.fail("not valid JSON (" .. tostring(jerr or "not an object") .. ")") end
  check_keys(L, doc, TOP, "the graph file")
  if doc.format ~= M.FORMAT then L.fail("not a ds graph file (format is " .. tostring(doc.format) .. ")") end
  if doc.format_version ~= M.FORMAT_VERSION then
    L.fail(string.format("format version %s is not supported (this ds reads version %d)", tostring(doc.format_version), M.FORMAT_VERSION))
  end
  local p = doc.params
  check_keys(L, p, set { "file", "bytes", "crc32" }, "params")
  if type(p.file) ~= "string" or p.file:find("/", 1, true) or p.file:sub(1, 1) == "." then L.fail("params.file must be a file name next to the graph file") end
  local dir = base:match("^(.*)/[^/]*$")
  local params = (dir and (dir .. "/") or "") .. p.file
  local tensors = map_params(L, params, p)
  local ir = build_ir(L, doc, tensors)
  local compile = require("ds.compile")
  local cg = compile.from_ir(ir, opts)
  cg.loaded_from = base
  cg.format_version = doc.format_version
  return cg
end

function M.install(ds)
  ds.save = M.save
  ds.load = M.load
end

return M
