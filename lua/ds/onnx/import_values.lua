-- onnx/import_values.lua: the values an imported ONNX graph computes with: ds tensors, and "consts" (small
-- tensors known at import time as Lua data, whose entries may be symbolic dims) that shape computations fold.
local ffi = require("ffi")
local Tensor = require("ds.tensor")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local F = require("ds.ops")
local sym = require("ds.sym")
local trace = require("ds.trace")

local M = {}
M.FOLD_LIMIT = 1024 -- elements a const keeps as Lua data (larger initializers are tensors only)

local Const = {}
Const.__index = Const

M.EXACT = 2 ^ 53 -- integers a Lua number holds exactly

-- dt: ds dtype; shape: list of numbers; data: flat list (numbers, booleans as 0/1, or symbolic dims); t: tensor.
-- Integer data made without its tensor (a fold's result) must be exact: from 2^53 on it is refused, not rounded.
function M.const(dt, shape, data, t)
  if not t and data and not dtype.is_float[dt] then
    for _, x in ipairs(data) do
      if type(x) == "number" and (x >= M.EXACT or x <= -M.EXACT) then
        error(string.format("an %s value of magnitude 2^53 or more (%.17g) cannot be folded exactly (Lua numbers " ..
          "round it)", dt, x), 0)
      end
    end
  end
  return setmetatable({ dtype = dt, shape = shape, data = data, t = t }, Const)
end
function M.is_const(v) return getmetatable(v) == Const end

-- a const of concrete tensor t; an i64 tensor holding values past 2^53 keeps them in t alone (data holds them
-- rounded, as parameters such as Slice's ends read them; inexact consts are not folded: common.all_const)
local function const_of_tensor(t)
  local data, inexact
  if t:numel() <= M.FOLD_LIMIT then
    data = t:numel() == 0 and {} or t:reshape(-1):totable()
    if t.dtype == "bool" then for i, v in ipairs(data) do data[i] = v and 1 or 0 end end
    if t.dtype == "i64" then
      local p = ffi.cast("const int64_t *", t:contiguous():data_ptr())
      for i = 0, #data - 1 do if p[i] >= M.EXACT or p[i] <= -M.EXACT then inexact = true end end
    end
  end
  local c = M.const(t.dtype, t.shape, data, t)
  c.inexact = inexact
  return c
end

-- a concrete tensor -> its const (Lua data when small)
function M.const_of_tensor(t) return trace.init_scope(const_of_tensor, t) end

-- a TensorProto -> a const (and a ds tensor for its data); what names it in errors. Element types ds lacks
-- are widened (types.lua: INT16 -> i32, UINT32 -> i64, ...)
local function tensor_of(tp, what)
  local dt, store = types.DS[tp.data_type or 0], types.STORAGE[tp.data_type or 0]
  if not dt then
    error(string.format("%s has element type %s, which ds does not support", what,
      types.NAME[tp.data_type or 0] or tostring(tp.data_type)), 0)
  end
  if tp.data_location == 1 then error(what .. " keeps its data in an external file, which ds does not read", 0) end
  local shape, n = {}, 1
  for i, d in ipairs(tp.dims or {}) do
    if d < 0 or d ~= math.floor(d) then error(what .. " has the invalid dim " .. tostring(d), 0) end
    shape[i] = d
    n = n * d
  end
  if n > 2 ^ 31 then error(what .. " has " .. n .. " elements", 0) end
  -- the data the file holds must fill the shape, checked before the tensor is made: memory follows the file's size
  local size = ffi.sizeof(store.ctype)
  local raw = tp.raw_data and #tp.raw_data > 0
  local field = tp[store.field] or {}
  if raw and #tp.raw_data ~= n * size then
    error(string.format("%s: raw_data has %d bytes, its shape %s of %s needs %d", what, #tp.raw_data,
      table.concat(shape, "x"), types.ONNX[dt] == tp.data_type and dt or types.NAME[tp.data_type], n * size), 0)
  elseif not raw and #field ~= n then
    error(string.format("%s holds %d values, its shape %s needs %d", what, #field, table.concat(shape, "x"), n), 0)
  end
  local t = F.zeros(shape, { dtype = dt })
  local p = ffi.cast(types.CTYPE[dt] .. " *", t:data_ptr())
  if raw and store.ctype == types.CTYPE[dt] then
    ffi.copy(p, tp.raw_data, n * size)
  elseif raw then -- a narrower stored type, widened element by element
    local src = ffi.cast("const " .. store.ctype .. " *", tp.raw_data)
    for i = 0, n - 1 do p[i] = src[i] end
  else
    for i = 1, n do p[i - 1] = field[i] end
  end
  return M.note_onnx_type(const_of_tensor(t), tp.data_type)
end

-- the ONNX element type of a value: noted where it is narrower than the value's ds dtype (types.lua: a FLOAT16
-- input is an f32 tensor), else the type of the dtype. CastLike reads it.
local onnx_types = setmetatable({}, { __mode = "k" })
function M.note_onnx_type(v, t)
  onnx_types[v] = types.ONNX[v.dtype] ~= t and t or nil
  return v
end
function M.onnx_type(v) return onnx_types[v] or types.ONNX[v.dtype] end

-- concrete even while tracing (the graph keeps it as state)
function M.tensor_of(tp, what) return trace.init_scope(tensor_of, tp, what) end

-- a const's data, which must be known (refuses big initializers)
function M.data(v, what)
  if not M.is_const(v) or not v.data then
    if M.on_value_wanted then M.on_value_wanted(v) end -- the importer notes which input it was (specialized.lua)
    error((what or "this input") ..
      " must be a constant (an initializer or a Constant node, or computed from shapes)", 0)
  end
  return v.data
end

-- a list of plain integers (axes, pads, ...)
function M.ints(v, what)
  local d = M.data(v, what)
  for _, x in ipairs(d) do
    if type(x) ~= "number" then
      error((what or "this input") .. " must hold numbers, not the dynamic dim " .. tostring(x), 0)
    end
  end
  return d
end

-- the ds tensor of a value (a const becomes a concrete tensor: graph state when traced)
function M.tensor(v)
  if Tensor.is_tensor(v) then return v end
  if v.t then return v.t end
  for _, x in ipairs(v.data) do
    if sym.is(x) then
      error("a shape computed from the dynamic dim " .. tostring(x) .. " is used as tensor data, which ds cannot " ..
        "express (only as a shape)", 0)
    end
  end
  local t = trace.init_scope(function() -- concrete even while tracing: graph state
    if #v.shape == 0 then return F.tensor(v.data[1], { dtype = v.dtype }) end
    if #v.data == 0 then return F.zeros(v.shape, { dtype = v.dtype }) end
    local data = v.data
    if v.dtype == "bool" then
      data = {}
      for i, x in ipairs(v.data) do data[i] = x ~= 0 end
    end
    return F.tensor(data, { dtype = v.dtype }):reshape(v.shape)
  end)
  v.t = t
  return t
end

-- the shape of a value (entries may be symbolic dims)
function M.shape(v)
  if M.is_const(v) then return v.shape end
  return v.shape
end

function M.dtype(v) return v.dtype end

return M
