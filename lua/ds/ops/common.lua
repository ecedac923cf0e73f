-- ops/common.lua: helpers the op families share (promotion rules, shape inference, API generation).
local dtype = require("ds.dtype")
local shape = require("ds.shape")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")
local D = require("ds.dispatch")
local args = require("ds.args")

local M = {}
local is_tensor = Tensor.is_tensor

local function set(list) local s = {}; for _, v in ipairs(list) do s[v] = true end; return s end
M.set = set
M.is_tensor = is_tensor
M.FLOAT = set { "f32", "f64" }
M.SIGNED = set { "f32", "f64", "i64", "i32" }
M.NUMERIC = set { "f32", "f64", "i64", "i32", "u8" }
M.ALL = set { "f32", "f64", "i64", "i32", "u8", "bool" }
M.BOOL = set { "bool" }

-- PyTorch's combination of a participant class with a weaker one (0-d tensors under tensors with dims): the
-- weaker widens the result only from a higher category (bool < integer < float)
local function combine(higher, lower)
  if higher == nil or lower == nil then return higher or lower end
  if dtype.is_float[higher] then return higher end
  if higher == "bool" or dtype.is_float[lower] then return dtype.promote(higher, lower) end
  return higher
end

-- common dtype of operands: tensors with dims, then 0-d tensors, then Lua numbers, each weaker than the one
-- before (torch.result_type)
function M.result_dtype(inputs)
  local dims, zero
  for _, x in ipairs(inputs) do
    if is_tensor(x) then
      if #x._shape > 0 then dims = dims and dtype.promote(dims, x.dtype) or x.dtype
      else zero = zero and dtype.promote(zero, x.dtype) or x.dtype end
    end
  end
  local dt = combine(dims, zero)
  if not dt then
    dt = "f32"
    for _, x in ipairs(inputs) do if type(x) == "boolean" then dt = "bool" end end
  end
  for _, x in ipairs(inputs) do
    if type(x) == "number" or type(x) == "boolean" then dt = dtype.with_scalar(dt, x) end
  end
  return dt
end

-- cast every operand to dt (numbers become 0-d constants)
function M.cast_all(inputs, dt)
  local out = {}
  for i, x in ipairs(inputs) do out[i] = D.cast(x, dt) end
  return out
end

-- promotion rule builders: map the common dtype to the kernel dtype
function M.promote_to(map)
  return function(inputs)
    local dt = map(M.result_dtype(inputs))
    for i = 1, #inputs do
      local x = inputs[i]
      if not (type(x) == "table" and rawget(x, "dtype") == dt) then return M.cast_all(inputs, dt) end
    end
    return inputs
  end
end
M.promote_same = M.promote_to(function(dt) return dt end)
M.promote_float = M.promote_to(function(dt) return dtype.is_float[dt] and dt or "f32" end)
M.promote_arith = M.promote_to(function(dt) return dt == "bool" and "i64" or dt end)
M.promote_bool = M.promote_to(function() return "bool" end)

-- infer: elementwise outputs broadcast all inputs
function M.infer_broadcast(out_dtype)
  return function(inputs, attrs, def)
    local s = inputs[1]._shape
    for i = 2, #inputs do s = shape.broadcast(s, inputs[i]._shape, def and def.name or "broadcast") end
    return { shape = s, dtype = out_dtype or inputs[1].dtype }
  end
end

-- Generic Lua API for an op: f(inputs..., positional attrs..., [options table]).
-- def.args names the positional attrs in order; def.ninputs the tensor inputs.
function M.api(def)
  local nin = def.ninputs or 1
  local argnames = def.args or {}
  local call = D.call
  if def.variadic then
    return function(list, ...)
      if type(list) ~= "table" or is_tensor(list) then
        errors.raise(def.name .. ": expects a list of tensors as its first argument")
      end
      local attrs = M.collect_attrs(def, argnames, 1, ...)
      return call(def, list, attrs)
    end
  end
  return function(...)
    local inputs = {}
    for i = 1, nin do inputs[i] = (select(i, ...)) end
    return call(def, inputs, M.collect_attrs(def, argnames, nin + 1, ...))
  end
end

local function is_options(v)
  return type(v) == "table" and getmetatable(v) == nil and v[1] == nil and next(v) ~= nil
end

function M.collect_attrs(def, argnames, first, ...)
  local n = select("#", ...)
  if n < first then return nil end
  local attrs, k = {}, 0
  for i = first, n do
    local v = select(i, ...)
    if i == n and is_options(v) then
      for key, val in pairs(v) do attrs[key] = val end
    elseif v ~= nil then
      k = k + 1
      local name = argnames[k]
      if not name then errors.raise(string.format("%s: too many arguments (%d)", def.name, n)) end
      attrs[name] = v
    else
      k = k + 1
    end
  end
  return attrs
end

-- the require name of the module level lines up the stack ("ds.ops.movement"), which declares the method
local function module_of(level)
  local src = debug.getinfo(level + 1, "S").source:gsub("^@", "/")
  return (src:match(".*/(ds/.+)%.lua$") or src):gsub("/init$", ""):gsub("/", ".")
end

-- register f as ds.<name> and Tensor:<name> (method = false to skip the method; args = the kinds of its
-- positional arguments, checked before f runs: lua/ds/args.lua; replace = true when f supersedes an export of a
-- module below: Tensor._define's replace)
M.functions = {}
function M.export(name, f, opts)
  if opts and opts.args then f = args.wrap(name, opts.args, f) end
  M.functions[name] = f
  if not (opts and opts.method == false) then Tensor._define(module_of(2), { [name] = f }, opts and opts.replace) end
end

return M
