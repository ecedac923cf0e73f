-- onnx/import_containers.lua: ONNX sequences and optionals in the importer, and their passage in and out of a
-- traced graph (a sequence or optional graph input or output is carried as the tensors it holds).
--[[ Inside the graph interpreter a sequence is {items = list of values, dtype} and an optional {value = v or
  nil}; their ops run in Lua (handlers/sequence.lua). At the model's boundary (specialized.lua) a sequence is a
  Lua list of tensors (or of sequences, ...) and an optional its value or nil. The type of a graph input, its
  "kind", is {dtype = ds dtype or nil when not declared, onnx_type} for a tensor, {sequence = kind} or
  {optional = kind}. A graph output's "layout", found while tracing, is TENSOR, {items = {layout, ...}}, {some =
  layout} or NONE: the traced graph returns the tensors it holds in order, regroup() rebuilds the value. ]]
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")

local M = {}
M.TENSOR, M.NONE = "tensor", "none"

local Sequence, Optional = {}, {}
function M.sequence(items, dt) return setmetatable({ items = items, dtype = dt }, Sequence) end
function M.is_sequence(v) return getmetatable(v) == Sequence end
function M.optional(v) return setmetatable({ value = v }, Optional) end
function M.is_optional(v) return getmetatable(v) == Optional end

-- the kind of an ONNX TypeProto; what names the value in errors; the dim_params of its tensors' declared shapes
-- are added to the set params
function M.kind_of(tp, what, params)
  if tp and tp.tensor_type then
    for _, d in ipairs(tp.tensor_type.shape and tp.tensor_type.shape.dim or {}) do
      if d.dim_param then params[d.dim_param] = true end
    end
    local et = tp.tensor_type.elem_type or 0
    if et == 0 then return {} end -- element type not declared: any
    local dt = types.DS[et]
    if not dt then
      error(string.format("%s has element type %s, which ds does not support", what, types.NAME[et] or tostring(et)),
        0)
    end
    return { dtype = dt, onnx_type = et }
  elseif tp and tp.sequence_type then
    return { sequence = M.kind_of(tp.sequence_type.elem_type, what .. "'s elements", params) }
  elseif tp and tp.optional_type then
    return { optional = M.kind_of(tp.optional_type.elem_type, what .. "'s value", params) }
  end
  error(what .. " is neither a tensor, a sequence nor an optional (maps and sparse tensors are not supported)", 0)
end

local function describe(v) return Tensor.is_tensor(v) and "a tensor" or type(v) end

-- checks the argument arg given for a value of this kind; what names it in errors
function M.check(kind, arg, what)
  if kind.sequence then
    if type(arg) ~= "table" or Tensor.is_tensor(arg) then
      errors.raise(what .. " is a sequence: give a Lua list, got " .. describe(arg))
    end
    local n = 0
    for _ in pairs(arg) do n = n + 1 end
    if n ~= #arg then errors.raise(what .. " is a sequence: give a Lua list (keys 1..n), got other keys") end
    for i, x in ipairs(arg) do M.check(kind.sequence, x, what .. ", item " .. i) end
  elseif kind.optional then
    if arg ~= nil then M.check(kind.optional, arg, what) end
  elseif not Tensor.is_tensor(arg) then
    errors.raise(what .. " must be a tensor, got " .. describe(arg))
  elseif kind.dtype and arg.dtype ~= kind.dtype then
    errors.raise(string.format("%s is %s; the model declares %s", what, arg.dtype, kind.dtype))
  end
end

-- the structure of arg as a string: lengths, presence, each tensor's dtype and shape (a cache key)
function M.signature(kind, arg)
  if kind.sequence then
    local parts = {}
    for i, x in ipairs(arg) do parts[i] = M.signature(kind.sequence, x) end
    return "[" .. table.concat(parts, ",") .. "]"
  elseif kind.optional then
    return arg == nil and "none" or "some " .. M.signature(kind.optional, arg)
  end
  return arg.dtype .. "(" .. table.concat(arg.shape, "x") .. ")"
end

-- the tensors arg holds, in order, appended to out
function M.leaves(kind, arg, out)
  out = out or {}
  if kind.sequence then
    for _, x in ipairs(arg) do M.leaves(kind.sequence, x, out) end
  elseif kind.optional then
    if arg ~= nil then M.leaves(kind.optional, arg, out) end
  else
    out[#out + 1] = arg
  end
  return out
end

-- the importer value of arg: sequences and optionals rebuilt, each tensor t replaced by leaf(t, kind)
function M.value_of(kind, arg, leaf)
  if kind.sequence then
    local items = {}
    for i, x in ipairs(arg) do items[i] = M.value_of(kind.sequence, x, leaf) end
    return M.sequence(items, kind.sequence.dtype or (items[1] and items[1].dtype))
  elseif kind.optional then
    return M.optional(arg ~= nil and M.value_of(kind.optional, arg, leaf) or nil)
  end
  return leaf(arg, kind)
end

-- the layout of the importer value v, its tensors (ds tensors) appended to leaves
function M.flatten(v, leaves)
  if M.is_sequence(v) then
    local items = {}
    for i, x in ipairs(v.items) do items[i] = M.flatten(x, leaves) end
    return { items = items }
  elseif M.is_optional(v) then
    return v.value == nil and M.NONE or { some = M.flatten(v.value, leaves) }
  end
  leaves[#leaves + 1] = V.tensor(v)
  return M.TENSOR
end

-- the value of layout from the graph's results, starting at results[pos]: value, the next position
function M.regroup(layout, results, pos)
  if layout == M.TENSOR then return results[pos], pos + 1 end
  if layout == M.NONE then return nil, pos end
  if layout.some then return M.regroup(layout.some, results, pos) end
  local list = {}
  for i, l in ipairs(layout.items) do list[i], pos = M.regroup(l, results, pos) end
  return list, pos
end

return M
