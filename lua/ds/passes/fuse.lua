-- passes/fuse.lua: elementwise fusion: chains of unary/binary/where/clamp/cast nodes of one output
-- shape (inputs may broadcast: scalars, bias vectors) become one `fused` node whose program the
-- C kernel ds_fused_<dtype> runs tile by tile with the eager kernels' per-element code.
local S = require("ds.shape")
local IR = require("ds.passes.ir")
local fused_def = require("ds.ops.fused").fused
local dsffi = require("ds.ffi")
local dtype = require("ds.dtype")
local ffi, lib = dsffi.ffi, dsffi.C

local M = {}

-- the elementwise op table of the C engine (src/elementwise.def): the opcode of each op, by kernel name (a row's
-- kind is its ops' def.ew_kind, ops/elementwise.lua)
local OPCODE = {}
for op = 0, lib.ds_ew_count() - 1 do OPCODE[ffi.string(lib.ds_ew_name(op))] = op end
M.OPCODE = OPCODE
local DTYPE = dtype.code
-- the dtypes the fused kernel's loops run in (src/fused.c; bf16/f16/i8 ops run as casts around f32/i32 ones)
local FUSED_DTYPES = { f32 = true, f64 = true, i64 = true, i32 = true, u8 = true, bool = true }
local MAX_REGS, MAX_NODES, MAX_INPUTS = 32, 24, 48

-- the kernel's per-element op name (ds_add_%s -> add; astype/contiguous -> copy), if the table has it
local function kernel_op(def)
  if not (def.elementwise and def.kernel) then return nil end
  local op = def.kernel:match("^ds_(.-)_%%s$")
  return OPCODE[op] and op or nil
end

-- the dtype a node's kernel runs in (as dispatch.run_kernel picks it)
local function kernel_dtype(ir, node)
  local ins, outs = {}, {}
  for i, id in ipairs(node.inputs) do local v = ir.values[id]; ins[i] = { dtype = v.dtype, _shape = v.shape } end
  for i, id in ipairs(node.outputs) do local v = ir.values[id]; outs[i] = { dtype = v.dtype, _shape = v.shape } end
  if node.def.kernel_dtype then return node.def.kernel_dtype(ins, outs, node.attrs) end
  return ins[1] and ins[1].dtype or outs[1].dtype
end

function M.fusible(ir, node)
  if node.program or #node.outputs ~= 1 then return false end
  -- a contiguous copy of what is already contiguous (an input, state, a constant, a node's output but a view's)
  -- stays a node of its own: lowering gives it its input's layout, no pass over the data
  if node.op == "contiguous" then
    local v = ir.values[node.inputs[1]]
    if v.kind ~= "node" or not v.node.def.view then return false end
  end
  local op = kernel_op(node.def)
  if not op then return false end
  local dt = kernel_dtype(ir, node)
  for _, id in ipairs(node.inputs) do if not FUSED_DTYPES[ir.values[id].dtype] then return false end end
  return node.def.dtypes[dt] ~= nil and FUSED_DTYPES[dt] == true
end

-- Build the program of a group (nodes in order): external inputs, outputs, register-allocated steps.
-- outside_use(id) tells whether a member's output is needed after the group.
function M.program(ir, members, outside_use, first_inputs)
  local in_group, inputs, input_index = {}, {}, {}
  for _, n in ipairs(members) do in_group[n.outputs[1]] = true end
  for _, id in ipairs(first_inputs or {}) do inputs[#inputs + 1] = id; input_index[id] = #inputs end
  local last_use = {}
  for i, n in ipairs(members) do
    for _, id in ipairs(n.inputs) do
      if in_group[id] then last_use[id] = i
      elseif not input_index[id] then inputs[#inputs + 1] = id; input_index[id] = #inputs end
    end
  end
  local outputs = {}
  for _, n in ipairs(members) do
    if outside_use(n.outputs[1]) then outputs[#outputs + 1] = n.outputs[1] end
  end
  local reg_of, free, nregs, steps = {}, {}, 0, {}
  for i, n in ipairs(members) do
    local op = kernel_op(n.def)
    local function operand(id) return in_group[id] and reg_of[id] or -input_index[id] end
    local a, b, c = operand(n.inputs[1]), n.inputs[2] and operand(n.inputs[2]) or 0, n.inputs[3] and
      operand(n.inputs[3]) or 0
    if n.def.ew_kind == "param" then    -- the two params are the op's first two attrs, in its table order
      b, c = n.attrs[n.def.attrs[1][1]], n.attrs[n.def.attrs[2][1]]
    end
    local dst = table.remove(free)
    if not dst then dst = nregs; nregs = nregs + 1 end
    reg_of[n.outputs[1]] = dst
    -- release registers whose last use is this step, after picking dst: a step never writes over its
    -- own operands (element sizes may differ); outputs are kept, they are stored at the tile's end
    for _, id in ipairs(n.inputs) do
      if in_group[id] and last_use[id] == i and not outside_use(id) and reg_of[id] then
        free[#free + 1] = reg_of[id]; last_use[id] = -1
      end
    end
    local dt = n.def.ew_kind == "cast" and ir.values[n.outputs[1]].dtype or kernel_dtype(ir, n)
    steps[i] = { op = op, opcode = OPCODE[op], dtype = dt, dst = dst, a = a, b = b, c = c }
  end
  local outregs = {}
  for i, id in ipairs(outputs) do outregs[i] = reg_of[id] end
  return { steps = steps, inputs = inputs, outputs = outputs, outregs = outregs, nregs = nregs, members = members }
end

-- the numbers ds_fused_* reads (see src/fused.c)
function M.pack(program)
  local a = { #program.outputs, #program.inputs, program.nregs, #program.steps }
  for _, r in ipairs(program.outregs) do a[#a + 1] = r end
  for _, s in ipairs(program.steps) do
    a[#a + 1] = s.opcode; a[#a + 1] = DTYPE[s.dtype]; a[#a + 1] = s.dst
    a[#a + 1] = s.a; a[#a + 1] = s.b; a[#a + 1] = s.c
  end
  return a
end

-- the pass
function M.run(ir)
  local producer_pos = {}
  for i, node in ipairs(ir.nodes) do for _, id in ipairs(node.outputs) do producer_pos[id] = i end end
  local users = {}
  for i, node in ipairs(ir.nodes) do
    for _, id in ipairs(node.inputs) do users[id] = users[id] or {}; users[id][#users[id] + 1] = node end
  end
  local graph_use = {}
  for _, id in ipairs(ir.outputs) do graph_use[id] = true end
  for _, w in ipairs(ir.state_writes) do graph_use[w.value] = true end

  local groups, group_of = {}, {}
  for i, node in ipairs(ir.nodes) do
    if M.fusible(ir, node) then
      local shape = ir.values[node.outputs[1]].shape
      local target
      for _, id in ipairs(node.inputs) do
        local g = group_of[id]
        if g and #g.members < MAX_NODES and #g.inputs < MAX_INPUTS and S.equal(g.shape, shape) then target = g end
      end
      if target then
        for _, id in ipairs(node.inputs) do
          local p = producer_pos[id]
          if group_of[id] ~= target and p and p >= target.start then target = nil; break end
        end
      end
      if not target then
        target = { start = i, shape = shape, members = {}, inputs = {} }
        groups[#groups + 1] = target
      end
      target.members[#target.members + 1] = node
      for _, id in ipairs(node.inputs) do if group_of[id] ~= target then target.inputs[id] = true end end
      group_of[node.outputs[1]] = target
    end
  end

  local replace, fused = {}, 0
  for _, g in ipairs(groups) do
    if #g.members >= 2 then
      local member = {}
      for _, n in ipairs(g.members) do member[n] = true end
      local function outside_use(id)
        if graph_use[id] then return true end
        for _, u in ipairs(users[id] or {}) do if not member[u] then return true end end
        return false
      end
      local prog = M.program(ir, g.members, outside_use)
      if prog.nregs <= MAX_REGS and #prog.outputs >= 1 then
        local lines = {}
        for _, n in ipairs(g.members) do if n.line then lines[#lines + 1] = n.line end end
        local fnode = { op = "fused", def = fused_def, inputs = prog.inputs, outputs = prog.outputs,
                        attrs = {}, program = prog, line = lines[#lines] }
        for k, id in ipairs(prog.outputs) do ir.values[id].node = fnode; ir.values[id].index = k end
        for _, n in ipairs(g.members) do replace[n] = false end
        replace[g.members[1]] = fnode
        fused = fused + 1
      end
    end
  end
  IR.replace_nodes(ir, replace)
  return ir, fused
end

return M
