-- passes/prepack.lua: constant weights in the GEMM's own layout. An f32 matmul (or matmul_ep) whose right
-- operand is a constant (K, N) matrix -- a frozen weight, which fold stored transposed -- reads it prepacked
-- as strips of 32 columns (ops/fused.lua's pack_weight, run once here through its kernel), so no call repacks
-- it and products of more than a few rows stream it in order. The same FMA chains, the same bits. Constants
-- nobody reads any more are dropped (dce). All packed weights share one buffer: a fresh 4 KiB page costs a
-- fault on first touch (dear on a VM), and a buffer of 2 MiB or more is given huge pages (src/pages.c).
-- An int8 linear layer (ops/quantized.lua) reading a constant weight reads it packed too, with its row sums:
-- the same integers, the same bits; an int8 convolution's constant weight likewise. Int8 linears over one input become one product with several outputs, and
-- one reading attention's heads transposed and reshaped reads them in place.
local D = require("ds.dispatch")
local sym = require("ds.sym")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local fused_ops = require("ds.ops.fused")
local quantized = require("ds.ops.quantized")
local dce = require("ds.passes.dce")
local IR = require("ds.passes.ir")
local F = require("ds.ops.common").functions

local MAX_PARTS = 16   -- outputs of one merged int8 product (src/qgemm.h's QG_MAX_PARTS)

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

-- a new constant value of the IR holding tensor t; returns its id
local function add_const(ir, name, t)
  local id = ir.next_id
  ir.next_id = id + 1
  ir.consts[#ir.consts + 1] = { name = name, tensor = t, value = id }
  ir.values[id] = { id = id, shape = t.shape, dtype = t.dtype, kind = "const", index = #ir.consts }
  return id
end

-- the int8 linear ops and their forms reading a packed weight
local INT8_PACKED = { linear_int8 = quantized.linear_int8_packed,
  linear_int8_static = quantized.linear_int8_static_packed }

-- linear_int8[_static] nodes reading a constant i8 weight (N, K) -> linear_int8[_static]_packed reading it
-- packed with its row sums (one pair per weight); returns the number of nodes rewritten
local function pack_int8(ir, const_tensor)
  local done, n = {}, 0
  for _, node in ipairs(ir.nodes) do
    local w = INT8_PACKED[node.op] and ir.values[node.inputs[2]]
    if w and w.kind == "const" and const_tensor[w.id] then
      if not done[w.id] then
        local wt = const_tensor[w.id]
        local packed = D.run_kernel(quantized.pack_int8_weight, { wt }, {},
          { quantized.pack_int8_weight.infer({ wt }) })[1]
        local sums = D.run_kernel(quantized.int8_colsum, { wt }, {}, { quantized.int8_colsum.infer({ wt }) })[1]
        done[w.id] = { add_const(ir, "packed" .. w.id, packed), add_const(ir, "colsum" .. w.id, sums), w.shape[2] }
      end
      local p = done[w.id]
      local def, ins = INT8_PACKED[node.op], node.inputs
      node.op, node.def = def.name, def
      node.inputs = { ins[1], p[1], p[2], ins[3], ins[4], ins[5], ins[6] }   -- x, wp, colsum, wscale, bias[, xs, xz]
      node.attrs = { K = p[3] }
      n = n + 1
    end
  end
  return n
end

-- the int8 convolutions and their forms reading a packed weight
local CONV_PACKED = { conv2d_int8 = quantized.conv2d_int8_packed,
  conv2d_int8_static = quantized.conv2d_int8_static_packed }

-- conv2d_int8[_static] nodes reading a constant i8 weight (O, C, kh, kw) -> conv2d_int8[_static]_packed reading
-- its layout for src/qconv.c (its sums, k-groups and tap positions; one per weight and column dilation), so no
-- call redoes it; returns the number of nodes rewritten
local function pack_int8_conv(ir, const_tensor)
  local done, n = {}, 0
  for _, node in ipairs(ir.nodes) do
    local w = CONV_PACKED[node.op] and ir.values[node.inputs[2]]
    if w and w.kind == "const" and const_tensor[w.id] and not sym.contains(w.shape) then
      local a, pack = node.attrs, quantized.pack_int8_conv_weight
      local key = w.id .. ":" .. a.dilation[2]
      if not done[key] then
        local wt, pa = const_tensor[w.id], { dilation = a.dilation[2] }
        done[key] = add_const(ir, "packed" .. w.id, D.run_kernel(pack, { wt }, pa, { pack.infer({ wt }, pa) })[1])
      end
      local def = CONV_PACKED[node.op]
      node.op, node.def = def.name, def
      node.inputs[2] = done[key]
      node.attrs = { stride = a.stride, padding = a.padding, dilation = a.dilation,
                     kernel = { w.shape[3], w.shape[4] } }
      n = n + 1
    end
  end
  return n
end

-- x = [contiguous](reshape(t)) merging t's last two dims, t a transpose (of other dims) of a kernel's output
-- (attention's heads, (B, H, T, D) -> (B, T, H, D)): the int8 linears read t itself as rows of H x D (xdims 2),
-- quantizing each row from its runs, with no copy; returns the number of nodes rewritten
local function read_heads(ir)
  local n = 0
  local function producer(id, op)
    local v = ir.values[id]
    return v.kind == "node" and v.node.op == op and v.node or nil
  end
  for _, node in ipairs(ir.nodes) do
    if node.op == "linear_int8_packed" then
      local x = node.inputs[1]
      local c = producer(x, "contiguous")
      local r = producer(c and c.inputs[1] or x, "reshape")
      local t = r and r.inputs[1]
      local tr = t and producer(t, "transpose")
      local ts, rs = t and ir.values[t].shape, r and ir.values[r.outputs[1]].shape
      local src = tr and ir.values[tr.inputs[1]]
      if src and src.kind == "node" and not src.node.def.view and #ts >= 3 and #rs == #ts - 1
        and tr.attrs.dim0 < #ts and tr.attrs.dim1 < #ts and type(ts[#ts]) == "number"
        and type(ts[#ts - 1]) == "number" and S.same(rs[#rs], ts[#ts - 1] * ts[#ts]) then
        local prefix = true
        for d = 1, #rs - 1 do prefix = prefix and S.same(rs[d], ts[d]) end
        if prefix then
          node.inputs[1], node.attrs.xdims = t, 2
          n = n + 1
        end
      end
    end
  end
  return n
end

-- linear_int8_packed nodes reading one x, their other inputs constants -> one linear_int8_multi<n> node writing
-- all their outputs (attention's query, key and value): x quantized once, one product, the same bits per output;
-- returns the number of nodes merged away
local function merge_int8(ir)
  local tensor, groups, order = {}, {}, {}
  for _, c in ipairs(ir.consts) do tensor[c.value] = c.tensor end
  for _, node in ipairs(ir.nodes) do
    local ins = node.inputs
    if node.op == "linear_int8_packed" and tensor[ins[2]] and tensor[ins[3]] and tensor[ins[4]] and tensor[ins[5]] then
      local key = ins[1] .. ":" .. (node.attrs.xdims or 1)
      local g = groups[key]
      if not g or #g == MAX_PARTS then
        g = {}
        groups[key] = g
        order[#order + 1] = g
      end
      g[#g + 1] = node
    end
  end
  local replace, merged = {}, 0
  for _, g in ipairs(order) do
    if #g > 1 then
      local strips, sizes, parts = 0, {}, { {}, {}, {} }   -- colsums, wscales, biases
      for p, node in ipairs(g) do
        strips = strips + tensor[node.inputs[2]].shape[1]
        sizes[p] = tensor[node.inputs[3]].shape[1]
        for j = 1, 3 do parts[j][p] = tensor[node.inputs[2 + j]] end
      end
      local first = tensor[g[1].inputs[2]]
      local packed, at = Tensor._empty("i8", { strips, first.shape[2], first.shape[3] }, "prepack"), 1
      for _, node in ipairs(g) do
        local wp = tensor[node.inputs[2]]
        packed:narrow(1, at, wp.shape[1]):copy_(wp)
        at = at + wp.shape[1]
      end
      local ins = { g[1].inputs[1], add_const(ir, "packed_multi" .. g[1].outputs[1], packed) }
      for j = 1, 3 do ins[2 + j] = add_const(ir, "multi" .. j .. "_" .. g[1].outputs[1], F.cat(parts[j], 1)) end
      local def = quantized.linear_int8_multi(#g)
      local node = { op = def.name, def = def, inputs = ins, attrs = { K = g[1].attrs.K, xdims = g[1].attrs.xdims, sizes = sizes }, outputs = {},
                     line = g[1].line }
      for p, old in ipairs(g) do
        node.outputs[p] = old.outputs[1]
        local v = ir.values[old.outputs[1]]
        v.node, v.index = node, p
        replace[old] = p == 1 and node or false
      end
      merged = merged + #g - 1
    end
  end
  IR.replace_nodes(ir, replace)
  return merged
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
  local const_tensor = {}
  for _, c in ipairs(ir.consts) do const_tensor[c.value] = c.tensor end
  local int8 = pack_int8(ir, const_tensor) + pack_int8_conv(ir, const_tensor)
  read_heads(ir)   -- (the products these two rewrite were counted above)
  merge_int8(ir)
  if #users == 0 then
    if int8 > 0 then dce(ir) end
    return ir, int8
  end
  local buffer, offset, packed_of = Tensor._empty("f32", { total }, "prepack"), 0, {}
  for _, w in ipairs(weights) do
    local shape = shape_of[w.id]
    local t = Tensor._view(buffer, shape, { shape[2] * STRIP, STRIP, 1 }, offset, "prepack")
    D.run_kernel(fused_ops.pack_weight, { const_tensor[w.id] }, {}, { { shape = shape, dtype = "f32" } }, t)
    offset = offset + shape[1] * shape[2] * STRIP
    packed_of[w.id] = add_const(ir, "packed" .. w.id, t)
  end
  for _, u in ipairs(users) do
    local def = PACKED[u.node.op]
    u.node.op, u.node.def = def.name, def
    u.node.inputs[2] = packed_of[u.w.id]
  end
  dce(ir)
  return ir, #users + int8
end
