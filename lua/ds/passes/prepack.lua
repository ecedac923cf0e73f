-- passes/prepack.lua: constant weights in the GEMM's own layout. An f32 matmul (or matmul_ep) whose right
-- operand is a constant (K, N) matrix -- a frozen weight, which fold stored transposed -- reads it prepacked
-- as strips of 32 columns (ops/fused.lua's pack_weight, run once here through its kernel), so no call repacks
-- it and products of more than a few rows stream it in order. The same FMA chains, the same bits. Constants
-- nobody reads any more are dropped (dce). All packed weights share one buffer: a fresh 4 KiB page costs a
-- fault on first touch (dear on a VM), and a buffer of 2 MiB or more is given huge pages (src/pages.c).
local D = require("ds.dispatch")
local sym = require("ds.sym")
local Tensor = require("ds.tensor")
local fused_ops = require("ds.ops.fused")
local dce = require("ds.passes.dce")

local PACKED = { matmul = fused_ops.matmul_packed, matmul_ep = fused_ops.matmul_packed_ep }
local STRIP = 32   -- columns per strip (src/sgemm.h's SGEMM_STRIP)

-- the weight a node could read packed: its (K, N) constant value, or nil
local function packable(ir, node)
  if not PACKED[node.op] then return nil end
  local a, w, out = ir.values[node.inputs[1]], ir.values[node.inputs[2]], ir.values[node.outputs[1]]
  if out.dtype == "f32" and w.kind == "const" and #w.shape == 2 and not sym.contains(w.shape)
    and w.shape[1] > 0 and w.shape[2] > 0 and #a.shape == #out.shape then   -- (an empty weight has nothing to pack)
    return w
  end
end

-- ir: the late IR (rewritten in place). Returns ir, the number of products now reading a packed weight.
return function(ir)
  local users, weights, shape_of, total = {}, {}, {}, 0   -- products and the weights they read, in order
  for _, node in ipairs(ir.nodes) do
    local w = packable(ir, node)
    if w then
      users[#users + 1] = { node = node, w = w }
      if not shape_of[w.id] then
        local K, N = w.shape[1], w.shape[2]
        shape_of[w.id] = { math.floor((N + STRIP - 1) / STRIP), K, STRIP }   -- (strips, K, 32)
        weights[#weights + 1] = w
        total = total + shape_of[w.id][1] * K * STRIP
      end
    end
  end
  if #users == 0 then return ir, 0 end
  local const_tensor = {}
  for _, c in ipairs(ir.consts) do const_tensor[c.value] = c.tensor end
  local buffer, offset, packed_of = Tensor._empty("f32", { total }, "prepack"), 0, {}
  for _, w in ipairs(weights) do
    local shape = shape_of[w.id]
    local t = Tensor._view(buffer, shape, { shape[2] * STRIP, STRIP, 1 }, offset, "prepack")
    D.run_kernel(fused_ops.pack_weight, { const_tensor[w.id] }, {}, { { shape = shape, dtype = "f32" } }, t)
    offset = offset + shape[1] * shape[2] * STRIP
    local id = ir.next_id
    ir.next_id = id + 1
    ir.consts[#ir.consts + 1] = { name = "packed" .. w.id, tensor = t, value = id }
    ir.values[id] = { id = id, shape = shape, dtype = "f32", kind = "const", index = #ir.consts }
    packed_of[w.id] = id
  end
  for _, u in ipairs(users) do
    local def = PACKED[u.node.op]
    u.node.op, u.node.def = def.name, def
    u.node.inputs[2] = packed_of[u.w.id]
  end
  dce(ir)
  return ir, #users
end
