-- passes/prune.lua: compute only the rows that are read. A select/narrow on one dim (the [CLS] pooling's
-- x:select(2, 1)) asks its input for those rows only; the demand moves up through row-wise work
-- (elementwise ops, matmul's row dim, layer_norm's leading dims, softmax along the last dim, the query side of
-- attention, views), and each node whose every reader wants the same rows is rebuilt to compute just those rows.
-- Rows are independent in all these kernels, so results are bitwise those of the unpruned graph.
local D = require("ds.dispatch")
local IR = require("ds.passes.ir")
local S = require("ds.shape")
local movement = require("ds.ops.movement") -- the narrow def

-- a demand is FULL or {dim, start, length} (rows start .. start+length-1 of dim, 1-based)
local FULL = "full"

local function same_rows(a, b) return a.dim == b.dim and a.start == b.start and a.length == b.length end

local function combine(a, b)
  if a == nil then return b end
  if b == nil then return a end
  if a == FULL or b == FULL or not same_rows(a, b) then return FULL end
  return a
end

local function rows(dim, start, length) return { dim = dim, start = start, length = length } end

-- rules: node, its output demand r (narrowed), the ir -> the demand on each input and the rebuilt
-- node's attrs, or nil when the node cannot compute a subset of rows along r.dim
local RULES = {}

