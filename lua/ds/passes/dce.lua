-- passes/dce.lua: dead code elimination: drop nodes none of whose outputs reach a graph output or
-- state write (nodes with effects, e.g. random ops advancing the generator, always stay).
local IR = require("ds.passes.ir")

return function(ir)
  local live = {}
  for _, id in ipairs(ir.outputs) do live[id] = true end
  for _, w in ipairs(ir.state_writes) do live[w.value] = true end
  local keep = {}
  for i = #ir.nodes, 1, -1 do
    local node = ir.nodes[i]
    local used = IR.has_effects(node)
    for _, id in ipairs(node.outputs) do if live[id] then used = true end end
    if used then
      keep[node] = true
      for _, id in ipairs(node.inputs) do live[id] = true end
    end
  end
  local nodes, removed = {}, 0
  for _, node in ipairs(ir.nodes) do
    if keep[node] then nodes[#nodes + 1] = node
    else
      removed = removed + 1
      for _, id in ipairs(node.outputs) do ir.values[id] = nil end
    end
  end
  ir.nodes = nodes
  -- constants nobody reads any more
  local consts = {}
  for _, c in ipairs(ir.consts) do
    if live[c.value] then consts[#consts + 1] = c; ir.values[c.value].index = #consts
    else ir.values[c.value] = nil end
  end
  ir.consts = consts
  return ir, removed
end
