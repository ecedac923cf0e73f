-- onnx/import_ops.lua: the table of ONNX import handlers, merged from the families in onnx/handlers/
-- (one per concern), with the attribute check and the call that runs a node's handler.
--[[ OPS[op_type] = {attrs = {name = default | REQUIRED}, run = function(ins, at, node, opset) -> outputs}.
  ins are values (ds tensors or consts, import_values.lua; nil for an omitted optional input); at the
  attributes by name, defaults filled in. An attribute not listed is refused before the graph is traced
  (check_attrs), a listed attribute with a value ds does not implement is refused by its handler.
  ONNX axes are 0-based (negative from the end); ds dims are 1-based (negative from the end): dim(a). ]]
local common = require("ds.onnx.handlers.common")

local M = {}
local OPS = {}
M.OPS = OPS
local REQUIRED = common.REQUIRED
local refuse = common.refuse
M.FAMILIES = { "elementwise", "activation", "nn", "reduce", "shape", "index", "loss", "value_shaped", "rnn", "control", "sequence", "resize", "signal", "quantize" }
for _, family in ipairs(M.FAMILIES) do
  for name, h in pairs(require("ds.onnx.handlers." .. family)) do
    assert(not OPS[name], "ONNX op " .. name .. " has handlers in two families")
    h.family = family
    OPS[name] = h
  end
end

-- ---- attribute values ----
local ATTR_VALUE = { [1] = "f", [2] = "i", [3] = "s", [4] = "t", [5] = "g", [6] = "floats", [7] = "ints",
  [8] = "strings", [13] = "tp", [14] = "type_protos" }
local function attr_value(a)
  local field = ATTR_VALUE[a.type or 0]
  if not field then refuse("attribute " .. tostring(a.name) .. " has a type ds does not read") end
  local v = a[field]
  if v == nil and (field == "floats" or field == "ints" or field == "strings" or field == "type_protos") then v = {} end
  return v
end

-- refuses an attribute the op's handler does not list, a reference attribute, an attribute of unknown type
function M.check_attrs(node)
  local h = OPS[node.op_type]
  for _, a in ipairs(node.attribute or {}) do
    if h.attrs[a.name] == nil then
      refuse("attribute " .. tostring(a.name) .. " is not supported by ds.onnx.load")
    end
    if a.ref_attr_name then refuse("attribute references are not supported") end
    if not ATTR_VALUE[a.type or 0] then refuse("attribute " .. tostring(a.name) .. " has an unknown type") end
  end
end

-- the outputs of node (a list) on its input values ins; ctx = {opset, run_graph(subgraph, inputs) -> outputs}
function M.run(node, ins, opset, ctx)
  local h = OPS[node.op_type]
  local at = {}
  for _, a in ipairs(node.attribute or {}) do at[a.name] = attr_value(a) end
  for k, d in pairs(h.attrs) do
    if at[k] == nil then
      if d == REQUIRED then refuse("attribute " .. k .. " is required") end
      if d ~= false then at[k] = d end
    end
  end
  local outs = { h.run(ins, at, node, opset, ctx) }
  return outs
end

return M