local function elementwise(node, r, ir)
  local out = ir.values[node.outputs[1]].shape
  local needs = {}
  for j, id in ipairs(node.inputs) do
    local shape = ir.values[id].shape
    local d = r.dim - (#out - #shape)
    needs[j] = (d >= 1 and not S.same(shape[d], 1)) and rows(d, r.start, r.length) or FULL
  end
  return needs, node.attrs
end

-- (..., M, K) @ (..., K, N): rows of M come from rows of a
RULES.matmul = function(node, r, ir)
  local n, na = #ir.values[node.outputs[1]].shape, #ir.values[node.inputs[1]].shape
  if r.dim ~= n - 1 then return nil end
  return { rows(na - 1, r.start, r.length), FULL }, node.attrs
end

-- every dim before the normalized ones is a row dim; the statistics outputs must be unread
RULES.layer_norm = function(node, r, ir, read)
  local n = #ir.values[node.outputs[1]].shape
  if read[node.outputs[2]] or read[node.outputs[3]] or r.dim > n - #node.attrs.normalized_shape then return nil end
  return { rows(r.dim, r.start, r.length), FULL, FULL }, node.attrs
end

-- query rows (L, dim -2) come from q's rows and the mask's (when it has an L dim); k and v stay whole.
-- Under is_causal a row's mask depends on its absolute position, so it is left alone.
RULES.scaled_dot_product_attention = function(node, r, ir)
  local n = #ir.values[node.outputs[1]].shape
  if r.dim ~= n - 1 or node.attrs.is_causal then return nil end
  local q = ir.values[node.inputs[1]].shape
  local needs = { rows(#q - 1, r.start, r.length), FULL, FULL }
  if node.inputs[4] then
    local m = ir.values[node.inputs[4]].shape
    local d = r.dim - (n - #m)
    needs[4] = (d >= 1 and not S.same(m[d], 1)) and rows(d, r.start, r.length) or FULL
  end
  return needs, node.attrs
end

-- softmax along the last dim: every other dim is a row dim (written-out attention: softmax(q k^T) @ v)
local function along_last(node, r, ir)
  local n = #ir.values[node.outputs[1]].shape
  if node.attrs.dim ~= n or r.dim == n then return nil end
  return { rows(r.dim, r.start, r.length) }, node.attrs
end
RULES.softmax, RULES.log_softmax = along_last, along_last

RULES.transpose = function(node, r)
  local a = node.attrs
  local d = r.dim == a.dim0 and a.dim1 or r.dim == a.dim1 and a.dim0 or r.dim
  return { rows(d, r.start, r.length) }, a
end

RULES.permute = function(node, r) return { rows(node.attrs.dims[r.dim], r.start, r.length) }, node.attrs end

-- a reshape keeps dim d when the dims before it hold as many elements in the input as in the output
-- and dim d itself is unchanged; the rebuilt reshape gets the shorter shape
RULES.reshape = function(node, r, ir)
  local ins, out = ir.values[node.inputs[1]].shape, ir.values[node.outputs[1]].shape
  local before = 1
  for i = 1, r.dim - 1 do before = S.mul(before, out[i]) end
  local prefix = 1
  for j = 1, #ins do
    if S.same(prefix, before) and S.same(ins[j], out[r.dim]) then
      local shape = {}
      for i, d in ipairs(out) do shape[i] = d end
      shape[r.dim] = r.length
      return { rows(j, r.start, r.length) }, { shape = shape }
    end
    prefix = S.mul(prefix, ins[j])
  end
  return nil
end

-- narrow on the same dim: rows of rows (the rebuilt narrow takes all of its shortened input)
RULES.narrow = function(node, r)
  local a = node.attrs
  if a.dim ~= r.dim then return { rows(r.dim, r.start, r.length) }, a end
  return { rows(r.dim, a.start + r.start - 1, r.length) }, { dim = a.dim, start = 1, length = r.length }
end

RULES.select = function(node, r)
  local a = node.attrs
  return { rows(r.dim < a.dim and r.dim or r.dim + 1, r.start, r.length) }, a
end

local function rule_for(node)
  if IR.has_effects(node) or node.def.run then return nil end
  return RULES[node.op] or (node.def.elementwise and elementwise) or nil
end

-- the rows a select/narrow reads of its input, whatever is read of its own output
local function source_rows(node)
  local a = node.attrs
  if node.op == "select" then return rows(a.dim, a.index, 1) end
  if node.op == "narrow" and type(a.start) == "number" and type(a.length) == "number" then
    return rows(a.dim, a.start, a.length)
  end
  return nil
end

return function(ir)
  -- 1. demands, from the readers back to the producers
  local demand, read, plan = {}, {}, {}
  local function need(id, r) demand[id] = combine(demand[id], r); read[id] = true end
  for _, id in ipairs(ir.outputs) do need(id, FULL) end
  for _, w in ipairs(ir.state_writes) do need(w.value, FULL) end
  for _, w in ipairs(ir.grad_writes or {}) do if w.value then need(w.value, FULL) end end
  for i = #ir.nodes, 1, -1 do
    local node = ir.nodes[i]
    local out = node.outputs[1]   -- nil for a node without results (print): r stays nil or FULL
    local r = nil
    for _, id in ipairs(node.outputs) do r = combine(r, demand[id]) end
    if IR.has_effects(node) and r == nil then r = FULL end
    local src = source_rows(node)
    local rule = rule_for(node)
    local useful = r ~= nil and r ~= FULL and not (r.start == 1 and S.same(ir.values[out].shape[r.dim], r.length))
    local needs, attrs
    if useful and rule then needs, attrs = rule(node, r, ir, read) end
    if needs then
      plan[node] = { needs = needs, attrs = attrs }
      for j, id in ipairs(node.inputs) do need(id, needs[j]) end
    elseif src and r ~= nil then
      need(node.inputs[1], src)
    elseif r ~= nil then
      for _, id in ipairs(node.inputs) do need(id, FULL) end
    end
  end

  -- 2. rebuild, in order: planned nodes compute their rows; selections read the rows they asked for
  local narrowed, nodes, rebuilt = {}, {}, 0
  local function emit(def, inputs, attrs, line)
    local node = IR.new_node(ir, def, inputs, attrs, line)
    nodes[#nodes + 1] = node
    return node
  end
  -- the value holding rows r of id: its rebuilt form, or a narrow view of the whole
  local function input_rows(id, r, line)
    if r == FULL then return id end
    local d = demand[id]
    if narrowed[id] and d ~= FULL and same_rows(d, r) then return narrowed[id] end
    return emit(movement.narrow, { id }, { dim = r.dim, start = r.start, length = r.length }, line).outputs[1]
  end
  for _, node in ipairs(ir.nodes) do
    local p = plan[node]
    local src = source_rows(node)
    if p then
      local inputs = {}
      for j, id in ipairs(node.inputs) do inputs[j] = input_rows(id, p.needs[j], node.line) end
      local new = emit(node.def, inputs, p.attrs, node.line)
      for k, id in ipairs(node.outputs) do narrowed[id] = new.outputs[k]; ir.values[id] = nil end
      rebuilt = rebuilt + 1
    elseif src and narrowed[node.inputs[1]] then
      local attrs = {}
      for k, v in pairs(node.attrs) do attrs[k] = v end
      if node.op == "select" then attrs.index = 1 else attrs.start = 1 end
      node.inputs[1] = narrowed[node.inputs[1]]
      node.attrs = attrs
      nodes[#nodes + 1] = node
    else
      nodes[#nodes + 1] = node
    end
  end
  ir.nodes = nodes
  return ir, rebuilt
end
