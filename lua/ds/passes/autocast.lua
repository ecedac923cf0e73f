-- passes/autocast.lua: ds.compile(fn, specs, {dtype = "bf16"}): mixed precision for inference, as
-- torch.autocast(dtype=torch.bfloat16) on the CPU. Every f32 product (matmul: linear layers, attention written
-- out, bmm) becomes matmul_bf16 (ops/bf16.lua) of its operands cast to bf16: bf16 products accumulated in f32, an
-- f32 result; a conv2d of groups 1 becomes conv2d_bf16 (input and weight cast, the bias kept f32); a
-- scaled_dot_product_attention (float mask or none, not causal) is written out with its two products in bf16 and
-- its softmax in f32. Everything else stays f32 (layer_norm, softmax, reductions, residual adds, bool-masked or
-- causal attention, grouped convolutions): the values the products read are rounded to bf16, nothing else is. A
-- constant operand (a frozen weight) is cast once here (fold), so it is stored bf16; a parameter that is not frozen
-- is cast on each call. The casts and products are nodes of the IR (printed, saved by ds.save, run by the C
-- runtime). M.prepack (a late pass, after prepack) packs a constant bf16 weight once into the GEMM's strips
-- (ops/bf16.lua's matmul_bf16_packed).
local D = require("ds.dispatch")
local IR = require("ds.passes.ir")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local fold = require("ds.passes.fold")
local dce = require("ds.passes.dce")
local sym = require("ds.sym")
local F = require("ds.ops.common").functions
local bf16 = require("ds.ops.bf16") -- the bf16 product defs
local EW = require("ds.ops.elementwise") -- the astype def

local M = {}

-- opts.dtype: nil (no autocast) or "bf16" (its aliases accepted); anything else is refused naming the option
function M.check(v)
  local dt = type(v) == "string" and dtype.normalize(v)
  if dt ~= "bf16" and dt ~= "f32" then
    errors.raise(string.format("compile: option 'dtype' must be 'bf16' (products in bf16 with f32 accumulation) "
      .. "or 'f32', got %s (f16 compute is not supported; int8 is ds.quantize)", tostring(v)))
  end
end

-- a conv2d of groups 1 on f32 values: conv2d_bf16 takes it
local function conv_eligible(ir, node)
  if node.op ~= "conv2d" or node.attrs.groups ~= 1 then return false end
  for _, id in ipairs { node.inputs[1], node.inputs[2], node.inputs[3], node.outputs[1] } do
    if ir.values[id].dtype ~= "f32" then return false end
  end
  return true
end

-- a matmul node matmul_bf16 can take: f32 operands and result, b (K, N) or with a's leading dims
local function eligible(ir, node)
  if conv_eligible(ir, node) then return true end
  if node.op ~= "matmul" then return false end
  local a, b, y = ir.values[node.inputs[1]], ir.values[node.inputs[2]], ir.values[node.outputs[1]]
  if a.dtype ~= "f32" or b.dtype ~= "f32" or y.dtype ~= "f32" or #a.shape < 2 then return false end
  if #b.shape == 2 then return true end
  if #b.shape ~= #a.shape then return false end
  for i = 1, #a.shape - 2 do if not S.same(a.shape[i], b.shape[i]) then return false end end
  return true
end

-- a scaled_dot_product_attention of f32 values, a float mask or none, not causal, q, k, v of one rank and batch
local function attention_eligible(ir, node)
  if node.op ~= "scaled_dot_product_attention" or node.attrs.is_causal or node.attrs.mask == "bool" then
    return false
  end
  if type(node.attrs.scale) ~= "number" then return false end
  local q = ir.values[node.inputs[1]]
  for _, id in ipairs(node.inputs) do if ir.values[id].dtype ~= "f32" then return false end end
  for i = 2, 3 do
    local t = ir.values[node.inputs[i]]
    if #t.shape ~= #q.shape then return false end
    for d = 1, #q.shape - 2 do if not S.same(t.shape[d], q.shape[d]) then return false end end
  end
  return true
end

-- the attention written out (new nodes, in order, appended to list): p = softmax(bf16(q) . bf16(k^T) * scale
-- [+ mask]) in f32, then bf16(p) . bf16(v); cast_of(id) gives the bf16 cast of a value; returns the last node
local function attention_nodes(ir, node, list, cast_of)
  local D_ = D.by_name
  local function add(def, ins, attrs)
    local n = IR.new_node(ir, def, ins, attrs or {}, node.line)
    list[#list + 1] = n
    return n.outputs[1]
  end
  local q, k, v, mask = node.inputs[1], node.inputs[2], node.inputs[3], node.inputs[4]
  local nd = #ir.values[q].shape
  local kt = add(D_.transpose, { k }, { dim0 = nd - 1, dim1 = nd })
  local scores = add(D_.matmul_bf16, { cast_of(q), cast_of(kt) })
  local id = ir.next_id
  ir.next_id = id + 1
  ir.consts[#ir.consts + 1] = { name = "scale" .. id, value = id,
                                tensor = F.full({}, node.attrs.scale, { dtype = "f32" }) }
  ir.values[id] = { id = id, shape = {}, dtype = "f32", kind = "const", index = #ir.consts }
  scores = add(D_.mul, { scores, id })
  if mask then scores = add(D_.add, { scores, mask }) end
  local p = add(D_.softmax, { scores }, { dim = nd })
  add(D_.matmul_bf16, { cast_of(p), cast_of(v) })
  return list[#list]
end

-- returns the IR and the number of products moved to bf16
function M.run(ir, opts)
  if not opts or opts.dtype == nil or dtype.normalize(opts.dtype) == "f32" then return ir, 0 end
  if ir.grad_writes and #ir.grad_writes > 0 then
    errors.raise("compile: dtype = 'bf16' is for inference; this graph writes gradients (trace it without backward)")
  end
  local astype, mm_bf16, conv_bf16 = EW.astype, bf16.matmul_bf16, bf16.conv2d_bf16
  local replace, n, cast = {}, 0, {}   -- cast[id]: the node casting value id to bf16 (one per value)
  for _, node in ipairs(ir.nodes) do
    if attention_eligible(ir, node) then
      local list = {}
      local function cast_of(id)
        if not cast[id] then
          cast[id] = IR.new_node(ir, astype, { id }, { dtype = "bf16" }, node.line)
          list[#list + 1] = cast[id]
        end
        return cast[id].outputs[1]
      end
      local last = attention_nodes(ir, node, list, cast_of)
      local out = node.outputs[1]   -- the product keeps the attention's value id
      ir.values[last.outputs[1]] = nil
      last.outputs[1] = out
      ir.values[out].node, ir.values[out].index = last, 1
      replace[node] = list
      n = n + 2
    elseif eligible(ir, node) then
      local before, ins = {}, {}
      for i = 1, 2 do
        local id = node.inputs[i]
        if not cast[id] then
          cast[id] = IR.new_node(ir, astype, { id }, { dtype = "bf16" }, node.line)
          before[#before + 1] = cast[id]
        end
        ins[i] = cast[id].outputs[1]
      end
      local conv = node.op == "conv2d"
      if conv then ins[3] = node.inputs[3] end   -- the bias stays f32
      local a = node.attrs
      local mm = conv and IR.new_node(ir, conv_bf16, ins, { stride = a.stride, padding = a.padding,
        dilation = a.dilation }, node.line) or IR.new_node(ir, mm_bf16, ins, {}, node.line)
      -- the product keeps the matmul's value id, so its readers are unchanged
      local out = node.outputs[1]
      ir.values[mm.outputs[1]] = nil
      mm.outputs[1] = out
      ir.values[out].node, ir.values[out].index = mm, 1
      before[#before + 1] = mm
      replace[node] = before
      n = n + 1
    end
  end
  if n == 0 then return ir, 0 end
  local nodes = {}
  for _, node in ipairs(ir.nodes) do
    local r = replace[node]
    if r then for _, x in ipairs(r) do nodes[#nodes + 1] = x end else nodes[#nodes + 1] = node end
  end
  ir.nodes = nodes
  fold(ir)   -- constant weights cast once, stored bf16
  return ir, n
end

-- matmul_bf16 nodes reading a constant (K, N) weight -> matmul_bf16_packed reading it packed (once per weight);
-- opts.prepack = false (the plans ds.save writes) skips it. Returns the IR and the number of nodes rewritten.
function M.prepack(ir, opts)
  if opts and opts.prepack == false then return ir, 0 end
  local pack, packed_mm = bf16.pack_bf16_weight, bf16.matmul_bf16_packed
  local const_tensor, done, n = {}, {}, 0
  for _, c in ipairs(ir.consts) do const_tensor[c.value] = c.tensor end
  for _, node in ipairs(ir.nodes) do
    local w = node.op == "matmul_bf16" and ir.values[node.inputs[2]]
    if w and const_tensor[w.id] and #w.shape == 2 and not sym.contains(w.shape) then
      if not done[w.id] then
        local wt = const_tensor[w.id]:contiguous()
        local t = D.run_kernel(pack, { wt }, {}, { pack.infer({ wt }) })[1]
        local id = ir.next_id
        ir.next_id = id + 1
        ir.consts[#ir.consts + 1] = { name = "packed" .. w.id, tensor = t, value = id }
        ir.values[id] = { id = id, shape = t._shape, dtype = t.dtype, kind = "const", index = #ir.consts }
        done[w.id] = id
      end
      node.op, node.def = packed_mm.name, packed_mm
      node.inputs = { node.inputs[1], done[w.id] }
      node.attrs = { N = w.shape[2] }
      n = n + 1
    end
  end
  if n > 0 then dce(ir) end
  return ir, n
end

return M
