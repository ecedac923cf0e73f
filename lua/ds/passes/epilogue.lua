-- passes/epilogue.lua: matmul and conv2d epilogues: a matmul (conv2d) whose consumers are all elementwise (fused
-- nodes or fusible ones) of its shape, leading to one value of its dtype, becomes `matmul_ep` (`conv2d_ep`): the
-- same kernel, then the chain applied in place to its cache-hot output -- the same float ops in the same order.
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

local MAX_STEPS, MAX_REGS, MAX_INPUTS = 48, 32, 60   -- within src/fused.c's MAXINS, MAXREG, MAXOPS

-- The elementwise region after a product's output `out`: every consumer of out, grown through the consumers of
-- the values it leaves until exactly one value escapes (relu6 as written by hardtanh reads the conv's output in
-- three fused nodes that meet in one). Members are fused or fusible nodes over out's shape; the escaping value
-- has out's dtype. Returns the region's nodes in graph order and that value, or nil.
local function region(ir, out, users_of, graph_use, pos, taken)
  local v = ir.values[out]
  local set, list = {}, {}
  local function ok(n)
    if taken[n] ~= nil or #n.outputs ~= 1 or not (n.program or fuse.fusible(ir, n)) then return false end
    return S.equal(ir.values[n.outputs[1]].shape, v.shape)
  end
  local function add(n)
    if set[n] then return true end
    if not ok(n) then return false end
    set[n] = true
    list[#list + 1] = n
    return true
  end
  for _, n in ipairs(users_of[out]) do if not add(n) then return nil end end
  while #list <= MAX_STEPS do
    local escaping = {}
    for _, n in ipairs(list) do
      local id, outside = n.outputs[1], graph_use[n.outputs[1]]
      for _, u in ipairs(users_of[id] or {}) do outside = outside or not set[u] end
      if outside then escaping[#escaping + 1] = id end
    end
    if #escaping == 1 then
      if ir.values[escaping[1]].dtype ~= v.dtype then return nil end
      table.sort(list, function(a, b) return pos[a] < pos[b] end)
      return list, escaping[1]
    end
    if #escaping == 0 then return nil end
    for _, id in ipairs(escaping) do
      if graph_use[id] then return nil end
      for _, u in ipairs(users_of[id]) do if not add(u) then return nil end end
    end
  end
  return nil
end

return function(ir)
  local users_of, graph_use, pos = {}, {}, {}
  for i, node in ipairs(ir.nodes) do
    pos[node] = i
    for _, id in ipairs(node.inputs) do
      local u = users_of[id] or {}
      users_of[id] = u
      if u[#u] ~= node then u[#u + 1] = node end
    end
  end
  for _, id in ipairs(ir.outputs) do graph_use[id] = true end
  for _, w in ipairs(ir.state_writes) do graph_use[w.value] = true end
  local replaced, count = {}, 0
  for _, mm in ipairs(ir.nodes) do
    local out = mm.outputs[1]
    local v = ir.values[out]
    local kind = EP[mm.op]
    -- (epilogue kernels exist for f32/f64; integer matmuls stay plain)
    local list, final
    if kind and (v.dtype == "f32" or v.dtype == "f64") and not graph_use[out] and users_of[out] then
      list, final = region(ir, out, users_of, graph_use, pos, replaced)
    end
    local members = {}
    for _, n in ipairs(list or {}) do
      for _, m in ipairs(n.program and n.program.members or { n }) do members[#members + 1] = m end
    end
    -- the product's output becomes input 1 of the program (the kernel's own output, read in place)
    local prog2 = list and fuse.program(ir, members, function(id) return id == final end, { out })
    if prog2 and #prog2.steps <= MAX_STEPS and prog2.nregs <= MAX_REGS and #prog2.inputs <= MAX_INPUTS then
      local inputs = {}
      for k = 1, kind.n do inputs[k] = mm.inputs[k] end
      for k = 2, #prog2.inputs do inputs[#inputs + 1] = prog2.inputs[k] end
      local node = kind.fields(mm, prog2)
      node.op, node.def, node.inputs, node.outputs, node.line = kind.def.name, kind.def, inputs, { final }, mm.line
      ir.values[final].node = node
      ir.values[out] = nil
      for _, n in ipairs(list) do
        replaced[n] = false
        if n.outputs[1] ~= final then ir.values[n.outputs[1]] = nil end
      end
      -- the epilogue node sits at the region's last node: every input of every member exists by then
      replaced[list[#list]] = node
      replaced[mm] = false
      count = count + 1
    end
  end
  IR.replace_nodes(ir, replaced)
  return ir, count
end
