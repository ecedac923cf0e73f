-- passes/fold.lua: constant folding: a node whose inputs are all constants (and whose shapes and
-- attrs are concrete) runs once, now, through the same kernel, and its outputs become constants (a view op's
-- output a view of its input's tensor).
local IR = require("ds.passes.ir")
local D = require("ds.dispatch")
local sym = require("ds.sym")

local function concrete(x) return not sym.contains(x) end

return function(ir)
  local nodes, folded = {}, 0
  local const_tensor = {}
  for _, c in ipairs(ir.consts) do const_tensor[c.value] = c.tensor end
  for _, node in ipairs(ir.nodes) do
    local ok = not IR.has_effects(node) and (node.def.kernel or node.def.view) and not node.program
      and concrete(node.attrs)
    local inputs, metas = {}, {}
    if ok then
      for i, id in ipairs(node.inputs) do
        inputs[i] = const_tensor[id]
        if not inputs[i] then ok = false; break end
      end
    end
    if ok then
      for i, id in ipairs(node.outputs) do
        local v = ir.values[id]
        if not concrete(v.shape) then ok = false; break end
        metas[i] = { shape = v.shape, dtype = v.dtype }
      end
    end
    if ok then
      local outs = D.run_kernel(node.def, inputs, node.attrs, metas)
      for i, id in ipairs(node.outputs) do
        -- a view of a constant stays a view (a transposed weight costs no copy; plans bind a contiguous form)
        local t = node.def.view and outs[i] or outs[i]:contiguous()
        local v = ir.values[id]
        v.kind, v.node = "const", nil
        ir.consts[#ir.consts + 1] = { name = "const" .. id, tensor = t, value = id }
        v.index = #ir.consts
        const_tensor[id] = t
      end
      folded = folded + 1
    else
      nodes[#nodes + 1] = node
    end
  end
  ir.nodes = nodes
  return ir, folded
end
