-- graph_dot.lua: a graph (ds.Graph, traced or compiled) as Graphviz dot: ops as boxes (attrs in the label, source
-- line as tooltip), inputs, state, constants and outputs, state writes as dashed edges; each fused region of a
-- compiled graph (fused chain, product or convolution with epilogue) drawn as a cluster around the ops it runs as
-- one kernel.
local S = require("ds.shape")
local graphviz = require("ds.graphviz")

local M = {}

local q = graphviz.quote

local function vtype(v) return v and (v.dtype .. " " .. S.str(v.shape)) or "" end

-- g: a ds.Graph; attrs_text(node) -> the text of its attrs shown in its box; returns the dot text
function M.dot(g, attrs_text)
  local out = { "digraph " .. q(g.name or "graph") .. " {",
                '  rankdir=TB; node [fontname="Helvetica", fontsize=10]; edge [fontsize=8];' }
  local producer, edges, nid = {}, {}, 0
  local function add(s) out[#out + 1] = s end
  local function op_node(op, attrs, line, inputs, outputs, indent)
    nid = nid + 1
    local id = "n" .. nid
    local label = op .. (attrs ~= "" and (" {" .. attrs .. "}") or "") .. (line and ("\n" .. line) or "")
    add(string.format('%s%s [shape=box, style="rounded,filled", fillcolor="#eeeeee", label=%s, tooltip=%s];',
      indent, id, q(label), q(line or op)))
    for _, v in ipairs(inputs) do edges[#edges + 1] = { v, id } end
    for _, v in ipairs(outputs) do producer[v] = id end
  end
  for i, v in ipairs(g.inputs) do
    producer[v] = "in" .. i
    add(string.format('  in%d [shape=invhouse, style=filled, fillcolor="#d8e8ff", label=%s];', i,
      q(g.specs[i].name .. "\n" .. vtype(g.values[v]))))
  end
  for i, s in ipairs(g.state) do
    producer[s.value] = "st" .. i
    add(string.format('  st%d [shape=cylinder, style=filled, fillcolor="#fff0c8", label=%s];', i,
      q(s.name .. "\n" .. vtype(g.values[s.value]))))
  end
  for i, c in ipairs(g.consts) do
    producer[c.value] = "c" .. i
    add(string.format("  c%d [shape=plaintext, label=%s];", i, q(c.number ~= nil and tostring(c.number) or c.name)))
  end
  for k, node in ipairs(g.nodes) do
    local members = node.program and node.program.members
    if members then
      add(string.format('  subgraph cluster_%d { style="rounded,filled"; fillcolor="#eef7ee"; color="#4a9a4a"; ' ..
        'label=%s;', k, q(node.op .. " (one kernel)")))
      if node.op ~= "fused" then -- matmul_ep, matmul_packed_ep: the product feeds the chain as its input 1
        op_node(node.op == "matmul_ep" and "matmul" or "matmul_packed", "", node.line,
          { node.inputs[1], node.inputs[2] }, { node.program.inputs[1] }, "    ")
      end
      for _, m in ipairs(members) do op_node(m.op, attrs_text(m), m.line, m.inputs, m.outputs, "    ") end
      add("  }")
    else
      op_node(node.op, attrs_text(node), node.line, node.inputs, node.outputs, "  ")
    end
  end
  for k, v in ipairs(g.outputs) do
    add(string.format('  out%d [shape=house, style=filled, fillcolor="#d8ffd8", label=%s];', k, q("output " .. k)))
    edges[#edges + 1] = { v, "out" .. k }
  end
  for _, w in ipairs(g.state_writes) do edges[#edges + 1] = { w.value, "st" .. w.state, write = true } end
  for _, e in ipairs(edges) do
    if producer[e[1]] then
      add(string.format("  %s -> %s [label=%s%s];", producer[e[1]], e[2], e.write and q("write") or
        q(vtype(g.values[e[1]])), e.write and ', style=dashed, color="#aa6600"' or ""))
    end
  end
  add("}")
  return table.concat(out, "\n") .. "\n"
end

return M
