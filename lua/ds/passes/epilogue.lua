-- passes/epilogue.lua: matmul and conv2d epilogues: a matmul (conv2d) whose only consumer is an elementwise chain
-- (a fused node or one fusible node) of the same shape and dtype becomes `matmul_ep` (`conv2d_ep`): the same
-- kernel, then the chain applied in place to its cache-hot output -- the same float ops in the same order.
local S = require("ds.shape")
local fuse = require("ds.passes.fuse")
local IR = require("ds.passes.ir")
local fused_ops = require("ds.ops.fused")

-- conv2d_ep's attr `epilogue`: the program, its packed numbers (the kernel's attrs after conv2d's), printed as
-- its ops; a table with a metatable, so attribute substitution passes it through whole
local EPILOGUE = { __tostring = function(e)
  local ops = {}
  for i, step in ipairs(e.program.steps) do ops[i] = step.op end
  return "[" .. table.concat(ops, ", ") .. "]"
end }

local function conv_attrs(a, prog)
  return { stride = a.stride, padding = a.padding, dilation = a.dilation, groups = a.groups,
           epilogue = setmetatable({ program = prog, packed = fuse.pack(prog) }, EPILOGUE) }
end

-- op -> its epilogue node's def, the number of the product's own inputs, the node's fields from the program
local EP = {
  matmul = { def = fused_ops.matmul_ep, n = 2, fields = function(_, prog) return { attrs = {}, program = prog } end },
  conv2d = { def = fused_ops.conv2d_ep, n = 3,
             fields = function(node, prog) return { attrs = conv_attrs(node.attrs, prog) } end },
}

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
    local kind = EP[mm.op]
    -- (epilogue kernels exist for f32/f64; integer matmuls stay plain)
    if kind and (v.dtype == "f32" or v.dtype == "f64") and not graph_use[out] and users[out] == 1 and
      ep and not replaced[ep]
      and (ep.program or fuse.fusible(ir, ep)) and #ep.outputs == 1 then
      local ov = ir.values[ep.outputs[1]]
      if ov.dtype == v.dtype and S.equal(ov.shape, v.shape) then
        -- the product's output becomes input 1 of the program (the kernel's own output, read in place)
        local prog2 = fuse.program(ir, ep.program and ep.program.members or { ep },
          function(id) return id == ep.outputs[1] end, { out })
        local inputs = {}
        for k = 1, kind.n do inputs[k] = mm.inputs[k] end
        for k = 2, #prog2.inputs do inputs[#inputs + 1] = prog2.inputs[k] end
        local node = kind.fields(mm, prog2)
        node.op, node.def, node.inputs, node.outputs, node.line = kind.def.name, kind.def, inputs, { ep.outputs[1] },
          mm.line
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
