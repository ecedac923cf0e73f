-- passes/conv_pool.lua: a conv2d (or a conv2d_ep whose epilogue is relu or hardswish alone) whose output only a
-- max or average pooling reads becomes one `conv2d_pool` node (ops/fused.lua; src/conv_pool.c): the pooling runs on
-- each block of the conv's output while it is in cache, and the full-size output is never stored. The same ops in
-- the same order, so the same bits. Runs after the epilogue pass, under its compile option (`epilogue = false`).
local fused_ops = require("ds.ops.fused")
local IR = require("ds.passes.ir")

-- an epilogue program that is one activation the conv kernels apply themselves: its name, or nil
local function lone_activation(program)
  local step = program.steps[1]
  if #program.steps ~= 1 or #program.inputs ~= 1 or step.a ~= -1 or step.dtype ~= "f32" or
      program.outregs[1] ~= step.dst then
    return nil
  end
  return (step.op == "relu" or step.op == "hardswish") and step.op or nil
end

-- the activation of a conv node the pooling may absorb: "none" for conv2d, relu/hardswish for conv2d_ep, or nil
local function conv_activation(node)
  if node.op == "conv2d" then return "none" end
  if node.op == "conv2d_ep" and #node.inputs == 3 then return lone_activation(node.attrs.epilogue.program) end
  return nil
end

local POOLS = { max_pool2d_values = "max", avg_pool2d = "avg" }

return function(ir)
  local users, graph_use = {}, {}
  for _, node in ipairs(ir.nodes) do
    for _, id in ipairs(node.inputs) do users[id] = (users[id] or 0) + 1 end
  end
  for _, id in ipairs(ir.outputs) do graph_use[id] = true end
  for _, w in ipairs(ir.state_writes) do graph_use[w.value] = true end
  -- value id -> the node making it when only one node reads it and the graph does not return it
  local function sole_producer(id)
    local v = ir.values[id]
    if users[id] ~= 1 or graph_use[id] or not v or v.kind ~= "node" then return nil end
    return v.node
  end
  local replaced, count = {}, 0
  for _, pool in ipairs(ir.nodes) do
    local kind = POOLS[pool.op]
    local conv, between = nil, {}
    if kind and ir.values[pool.outputs[1]].dtype == "f32" then
      conv = sole_producer(pool.inputs[1])
      while conv and conv.op == "contiguous" do   -- a copy of a contiguous conv output: nothing to copy
        between[#between + 1] = conv
        conv = sole_producer(conv.inputs[1])
      end
    end
    local act = conv and replaced[conv] == nil and conv_activation(conv)
    if act then
      local c, p = conv.attrs, pool.attrs
      local node = { op = "conv2d_pool", def = fused_ops.conv2d_pool, inputs = { conv.inputs[1], conv.inputs[2],
        conv.inputs[3] }, outputs = { pool.outputs[1] }, line = conv.line,
        attrs = { stride = c.stride, padding = c.padding, dilation = c.dilation, groups = c.groups, act = act,
                  pool = kind, kernel_size = p.kernel_size, pool_stride = p.stride, pool_padding = p.padding,
                  count_include_pad = kind == "avg" and p.count_include_pad ~= false } }
      ir.values[pool.outputs[1]].node = node
      ir.values[conv.outputs[1]] = nil
      replaced[conv] = false
      for _, n in ipairs(between) do
        ir.values[n.outputs[1]] = nil
        replaced[n] = false
      end
      replaced[pool] = node
      count = count + 1
    end
  end
  IR.replace_nodes(ir, replaced)
  return ir, count
end
