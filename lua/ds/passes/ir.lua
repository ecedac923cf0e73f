-- passes/ir.lua: the IR the passes rewrite (values + nodes in topological order), its printer and helpers.
-- ir = { values = {[id] = value}, nodes = {node...}, inputs = {id...}, specs = {spec...},
--        state = {{name, tensor, value}...}, consts = {{name, tensor, value}...}, outputs = {id...},
--        state_writes = {{state = index into ir.state, value = id}...},
--        input_writes = {{input = index into ir.inputs, value = id}...} (the caller's tensor receives it), next_id }
-- value = { id, shape, dtype, kind = "input"|"state"|"const"|"node", node = producer, index = output slot }
-- node  = { op, def, inputs = {id...}, attrs, outputs = {id...}, line, program = fused chain (fuse pass) }
local S = require("ds.shape")

local M = {}

function M.new()
  return { values = {}, nodes = {}, inputs = {}, specs = {}, state = {}, consts = {}, outputs = {},
           state_writes = {}, input_writes = {}, next_id = 1 }
end

-- node has effects beyond its outputs (mutates an input, prints, ...): never removed or merged
function M.has_effects(node)
  local def = node.def
  return def.mutates ~= nil or def.side_effects == true or def.kind == "random"
end

-- rebuild ir.nodes after a rewrite: replace[node] = false drops the node, = another node puts that one
-- in its place (at the old node's position), nil keeps it
function M.replace_nodes(ir, replace)
  local nodes = {}
  for _, node in ipairs(ir.nodes) do
    local r = replace[node]
    if r == nil then nodes[#nodes + 1] = node elseif r then nodes[#nodes + 1] = r end
  end
  ir.nodes = nodes
end

-- a stable text for an attr value (tables, symbolic dims, numbers)
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
M.attr_str = attr_str

function M.attrs_str(node)
  local keys = {}
  for k in pairs(node.attrs) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. attr_str(node.attrs[k]) end
  return table.concat(parts, ", ")
end

local function vtype(v) return v.dtype .. S.str(v.shape) end

function M.tostring(ir)
  local lines, ins = {}, {}
  for i, id in ipairs(ir.inputs) do
    ins[i] = string.format("%%%d: %s", id, vtype(ir.values[id]))
  end
  lines[1] = "graph(" .. table.concat(ins, ", ") .. ")"
  for _, s in ipairs(ir.state) do
    lines[#lines + 1] = string.format("  state %%%d = %s %s", s.value, s.name, vtype(ir.values[s.value]))
  end
  for _, c in ipairs(ir.consts) do
    lines[#lines + 1] = string.format("  const %%%d = %s %s", c.value, c.name, vtype(ir.values[c.value]))
  end
  for _, node in ipairs(ir.nodes) do
    local outs, args = {}, {}
    for i, id in ipairs(node.outputs) do outs[i] = "%" .. id end
    for i, id in ipairs(node.inputs) do args[i] = "%" .. id end
    local a = M.attrs_str(node)
    local body = node.program and M.program_str(node) or (node.op .. "(" .. table.concat(args, ", ")
      .. (a ~= "" and (#args > 0 and ", " or "") .. a or "") .. ")")
    lines[#lines + 1] = string.format("  %s = %s  %s%s", table.concat(outs, ", "), body,
      vtype(ir.values[node.outputs[1]]), node.line and ("  -- " .. node.line) or "")
  end
  for _, w in ipairs(ir.state_writes) do
    lines[#lines + 1] = string.format("  %s <- %%%d", ir.state[w.state].name, w.value)
  end
  for _, w in ipairs(ir.input_writes or {}) do
    lines[#lines + 1] = string.format("  %s <- %%%d", ir.specs[w.input].name, w.value)
  end
  local outs = {}
  for i, id in ipairs(ir.outputs) do outs[i] = "%" .. id end
  lines[#lines + 1] = "  return " .. table.concat(outs, ", ")
  return table.concat(lines, "\n")
end

-- fused node body: "fused[add, relu](%1, %2)"
function M.program_str(node)
  local ops, args = {}, {}
  for i, step in ipairs(node.program.steps) do ops[i] = step.op end
  for i, id in ipairs(node.inputs) do args[i] = "%" .. id end
  return string.format("%s[%s](%s)", node.op, table.concat(ops, ", "), table.concat(args, ", "))
end

-- a new node of def on the values inputs (ids), not yet placed in ir.nodes: its outputs are new values of ir
-- whose shapes and dtypes def.infer gives (as dispatch runs it on tensors); raises what the inference raises
function M.new_node(ir, def, inputs, attrs, line)
  local metas = {}
  for j, id in ipairs(inputs) do metas[j] = { _shape = ir.values[id].shape, dtype = ir.values[id].dtype } end
  local out = def.infer(metas, attrs, def)
  if out.shape then out = { out } end
  local node = { op = def.name, def = def, inputs = inputs, attrs = attrs, outputs = {}, line = line }
  for k, m in ipairs(out) do
    local id = ir.next_id
    ir.next_id = id + 1
    ir.values[id] = { id = id, shape = m.shape, dtype = m.dtype, kind = "node", node = node, index = k }
    node.outputs[k] = id
  end
  return node
end

-- a shallow structural copy (values and nodes copied; tensors shared)
function M.copy(ir)
  local out = M.new()
  out.next_id = ir.next_id
  for id, v in pairs(ir.values) do
    local c = {}
    for k, x in pairs(v) do c[k] = x end
    out.values[id] = c
  end
  for i, node in ipairs(ir.nodes) do
    local c = {}
    for k, x in pairs(node) do c[k] = x end
    c.inputs = { unpack(node.inputs) }
    c.outputs = { unpack(node.outputs) }
    out.nodes[i] = c
    for _, id in ipairs(c.outputs) do out.values[id].node = c end
  end
  out.inputs = { unpack(ir.inputs) }
  out.specs, out.name, out.args, out.training, out.grad_writes = ir.specs, ir.name, ir.args, ir.training, ir.grad_writes
  for i, s in ipairs(ir.state) do out.state[i] = { name = s.name, tensor = s.tensor, value = s.value } end
  for i, c in ipairs(ir.consts) do out.consts[i] = { name = c.name, tensor = c.tensor, value = c.value } end
  out.outputs = { unpack(ir.outputs) }
  for i, w in ipairs(ir.state_writes) do out.state_writes[i] = { state = w.state, value = w.value } end
  out.input_writes = {}
  for i, w in ipairs(ir.input_writes or {}) do out.input_writes[i] = { input = w.input, value = w.value } end
  return out
end

return M
