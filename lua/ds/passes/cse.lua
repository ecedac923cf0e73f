-- passes/cse.lua: common subexpression elimination: a node with the same op, inputs and attrs as an
-- earlier one reuses its outputs (nodes with effects and control nodes are never merged).
local IR = require("ds.passes.ir")

return function(ir)
  local seen, nodes, rename, merged = {}, {}, {}, 0
  local function r(id) return rename[id] or id end
  for _, node in ipairs(ir.nodes) do
    for i, id in ipairs(node.inputs) do node.inputs[i] = r(id) end
    local key
    if not IR.has_effects(node) and not node.def.run then
      key = node.op .. "(" .. table.concat(node.inputs, ",") .. ")" .. IR.attrs_str(node)
    end
    local prev = key and seen[key]
    if prev then
      for i, id in ipairs(node.outputs) do rename[id] = prev.outputs[i]; ir.values[id] = nil end
      merged = merged + 1
    else
      if key then seen[key] = node end
      nodes[#nodes + 1] = node
    end
  end
  ir.nodes = nodes
  for i, id in ipairs(ir.outputs) do ir.outputs[i] = r(id) end
  for _, w in ipairs(ir.state_writes) do w.value = r(w.value) end
  return ir, merged
end
