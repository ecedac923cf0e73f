-- passes/ir.lua: what the passes share for rewriting the graph IR (ds.Graph, graph.lua, which describes the
-- structure): which nodes have effects, rebuilding the node list, making a node with its inferred outputs, and the
-- attrs text nodes are compared by.
local Graph = require("ds.graph")

local M = {}

-- "k=v, ..." of a node's attrs, sorted (cse and rewrite compare nodes by it)
M.attrs_str = Graph.attrs_str

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

-- a new node of def on the values inputs (ids), not yet placed in ir.nodes: its outputs are new values of ir
-- whose shapes and dtypes def.infer gives (as dispatch runs it on tensors); raises what the inference raises
function M.new_node(ir, def, inputs, attrs, line)
  local metas = {}
  for j, id in ipairs(inputs) do metas[j] = { _shape = ir.values[id].shape, dtype = ir.values[id].dtype } end
  local out = def.infer(metas, attrs, def)
  if out.shape then out = { out } end
  local node = { op = def.name, def = def, inputs = inputs, attrs = attrs, outputs = {}, line = line }
  for k, m in ipairs(out) do
    local id = Graph.add_value(ir, m.shape, m.dtype, "node")
    ir.values[id].node, ir.values[id].index = node, k
    node.outputs[k] = id
  end
  return node
end

return M
