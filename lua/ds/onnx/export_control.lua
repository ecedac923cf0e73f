-- onnx/export_control.lua: the ONNX forms of ds.cond (If) and ds.while_loop (Loop), with their sub-graphs;
-- returns them by op name (FORMS[op](w, n), as onnx/export_ops.lua's) for onnx/export.lua to merge.
--[[ A ds sub-graph takes its operands, then one input per captured outer value; it returns its results, then
  the new values of the captures it writes (attrs.written). ONNX sub-graphs read outer names directly, so the
  captures bind to the node's input names. cond -> If: both branches return results + written captures.
  while_loop -> Loop with no trip limit and the loop vars + written captures carried; the body runs the ds
  body, then the ds cond on the new values (the Loop's cond output); the first test runs before the Loop. ]]
local A = require("ds.onnx.attr")

local M = {}

local function bool_scalar(w, pred, pred_dtype)
  return w:one("Reshape", { w:cast(pred, pred_dtype, "bool"), w:i64s({}) })
end

-- a GraphProto of nodes whose results are `results` (names), typed like metas
local function graph_proto(w, name, nodes, results, metas, inputs)
  local outputs = {}
  local all = nodes
  for k, r in ipairs(results) do
    local out = w:fresh(name .. "_out")
    all[#all + 1] = { op_type = "Identity", input = { r }, output = { out }, name = w:fresh("n_Identity") }
    outputs[k] = w:value_info(out, metas[k], name .. " result " .. k, false)
  end
  return { name = w:fresh(name), node = all, output = outputs, input = inputs or {} }
end

M.cond = function(w, n)
  local a = n.node.attrs
  local function branch(g, label)
    local results
    local nodes = w:subgraph_nodes(function()
      local bind = {}
      for j, id in ipairs(g.inputs) do bind[id] = n.ins[j + 1] end
      local names = w:write_graph(g, bind)
      results = {}
      for k, v in ipairs(g.outputs) do results[k] = names[v] end
    end)
    return graph_proto(w, label, nodes, results, n.outm)
  end
  local then_g, else_g = branch(a.then_graph, "then"), branch(a.else_graph, "else")
  w:node("If", { bool_scalar(w, n.ins[1], n.inm[1].dtype) }, { then_branch = A.graph(then_g),
    else_branch = A.graph(else_g) },
    n.outs)
end

M.while_loop = function(w, n)
  local a = n.node.attrs
  if a.reads then
    error(string.format("ds.onnx.export: while_loop (%s) is the reverse loop of a traced loop's gradient: it reads the "
      .. "trips its forward loop saves in ds's loop runtime, which has no ONNX form (export the forward only)",
      n.node.line or "?"), 0)
  end
  local nv = a.nresults
  local ncap = #n.ins - nv
  local written_slot = {}
  for j, k in ipairs(a.written) do written_slot[k] = j end
  -- the ds graph's inputs bound to: vars -> vars[i], capture k -> caps[k]
  local function bind_of(g, vars, caps)
    local bind = {}
    for i = 1, nv do bind[g.inputs[i]] = vars[i] end
    for k = 1, ncap do bind[g.inputs[nv + k]] = caps[k] end
    return bind
  end
  local outer_caps = {}
  for k = 1, ncap do outer_caps[k] = n.ins[nv + k] end
  local function run_cond(vars, caps)
    local names = w:write_graph(a.cond_graph, bind_of(a.cond_graph, vars, caps))
    local pv = a.cond_graph.outputs[1]
    return bool_scalar(w, names[pv], a.cond_graph.values[pv].dtype)
  end
  local first = run_cond({ unpack(n.ins, 1, nv) }, outer_caps)
  local carried_init, carried_metas = {}, {}
  for i = 1, nv do carried_init[i], carried_metas[i] = n.ins[i], n.inm[i] end
  for j, k in ipairs(a.written) do carried_init[nv + j], carried_metas[nv + j] = n.ins[nv + k], n.inm[nv + k] end
  local body_inputs, results = {}, {}
  local iter, cond_in = w:fresh("iter"), w:fresh("cond_in")
  body_inputs[1] = w:value_info(iter, { dtype = "i64", shape = {} }, "loop counter")
  body_inputs[2] = w:value_info(cond_in, { dtype = "bool", shape = {} }, "loop condition")
  local carried = {}
  for i, m in ipairs(carried_metas) do
    carried[i] = w:fresh("carried")
    body_inputs[#body_inputs + 1] = w:value_info(carried[i], m, "loop value " .. i, false)
  end
  local nodes = w:subgraph_nodes(function()
    local caps = {}
    for k = 1, ncap do caps[k] = written_slot[k] and carried[nv + written_slot[k]] or outer_caps[k] end
    local names = w:write_graph(a.body_graph, bind_of(a.body_graph, carried, caps))
    local new_vars, new_caps = {}, {}
    for i = 1, nv do new_vars[i] = names[a.body_graph.outputs[i]] end
    for k = 1, ncap do new_caps[k] = caps[k] end
    for j, k in ipairs(a.written) do new_caps[k] = names[a.body_graph.outputs[nv + j]] end
    results[1] = run_cond(new_vars, new_caps)
    for i = 1, nv do results[i + 1] = new_vars[i] end
    for j, k in ipairs(a.written) do results[nv + 1 + j] = new_caps[k] end
  end)
  local metas = { { dtype = "bool", shape = {} } }
  for i, m in ipairs(carried_metas) do metas[i + 1] = m end
  local body = graph_proto(w, "body", nodes, results, metas, body_inputs)
  local ins = { "", first }
  for i, x in ipairs(carried_init) do ins[2 + i] = x end
  w:node("Loop", ins, { body = A.graph(body) }, n.outs)
end

return M
