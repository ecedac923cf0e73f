-- passes/loop.lua: a while_loop node's cond and body sub-graphs as IRs for its C loop step (passes/lower.lua):
-- the captures the loop updates (KV caches, the random generator's state) become state of the sub-IR written back
-- in place, its 0-d constants fill nodes; each input and state slot says which loop operand it reads. The passes
-- that need no constant tensors run on it as ds.compile runs them (dce, cse, single_output, fuse, epilogue).
local Graph = require("ds.graph")
local dce = require("ds.passes.dce")
local cse = require("ds.passes.cse")
local single_output = require("ds.passes.single_output")
local fuse = require("ds.passes.fuse")
local epilogue = require("ds.passes.epilogue")
local creation = require("ds.ops.creation") -- the full def

local M = {}

-- whether node (a while_loop) can run as a C loop step: not a differentiated loop (its trips saved or read)
function M.lowerable(node)
  local a = node.attrs
  return node.op == "while_loop" and not a.reads and #(a.saves or {}) == 0
end

-- The IR of sub-graph g of loop node (cond: reads_only), or nil when it cannot be lowered (a constant that is
-- not a number). Returns ir, sources: sources.input[i] / sources.state[s] = the loop operand (0-based: loop
-- variables, then captures) ir.inputs[i] / ir.state[s] reads.
function M.sub_ir(g, node, reads_only)
  local a = node.attrs
  local n, ncap = a.nresults, #node.inputs - a.nresults
  if #g.inputs ~= n + ncap or #g.state > 0 then return nil end
  local ir = Graph.new(g.name)
  for id, v in pairs(g.values) do
    ir.values[id] = { id = id, shape = v.shape, dtype = v.dtype, kind = v.kind, name = v.name }
  end
  ir.next_id = g.next_id
  local written = {}   -- capture k -> its slot among the written outputs
  if not reads_only then for j, k in ipairs(a.written or {}) do written[k] = j end end
  local sources, state_of = { input = {}, state = {} }, {}
  for p, id in ipairs(g.inputs) do
    local v, name = ir.values[id], g.specs[p].name
    if p > n and written[p - n] then
      ir.state[#ir.state + 1] = { name = name, value = id }
      v.kind, v.index = "state", #ir.state
      sources.state[#ir.state] = p - 1
      state_of[p - n] = #ir.state
    else
      Graph.add_input(ir, id, name)
      v.kind, v.index = "input", #ir.inputs
      sources.input[#ir.inputs] = p - 1
    end
  end
  for _, c in ipairs(g.consts) do
    local v = ir.values[c.value]
    if type(c.number) ~= "number" or #v.shape ~= 0 then return nil end
    local fill = { op = "full", def = creation.full, inputs = {}, outputs = { c.value },
                   attrs = { shape = {}, value = c.number, dtype = v.dtype } }
    v.kind, v.node, v.index = "node", fill, 1
    ir.nodes[#ir.nodes + 1] = fill
  end
  for _, node_ in ipairs(g.nodes) do
    local x = { op = node_.op, def = node_.def, inputs = { unpack(node_.inputs) }, outputs = { unpack(node_.outputs) },
                attrs = node_.attrs, line = node_.line }
    for k, id in ipairs(x.outputs) do ir.values[id].node = x; ir.values[id].index = k end
    ir.nodes[#ir.nodes + 1] = x
  end
  local nres = reads_only and 1 or n
  for i = 1, nres do ir.outputs[i] = g.outputs[i] end
  if not reads_only then
    for j, k in ipairs(a.written or {}) do
      local s, v = state_of[k], g.outputs[nres + j]
      if v ~= ir.state[s].value then ir.state_writes[#ir.state_writes + 1] = { state = s, value = v } end
    end
  end
  for _, pass in ipairs { dce, cse, dce, single_output, fuse.run, epilogue } do pass(ir, {}, {}) end
  return ir, sources
end

return M
