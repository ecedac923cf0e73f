-- onnx/handlers/sequence.lua: ONNX import handlers of sequences and optionals known at import time: a sequence
-- is a Lua list of values, an optional a value or none, so their ops run in Lua and only the tensors they hold
-- reach the ds graph.
--[[ Sequence ops (SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase, SequenceLength,
  SplitToSequence, ConcatFromSequence) need their positions and split sizes at import time (consts; a graph
  input becomes a value the model is specialized on) and the split dim static; Optional, OptionalHasElement
  and OptionalGetElement need to know whether the optional holds a value. A sequence that must change length at
  run time (a Loop whose trips are counted at run time) cannot be expressed and is refused where it happens. ]]
local F = require("ds.ops")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local C = require("ds.onnx.import_containers")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, refuse = V.tensor, common.refuse

local sequence, is_sequence, optional = C.sequence, C.is_sequence, C.optional

-- the sequence value v, checked; op names the node in errors
local function seq_of(v, op)
  if not is_sequence(v) then refuse(op .. ": input 1 must be a sequence") end
  return v
end
local function copy(items)
  local out = {}
  for i, x in ipairs(items) do out[i] = x end
  return out
end

-- ONNX position p (0-based, negative from the end) in a sequence of n items -> 1-based index; `last` allows
-- p == n (an insert at the end)
local function index_of(p, n, op, last)
  local hi = last and n or n - 1
  if type(p) ~= "number" or p < -n or p > hi then
    refuse(string.format("%s: position %s is out of range for a sequence of %d tensors", op, tostring(p), n))
  end
  return (p < 0 and p + n or p) + 1
end
local function position(v, op) return V.ints(v, op .. ": position")[1] end

def("SequenceEmpty", { dtype = 1 }, function(_, at)
  local dt = types.DS[at.dtype]
  if not dt then refuse("SequenceEmpty: dtype " .. tostring(at.dtype) .. " is not supported by ds") end
  return sequence({}, dt)
end)

def("SequenceConstruct", {}, function(ins)
  local dt = V.dtype(ins[1])
  for k, v in ipairs(ins) do
    if V.dtype(v) ~= dt then
      refuse(string.format("SequenceConstruct: input %d is %s, input 1 %s", k, V.dtype(v), dt))
    end
  end
  return sequence(copy(ins), dt)
end)

def("SequenceInsert", {}, function(ins)
  local s = seq_of(ins[1], "SequenceInsert")
  if V.dtype(ins[2]) ~= s.dtype then
    refuse(string.format("SequenceInsert: a %s tensor inserted in a sequence of %s", V.dtype(ins[2]), s.dtype))
  end
  local items = copy(s.items)
  local at = ins[3] and index_of(position(ins[3], "SequenceInsert"), #items, "SequenceInsert", true) or #items + 1
  table.insert(items, at, ins[2])
  return sequence(items, s.dtype)
end)

def("SequenceErase", {}, function(ins)
  local s = seq_of(ins[1], "SequenceErase")
  local items = copy(s.items)
  if #items == 0 then refuse("SequenceErase: the sequence is empty") end
  table.remove(items, ins[2] and index_of(position(ins[2], "SequenceErase"), #items, "SequenceErase") or #items)
  return sequence(items, s.dtype)
end)

def("SequenceAt", {}, function(ins)
  local s = seq_of(ins[1], "SequenceAt")
  return s.items[index_of(position(ins[2], "SequenceAt"), #s.items, "SequenceAt")]
end)

def("SequenceLength", {}, function(ins)
  return V.const("i64", {}, { #seq_of(ins[1], "SequenceLength").items })
end)

def("SplitToSequence", { axis = 0, keepdims = 1 }, function(ins, at)
  local x = T(ins[1])
  local r = #x.shape
  local d = common.axis0(at.axis, r, "SplitToSequence") + 1
  local n = x.shape[d]
  if type(n) ~= "number" then refuse("SplitToSequence: the split dim must be static, got " .. tostring(n)) end
  local items = {}
  if not ins[2] then -- pieces of 1, the dim dropped unless keepdims
    for i = 1, n do items[i] = at.keepdims ~= 0 and x:narrow(d, i, 1) or x:select(d, i) end
    return sequence(items, x.dtype)
  end
  local split = V.ints(ins[2], "SplitToSequence: split")
  local sizes = {}
  if #V.shape(ins[2]) == 0 then -- equal chunks, the last smaller
    if split[1] < 1 then refuse("SplitToSequence: split must be positive, got " .. split[1]) end
    for start = 1, n, split[1] do sizes[#sizes + 1] = math.min(split[1], n - start + 1) end
  else
    local total = 0
    for i, s in ipairs(split) do
      if s < 0 then refuse("SplitToSequence: split sizes must not be negative") end
      sizes[i], total = s, total + s
    end
    if total ~= n then refuse(string.format("SplitToSequence: split sizes sum to %d, the dim is %d", total, n)) end
  end
  local start = 1
  for i, s in ipairs(sizes) do
    items[i] = x:narrow(d, start, s)
    start = start + s
  end
  return sequence(items, x.dtype)
end)

def("ConcatFromSequence", { axis = common.REQUIRED, new_axis = 0 }, function(ins, at)
  local s = seq_of(ins[1], "ConcatFromSequence")
  if #s.items == 0 then refuse("ConcatFromSequence: the sequence is empty") end
  local xs = {}
  for i, v in ipairs(s.items) do xs[i] = T(v) end
  local r = #xs[1].shape + (at.new_axis ~= 0 and 1 or 0)
  local d = common.axis0(at.axis, r, "ConcatFromSequence") + 1
  if at.new_axis ~= 0 then return F.stack(xs, d) end
  return F.cat(xs, d)
end)

-- SequenceMap: the body run on each position of the input sequence (additional inputs: a sequence gives its
-- item at that position, a tensor itself); each body output becomes a sequence
def("SequenceMap", { body = common.REQUIRED }, function(ins, at, node, _, ctx)
  local s = seq_of(ins[1], "SequenceMap")
  local nout = #at.body.output
  local results = {}
  for k = 1, nout do
    local tt = at.body.output[k].type and at.body.output[k].type.tensor_type
    results[k] = sequence({}, tt and types.DS[tt.elem_type or 0])
  end
  for i = 1, #s.items do
    local args = { s.items[i] }
    for k = 2, #node.input do
      local v = ins[k]
      if is_sequence(v) then
        if #v.items ~= #s.items then refuse("SequenceMap: the input sequences have different lengths") end
        v = v.items[i]
      end
      args[k] = v
    end
    for k, y in ipairs(ctx.run_graph(at.body, args)) do
      results[k].items[i], results[k].dtype = y, V.dtype(y)
    end
  end
  return unpack(results, 1, nout)
end)

-- ---- optionals ----
def("Optional", { type = false }, function(ins)
  return optional(ins[1])
end)

def("OptionalHasElement", {}, function(ins)
  local v = ins[1]
  local has = v ~= nil and (not C.is_optional(v) or v.value ~= nil)
  return V.const("bool", {}, { has and 1 or 0 })
end)

def("OptionalGetElement", {}, function(ins)
  local v = ins[1]
  if not C.is_optional(v) then return v end -- opset 18: a tensor or sequence is its own element
  if v.value == nil then refuse("OptionalGetElement: the optional is empty") end
  return v.value
end)

return OPS
