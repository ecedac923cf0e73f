-- passes/single_output.lua: an op whose later outputs nobody reads runs its single-output form when the op
-- table names one (`single_output`): max_pool2d in an inference graph computes the values without writing the
-- i64 indices only its backward reads (max_pool2d_values). Same values, same bits.

-- ir: the late IR (rewritten in place). Returns ir, the number of nodes rewritten.
return function(ir)
  local read = {}
  for _, node in ipairs(ir.nodes) do
    for _, id in ipairs(node.inputs) do read[id] = true end
  end
  for _, id in ipairs(ir.outputs) do read[id] = true end
  for _, w in ipairs(ir.state_writes) do read[w.value] = true end
  local count = 0
  for _, node in ipairs(ir.nodes) do
    local single = node.def.single_output
    local unread = single ~= nil
    for k = 2, #node.outputs do unread = unread and not read[node.outputs[k]] end
    if unread then
      for k = #node.outputs, 2, -1 do
        ir.values[node.outputs[k]] = nil
        node.outputs[k] = nil
      end
      node.op, node.def = single.name, single
      count = count + 1
    end
  end
  return ir, count
end
