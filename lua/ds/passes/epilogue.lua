-- passes/epilogue.lua: matmul epilogues: a matmul whose only consumer is an elementwise chain (a fused
-- node or one fusible node) of the same shape and dtype becomes `matmul_ep`: the same matmul kernel,
-- then the chain applied in place to its cache-hot output -- the same float ops in the same order.
local S = require("ds.shape")
local fuse = require("ds.passes.fuse")
local IR = require("ds.passes.ir")
local matmul_ep = require("ds.ops.fused").matmul_ep

return function(ir)
  local users, graph_use = {}, {}
  for _, node in ipairs(ir.nodes) do
    for _, id in ipairs(node.inputs) do users[id] = (users[id] or 0) + 1 end
  end
  for _, id in ipairs(ir.outputs) do graph_use[id] = true end
  for _, w in ipairs(ir.state_writes) do graph_use[w.value] = true end
  local consumer = {}
  for _, node in ipairs(ir.nodes) do
    for _, id in ipairs(node.inputs) do consumer[id] = node end
  end
  local replaced, count = {}, 0
  for _, mm in ipairs(ir.nodes) do
    local out = mm.outputs[1]
    local ep = consumer[out]
    local v = ir.values[out]
    -- (matmul_ep kernels exist for f32/f64; integer matmuls stay plain)
    if mm.op == "matmul" and (v.dtype == "f32" or v.dtype == "f64") and not graph_use[out] and users[out] == 1 and
      ep and not replaced[ep]
      and (ep.program or fuse.fusible(ir, ep)) and #ep.outputs == 1 then
      local ov = ir.values[ep.outputs[1]]
      if ov.dtype == v.dtype and S.equal(ov.shape, v.shape) then
        -- the matmul output becomes input 1 of the program (the kernel's own output, read in place)
        local prog2 = fuse.program(ir, ep.program and ep.program.members or { ep },
          function(id) return id == ep.outputs[1] end, { out })
        local inputs = { mm.inputs[1], mm.inputs[2] }
        for k = 2, #prog2.inputs do inputs[#inputs + 1] = prog2.inputs[k] end
        local node = { op = "matmul_ep", def = matmul_ep, inputs = inputs, outputs = { ep.outputs[1] },
                       attrs = {}, program = prog2, line = mm.line }
        ir.values[ep.outputs[1]].node = node
        ir.values[out] = nil
        replaced[ep] = node
        replaced[mm] = false
        count = count + 1
      end
    end
  end
  -- the epilogue node sits at the consumer's position: every input of both nodes exists by then
  IR.replace_nodes(ir, replaced)
  return ir, count
end
