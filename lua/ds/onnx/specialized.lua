-- onnx/specialized.lua: an imported model that needs the values of some of its inputs to build its graph (a
-- Reshape whose shape, a Slice whose starts, a TopK whose K is a graph input): one ds.Graph per distinct
-- value of those inputs, traced on first use, callable and compilable like a ds.Graph.
--[[ ds graphs have static ranks and symbolic dims, so a shape that arrives as data is read when the model is
  called: the inputs the interpreter asked values of ("value inputs") become constants of a graph traced for
  their values, and the graph is cached under those values (like ds.compile's retrace per Lua number). An
  input whose value is asked only through a computation (Cast(shape), ...) is not known by name: then every
  small input (at most MAX_VALUE_ELEMENTS elements) is specialized on. ]]
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local compiler = require("ds.compile")
local V = require("ds.onnx.import_values")

local M = {}
M.MAX_VALUE_ELEMENTS = 64

local Specialized = {}
Specialized.__index = Specialized

-- trace(fixed) -> graph | nil, err, wanted (names of inputs whose values it asked for): the importer's
-- tracer with the inputs in `fixed` (name -> const) bound to values. inputs: the model's input names in
-- order; wanted: the value inputs found while loading.
function M.new(name, trace, inputs, wanted)
  local value_inputs = {}
  for nm in pairs(wanted) do value_inputs[nm] = true end
  return setmetatable({ name = name, trace = trace, inputs = inputs, value_inputs = value_inputs, graphs = {} },
    Specialized)
end
function M.is(v) return getmetatable(v) == Specialized end

-- the cache key of args: each value input's dtype, shape and values
local function key_of(self, args)
  local parts = {}
  for i, nm in ipairs(self.inputs) do
    if self.value_inputs[nm] then
      local t = args[i]
      parts[#parts + 1] = nm .. ":" .. t.dtype .. ":" .. table.concat(t.shape, "x") .. ":" ..
        (t:numel() > 0 and table.concat(t:reshape(-1):astype("f64"):totable(), ",") or "")
    end
  end
  return table.concat(parts, "|")
end

-- the graph for args (tracing it on a new key) and the args it takes (the value inputs left out)
function Specialized:graph_for(args)
  for i, nm in ipairs(self.inputs) do
    if not Tensor.is_tensor(args[i]) then
      errors.raise(string.format("%s: input %d (%s) must be a tensor, got %s", self.name, i, nm, type(args[i])))
    end
  end
  while true do
    local key = key_of(self, args)
    local g = self.graphs[key]
    if not g then
      local fixed = {}
      for i, nm in ipairs(self.inputs) do
        if self.value_inputs[nm] then fixed[nm] = V.const_of_tensor(args[i]) end
      end
      local err, wanted
      g, err, wanted = self.trace(fixed)
      if not g then
        local grew = false
        for nm in pairs(wanted) do
          if not self.value_inputs[nm] then self.value_inputs[nm], grew = true, true end
        end
        if not grew and tostring(err):find("must be a constant", 1, true) then
          for i, nm in ipairs(self.inputs) do -- asked through a computation: every small input
            if not self.value_inputs[nm] and args[i]:numel() <= M.MAX_VALUE_ELEMENTS then
              self.value_inputs[nm], grew = true, true
            end
          end
        end
        if not grew then error(err, 0) end
      else
        self.graphs[key] = g
      end
    end
    if g then
      local rest = {}
      for i, nm in ipairs(self.inputs) do if not self.value_inputs[nm] then rest[#rest + 1] = args[i] end end
      return g, rest, key
    end
  end
end

function Specialized:__call(...)
  local g, rest = self:graph_for({ ... })
  return g(unpack(rest))
end

function Specialized:__tostring()
  local names = {}
  for nm in pairs(self.value_inputs) do names[#names + 1] = nm end
  table.sort(names)
  return string.format("ONNX model %s (one graph per value of %s; %d traced)", self.name, table.concat(names, ", "),
    (function() local n = 0; for _ in pairs(self.graphs) do n = n + 1 end; return n end)())
end

-- ds.compile(specialized, opts): compiles each graph (with opts) when its values are first seen
local Compiled = {}
Compiled.__index = Compiled
function Specialized.__ds_compile(self, opts)
  return setmetatable({ model = self, opts = opts, compiled = {} }, Compiled)
end
function Compiled:__call(...)
  local g, rest, key = self.model:graph_for({ ... })
  local c = self.compiled[key]
  if not c then
    c = compiler.compile_graph(g, self.opts)
    self.compiled[key] = c
  end
  return c(unpack(rest))
end
function Compiled:__tostring() return "compiled " .. tostring(self.model) end

return M
