-- io/graph_writer.lua: the graph file (name.json) of a graph (ds.Graph, a compiled graph's base): the document
-- (inputs, state, constants, nodes, outputs, writes) and its JSON text (exact doubles, sorted keys, one node per line).
local cjson = require("cjson.safe")
local sym = require("ds.sym")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")
local Graph = require("ds.graph")

local M = { FORMAT = "ds-graph", FORMAT_VERSION = 1 }

local subgraph_doc

-- JSON of v into out: %.17g numbers (integers as %d), inf/nan as {"$float": "inf"}, symbolic dims as
-- {"$dim": "10*batch"}, sub-graphs as {"$graph": {...}}, objects with sorted keys
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
  elseif Graph.is_graph(v) then
    out[#out + 1] = '{"$graph":'
    encode(subgraph_doc(v), out)
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
    errors.raise("save: cannot write a " .. (Tensor.is_tensor(v) and "tensor" or tv) ..
      " attribute into the graph file")
  end
end

local function json_text(v)
  local out = {}
  encode(v, out)
  return table.concat(out)
end

-- the document as text: one top-level field per line, one node per line (readable, diffable)
function M.text(doc)
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

-- a node as the graph file holds it (values: the id -> {shape, dtype} table of its graph)
local function node_doc(node, values)
  local outs = {}
  for k, id in ipairs(node.outputs) do
    local v = values[id]
    outs[k] = { value = id, dtype = v.dtype, shape = dims_out(v.shape) }
  end
  local attrs = {}
  for k, a in pairs(node.attrs) do attrs[k] = a end
  return { op = node.op, inputs = node.inputs, attrs = attrs, outputs = outs, source = node.line }
end

-- the document's inputs of graph g
local function inputs_doc(g)
  local out = {}
  for i, id in ipairs(g.inputs) do
    local v = g.values[id]
    out[i] = { name = g.specs[i].name, value = id, dtype = v.dtype, shape = dims_out(v.shape) }
  end
  return out
end

-- a sub-graph (cond branch, loop body): inputs, 0-d constants inline (their numbers), nodes, outputs
subgraph_doc = function(g)
  local doc = { name = g.name, inputs = inputs_doc(g), constants = {}, nodes = {}, outputs = g.outputs }
  if #g.state > 0 or #g.state_writes > 0 then errors.raise("save: sub-graph " .. g.name .. " has state") end
  for i, c in ipairs(g.consts) do
    if type(c.number) ~= "number" and type(c.number) ~= "boolean" then
      errors.raise("save: sub-graph constant is not a number")
    end
    doc.constants[i] = { value = c.value, number = c.number, dtype = g.values[c.value].dtype }
  end
  for i, node in ipairs(g.nodes) do doc.nodes[i] = node_doc(node, g.values) end
  return doc
end

-- The graph document of ir (a compiled graph's base IR), without its params and plan fields, and the
-- tensors the params file holds (name -> tensor: state by name, constants as "const.<value id>").
function M.document(ir, ds_version)
  local tensors = {}
  local doc = {
    format = M.FORMAT, format_version = M.FORMAT_VERSION, ds_version = ds_version,
    name = ir.name, inputs = inputs_doc(ir), state = {}, constants = {}, nodes = {}, outputs = ir.outputs,
    state_writes = {}, grad_writes = {},
  }
  if ir.args then
    local args, ok = {}, true
    for k, a in ipairs(ir.args) do
      if a.input then args[k] = { input = a.input }
      elseif type(a.value) == "number" or type(a.value) == "string" or type(a.value) == "boolean" then
        args[k] = { value = a.value }
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
  for i, node in ipairs(ir.nodes) do doc.nodes[i] = node_doc(node, ir.values) end
  for i, w in ipairs(ir.state_writes) do doc.state_writes[i] = { state = w.state, value = w.value } end
  for i, w in ipairs(ir.grad_writes) do
    doc.grad_writes[i] = { state = w.state, value = w.value or false, into_existing = w.into_existing or false }
  end
  -- inputs the function updated in place (only when there are any: older readers refuse the field)
  if #ir.input_writes > 0 then
    doc.input_writes = {}
    for i, w in ipairs(ir.input_writes) do doc.input_writes[i] = { input = w.input, value = w.value } end
  end
  if ir.training ~= nil then doc.training = ir.training end
  local sites = M.train_sites(ir)
  if #sites > 0 then doc.train_sites = sites end
  return doc, tensors
end

-- a graph that trains (gradients or optimizer updates), not a predictor
function M.trains(ir)
  if #ir.grad_writes > 0 then return true end
  for _, n in ipairs(ir.nodes) do if n.def.kind == "update" then return true end end
  return false
end

-- what makes a graph traced in train mode (ir.training) differ from its eval mode: random draws (dropout) and
-- buffers it updates other than parameters and optimizer state (batch-norm running statistics), as
-- "what at where" strings; none for a graph traced in eval mode or without modules
function M.train_sites(ir)
  local sites = {}
  if ir.training ~= true then return sites end
  for _, n in ipairs(ir.nodes) do
    if n.def.kind == "random" then sites[#sites + 1] = string.format("random draw (%s) at %s", n.op, n.line or "?") end
  end
  local trained = {}
  for _, w in ipairs(ir.grad_writes) do trained[w.state] = true end
  for _, w in ipairs(ir.state_writes) do
    local s, n = ir.state[w.state], ir.values[w.value].node
    if s.name ~= "rng_state" and not trained[w.state] and not (n and n.def.kind == "update") then
      sites[#sites + 1] = string.format("buffer update of %s at %s", s.name, n and n.line or "?")
    end
  end
  return sites
end

return M
