-- passes/prepack.lua: constant weights in the GEMM's own layout. An f32 matmul (or matmul_ep) whose right
-- operand is a constant (K, N) matrix -- a frozen weight, which fold stored transposed -- reads it prepacked
-- as strips of 32 columns (ops/fused.lua's pack_weight, run once here through its kernel), so no call repacks
-- it and products of more than a few rows stream it in order. The same FMA chains, the same bits. Constants
-- nobody reads any more are dropped (dce).
local D = require("ds.dispatch")
local sym = require("ds.sym")
local fused_ops = require("ds.ops.fused")
local dce = require("ds.passes.dce")

local PACKED = { matmul = fused_ops.matmul_packed, matmul_ep = fused_ops.matmul_packed_ep }
local STRIP = 32   -- columns per strip (src/sgemm.h's SGEMM_STRIP)

-- ir: the late IR (rewritten in place). Returns ir, the number of products now reading a packed weight.
return function(ir)
  local const_tensor = {}
  for _, c in ipairs(ir.consts) do const_tensor[c.value] = c.tensor end
  local packed_of, count = {}, 0   -- weight's value id -> its packed constant's value id
  for _, node in ipairs(ir.nodes) do
    local def = PACKED[node.op]
    local a, w, out = ir.values[node.inputs[1]], ir.values[node.inputs[2]], ir.values[node.outputs[1]]
    if def and out.dtype == "f32" and w.kind == "const" and #w.shape == 2 and not sym.contains(w.shape)
      and #a.shape == #out.shape then
      local id = packed_of[w.id]
      if not id then
        local K, N = w.shape[1], w.shape[2]
        local shape = { math.floor((N + STRIP - 1) / STRIP), K, STRIP }   -- (strips, K, 32)
        local meta = { { shape = shape, dtype = "f32" } }
        local t = D.run_kernel(fused_ops.pack_weight, { const_tensor[w.id] }, {}, meta)[1]
        id = ir.next_id
        ir.next_id = id + 1
        ir.consts[#ir.consts + 1] = { name = "packed" .. w.id, tensor = t, value = id }
        ir.values[id] = { id = id, shape = shape, dtype = "f32", kind = "const", index = #ir.consts }
        packed_of[w.id] = id
      end
      node.op, node.def = def.name, def
      node.inputs[2] = id
      count = count + 1
    end
  end
  if count > 0 then dce(ir) end
  return ir, count
end
