-- onnx/specialized.lua: an imported model whose graph depends on more than its inputs' dtypes and shapes (the
-- values of some inputs, the lengths of its sequences): one ds.Graph per distinct key, traced on first use,
-- callable and compilable like a ds.Graph.
--[[ ds graphs have static ranks and symbolic dims, so a shape that arrives as data (a Reshape whose shape, a
  Slice whose starts, a TopK whose K is a graph input) is read when the model is called: the inputs the
  interpreter asked values of ("value inputs") become constants of a graph traced for their values, and the
  graph is cached under those values (like ds.compile's retrace per Lua number). An input whose value is asked
  only through a computation (Cast(shape), ...) is not known by name: then every small input (at most
  MAX_VALUE_ELEMENTS elements) is specialized on. A sequence input (a Lua list of tensors) or an optional input
  (a value or nil) is keyed on its structure (length, presence, each tensor's dtype and shape) and its tensors
  are inputs of the graph; sequence and optional outputs are the graph's tensors regrouped
  (import_containers.lua): a Lua list, a value or nil. ]]
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local compiler = require("ds.compile")
local V = require("ds.onnx.import_values")
local C = require("ds.onnx.import_containers")

local M = {}
M.MAX_VALUE_ELEMENTS = 64

local Specialized = {}
Specialized.__index = Specialized
local TENSOR_KIND = {} -- the kind of a tensor input (any dtype: the graph checks it)

-- trace(fixed, shaped) -> graph, output layouts | nil, err, wanted (names of inputs whose values it asked for):
-- the importer's tracer with the inputs in `fixed` (name -> importer value) bound to values and the sequence
-- and optional inputs in `shaped` (name -> argument) traced with the structure of these arguments. inputs: the
-- model's input names in order; kinds: name -> kind of each sequence or optional input; wanted: the value
-- inputs found while loading; first: {graph =, outputs =} already traced for the key "" (or nil).
function M.new(name, trace, inputs, kinds, wanted, first)
  local value_inputs = {}
  for nm in pairs(wanted) do value_inputs[nm] = true end
  return setmetatable({ name = name, trace = trace, inputs = inputs, kinds = kinds, value_inputs = value_inputs,
    graphs = { [""] = first } }, Specialized)
end
function M.is(v) return getmetatable(v) == Specialized end

-- the cache key of args: each value input's structure and values, each other sequence or optional's structure
local function key_of(self, args)
  local parts = {}
  for i, nm in ipairs(self.inputs) do
    local kind = self.kinds[nm] or TENSOR_KIND
    if self.value_inputs[nm] then
      local values = {}
      for k, t in ipairs(C.leaves(kind, args[i])) do
        values[k] = t:numel() > 0 and table.concat(t:reshape(-1):astype("f64"):totable(), ",") or ""
      end
      parts[#parts + 1] = nm .. ":" .. C.signature(kind, args[i]) .. ":" .. table.concat(values, ";")
    elseif self.kinds[nm] then
      parts[#parts + 1] = nm .. ":" .. C.signature(kind, args[i])
    end
  end
  return table.concat(parts, "|")
end

-- the elements of the tensors arg holds
local function numel(kind, arg)
  local n = 0
  for _, t in ipairs(C.leaves(kind, arg)) do n = n + t:numel() end
  return n
end

-- the traced graph for args ({graph =, outputs = layouts}, tracing it on a new key), the tensors it takes (the
-- value inputs left out, sequences and optionals flattened) and its key
function Specialized:graph_for(args)
  for i, nm in ipairs(self.inputs) do
    local what = string.format("%s: input %d (%s)", self.name, i, nm)
    if self.kinds[nm] then C.check(self.kinds[nm], args[i], what)
    elseif not Tensor.is_tensor(args[i]) then errors.raise(what .. " must be a tensor, got " .. type(args[i])) end
  end
  while true do
    local key = key_of(self, args)
    local entry = self.graphs[key]
    if not entry then
      local fixed, shaped = {}, {}
      for i, nm in ipairs(self.inputs) do
        if self.value_inputs[nm] then
          fixed[nm] = C.value_of(self.kinds[nm] or TENSOR_KIND, args[i], V.const_of_tensor)
        elseif self.kinds[nm] then
          shaped[nm] = args[i]
        end
      end
      local g, outputs, wanted = self.trace(fixed, shaped)
      if g then
        entry = { graph = g, outputs = outputs }
        self.graphs[key] = entry
      else
        local err, grew = outputs, false
        for nm in pairs(wanted) do
          if not self.value_inputs[nm] then self.value_inputs[nm], grew = true, true end
        end
        if not grew and tostring(err):find("must be a constant", 1, true) then
          for i, nm in ipairs(self.inputs) do -- asked through a computation: every small input
            if not self.value_inputs[nm] and numel(self.kinds[nm] or TENSOR_KIND, args[i]) <= M.MAX_VALUE_ELEMENTS then
              self.value_inputs[nm], grew = true, true
            end
          end
        end
        if not grew then error(err, 0) end
      end
    end
    if entry then
      local rest = {}
      for i, nm in ipairs(self.inputs) do
        if not self.value_inputs[nm] then C.leaves(self.kinds[nm] or TENSOR_KIND, args[i], rest) end
      end
      return entry, rest, key
    end
  end
end

-- the model's outputs from the graph's results: sequences and optionals regrouped
local function regroup(entry, ...)
  local results, outs, pos = { ... }, {}, 1
  for k, layout in ipairs(entry.outputs) do outs[k], pos = C.regroup(layout, results, pos) end
  return unpack(outs, 1, #entry.outputs)
end

function Specialized:__call(...)
  local entry, rest = self:graph_for({ ... })
  return regroup(entry, entry.graph(unpack(rest)))
end

function Specialized:__tostring()
  local names = {}
  for nm in pairs(self.value_inputs) do names[#names + 1] = "the value of " .. nm end
  for nm in pairs(self.kinds) do
    if not self.value_inputs[nm] then names[#names + 1] = "the structure of " .. nm end
  end
  table.sort(names)
  local n = 0
  for _ in pairs(self.graphs) do n = n + 1 end
  if #names == 0 then return string.format("ONNX model %s (sequence or optional outputs)", self.name) end
  return string.format("ONNX model %s (one graph per %s; %d traced)", self.name, table.concat(names, ", "), n)
end

-- ds.compile(specialized, opts): compiles each graph (with opts) when its key is first seen
local Compiled = {}
Compiled.__index = Compiled
function Specialized.__ds_compile(self, opts)
  return setmetatable({ model = self, opts = opts, compiled = {} }, Compiled)
end
function Compiled:__call(...)
  local entry, rest, key = self.model:graph_for({ ... })
  local c = self.compiled[key]
  if not c then
    c = compiler.compile_graph(entry.graph, self.opts)
    self.compiled[key] = c
  end
  return regroup(entry, c(unpack(rest)))
end
function Compiled:__tostring() return "compiled " .. tostring(self.model) end

return M
