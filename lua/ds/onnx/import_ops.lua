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

-- ---- integer attributes: every one in range before any handler computes with it ----
local MAXDIM = require("ds.shape").MAXDIM
-- attributes that hold axes: of a tensor of at most MAXDIM dims, in [-MAXDIM, MAXDIM] (a handler checks its rank)
local AXES = { axis = true, axes = true, perm = true, batch_axis = true, time_axis = true, new_axis = true,
  scan_input_axes = true, scan_output_axes = true }
-- attributes whose int64 values are sentinels (Slice's INT64_MAX "to the end") or data (Constant's values)
local ANY_INT = { starts = true, ends = true, value_int = true, value_ints = true }
M.INT_LIMIT = 2 ^ 31 - 1 -- every other integer attribute (sizes, strides, pads, counts, flags) within +-this
local function check_int(name, v)
  if type(v) ~= "number" or v ~= math.floor(v) then refuse("attribute " .. name .. " holds " .. tostring(v) .. ", not an integer") end
  if AXES[name] and (v < -MAXDIM or v > MAXDIM) then
    refuse(string.format("attribute %s = %.17g is out of range: an axis of a tensor of at most %d dims is in [-%d, %d]",
      name, v, MAXDIM, MAXDIM, MAXDIM))
  end
  if not ANY_INT[name] and (v < -M.INT_LIMIT or v > M.INT_LIMIT) then
    refuse(string.format("attribute %s = %.17g is out of range (at most 2^31-1 in magnitude)", name, v))
  end
end

-- refuses an attribute the op's handler does not list, one given twice or without a name, a reference attribute,
-- an attribute of unknown type, an integer attribute out of range
function M.check_attrs(node)
  local h = OPS[node.op_type]
  local seen = {}
  for k, a in ipairs(node.attribute or {}) do
    if not a.name or a.name == "" then refuse("attribute " .. k .. " has no name") end
    if seen[a.name] then refuse("attribute " .. a.name .. " is given twice") end
    seen[a.name] = true
    if h.attrs[a.name] == nil then refuse("attribute " .. a.name .. " is not supported by ds.onnx.load") end
    if a.ref_attr_name then refuse("attribute references are not supported") end
    if not ATTR_VALUE[a.type or 0] then refuse("attribute " .. a.name .. " has an unknown type") end
    if a.type == 2 then check_int(a.name, a.i or 0) end
    if a.type == 7 then for _, v in ipairs(a.ints) do check_int(a.name, v) end end
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
