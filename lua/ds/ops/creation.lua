-- ops/creation.lua: tensors from Lua values and factories (full, zeros, ones, empty, arange,
-- linspace, eye, *_like); full/arange are table ops so they trace like any other.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local Tensor = require("ds.tensor")
local dsffi = require("ds.ffi")
local state = require("ds.state")
local sym = require("ds.sym")
local sizes_and_opts = require("ds.ops.sizes").sizes_and_opts
local first = #D.list + 1 -- this family's ops, returned at the end
local ffi = dsffi.ffi

local function check_dtype(dt, opname)
  local n = dtype.normalize(dt or "f32")
  if not n then errors.raise(string.format("%s: unknown dtype '%s'", opname, tostring(dt))) end
  return n
end

D.define {
  name = "full", doc = "a tensor of shape filled with value (x:fill_(value) in place)", inplace_name = "fill_",
  kind = "creation", kernel = "ds_fill_%s", dtypes = C.set(dtype.names), ninputs = 0,
  attrs = { { "shape", "ints" }, { "value", "float", 0 }, { "dtype", "dtype", "f32" } },
  infer = function(_, attrs) return { shape = attrs.shape, dtype = attrs.dtype } end,
  kernel_dtype = function(_, outputs) return outputs[1].dtype end,
  pack = function(attrs) return { attrs.value } end,
}

D.define {
  name = "arange",
  doc = "length values start, start + step, ...; called as ds.arange(start, stop, step), stop excluded",
  kind = "creation", kernel = "ds_arange_%s", dtypes = C.set { "f32", "f64", "i64", "i32" }, ninputs = 0,
  attrs = { { "start", "float" }, { "step", "float" }, { "length", "int" }, { "dtype", "dtype", "f32" } },
  infer = function(_, attrs) return { shape = { attrs.length }, dtype = attrs.dtype } end,
  kernel_dtype = function(_, outputs) return outputs[1].dtype end,
  pack = function(attrs) return { attrs.start, attrs.step } end,
}


local full = D.by_name.full
local function full_of(opname, value)
  return function(...)
    local shape, opts = sizes_and_opts(opname, ...)
    return D.call(full, {}, { shape = shape, value = value, dtype = check_dtype(opts.dtype, opname) })
  end
end
C.export("zeros", full_of("zeros", 0), { method = false })
C.export("ones", full_of("ones", 1), { method = false })
-- a fill value: any number (NaN and infinities too) or a boolean, as the number full packs
local function fill_value(opname, value)
  if type(value) == "boolean" then return value and 1 or 0 end
  if type(value) ~= "number" then
    errors.raise(string.format("%s: value must be a number or a boolean, got %s", opname, type(value)))
  end
  return value
end

-- full(size, value, {dtype}): a boolean value makes a bool tensor, as PyTorch infers it
C.export("full", function(size, value, opts)
  if type(size) == "number" then size = { size } end
  opts = options.check(opts, "full", { dtype = "dtype" })
  local dt = opts.dtype or type(value) == "boolean" and "bool" or nil
  local shape = sizes_and_opts("full", size)
  return D.call(full, {}, { shape = shape, value = fill_value("full", value), dtype = check_dtype(dt, "full") })
end, { method = false, args = { "number|table", "any", "table?" } })
C.export("empty", function(...)
  local shape, opts = sizes_and_opts("empty", ...)
  local dt = check_dtype(opts.dtype, "empty")
  if state.trace then return D.call(full, {}, { shape = shape, value = 0, dtype = dt }) end
  return Tensor._empty(dt, shape, "empty")
end, { method = false })

local function like(value)
  return function(x, opts)
    local dt = check_dtype(opts and opts.dtype or x.dtype, "like")
    return D.call(full, {}, { shape = x._shape, value = value, dtype = dt })
  end
end
C.export("zeros_like", like(0), { args = { "tensor", "table?" } })
C.export("ones_like", like(1), { args = { "tensor", "table?" } })
C.export("full_like", function(x, v, opts)
  opts = options.check(opts, "full_like", { dtype = "dtype" })
  return D.call(full, {}, { shape = x._shape, value = fill_value("full_like", v),
    dtype = check_dtype(opts.dtype or x.dtype, "full_like") })
end, { args = { "tensor", "any", "table?" } })
C.export("empty_like", like(0), { args = { "tensor", "table?" } })
C.export("new_zeros", function(x, ...)
  local s = sizes_and_opts("new_zeros", ...)
  return D.call(full, {}, { shape = s, value = 0, dtype = x.dtype })
end)

-- the length of arange(start, stop, step): a number, or a symbolic size when start or stop is symbolic (then step
-- must be a nonzero integer: the length is a floor division of the symbolic span)
local function arange_length(start, stop, step)
  if type(start) == "number" and type(stop) == "number" then return math.max(0, math.ceil((stop - start) / step)) end
  if step ~= math.floor(step) then
    errors.raise(string.format("arange: %s is symbolic (%s), so step must be an integer, got %s",
      sym.is(start) and "start" or "end", tostring(sym.is(start) and start or stop), tostring(step)))
  end
  local span = step > 0 and sym.sub(stop, start) or sym.sub(start, stop)
  return sym.floordiv(sym.add(span, math.abs(step) - 1), math.abs(step))
end

-- the arange op; bf16/f16/i8 values are computed in f32/i32 and cast (as PyTorch's CPU arange)
local function arange(start, step, len, dt)
  local up = dtype.compute[dt]
  local t = D.call(D.by_name.arange, {}, { start = start, step = step, length = len, dtype = up or dt })
  return up and t:astype(dt) or t
end

-- arange(end) | arange(start, end[, step]) [, opts]: end excluded, as in PyTorch; start and end may be symbolic
-- sizes while tracing (arange(1, T + 1) for positions)
C.export("arange", function(a, b, c, d)
  local opts = {}
  local args = { a, b, c, d }
  for i = 4, 1, -1 do
    if type(args[i]) == "table" and not sym.is(args[i]) then opts = args[i]; args[i] = nil; break end
  end
  local start, stop, step
  if args[1] == nil then errors.raise("arange: expects arange(end) or arange(start, end[, step]) [, opts]") end
  if args[2] == nil then start, stop, step = 0, args[1], 1 else start, stop, step = args[1], args[2], args[3] or 1 end
  for _, p in ipairs { { "start", start }, { "end", stop }, { "step", step } } do
    local v = p[2]
    if sym.is(v) and p[1] == "step" then
      errors.raise("arange: step is symbolic (" .. tostring(v) .. "); only start and end may be symbolic sizes")
    elseif type(v) ~= "number" and not sym.is(v) then
      errors.raise(string.format("arange: %s must be a number or a symbolic size, got %s", p[1], type(v)))
    end
  end
  options.check(opts, "arange", { dtype = "dtype" })
  if step == 0 then errors.raise("arange: step must be nonzero") end
  local len = arange_length(start, stop, step)
  local dt = opts.dtype
  if not dt then
    local function int(v) return sym.is(v) or v == math.floor(v) end
    dt = int(start) and int(stop) and int(step) and "i64" or "f32"
  end
  return arange(start, step, len, check_dtype(dt, "arange"))
end, { method = false, args = { "number|size|table", "number|size|table?", "number|size|table?", "table?" } })

C.export("linspace", function(start, stop, steps, opts)
  if type(steps) ~= "number" or steps < 0 then errors.raise("linspace: steps must be a non-negative number") end
  local step = steps > 1 and (stop - start) / (steps - 1) or 0
  return arange(start, step, steps, check_dtype(opts and opts.dtype, "linspace"))
end, { method = false, args = { "number", "number", "integer", "table?" } })

C.export("eye", function(n, m, opts)
  if type(m) == "table" then opts, m = m, nil end
  m = m or n
  local dt = check_dtype(opts and opts.dtype, "eye")
  if state.trace then   -- (n, m): row index == column index, as ops (a traced tensor has no storage to fill)
    local F = C.functions
    local rows = F.arange(n, { dtype = "i64" }):reshape(n, 1)
    return F.eq(rows, F.arange(m, { dtype = "i64" }):reshape(1, m)):astype(dt)
  end
  local out = C.functions.zeros(n, m, { dtype = dt })
  local k = math.min(n, m)
  if k > 0 then
    -- the diagonal is a strided view with stride m + 1
    Tensor._view(out, { k }, { m + 1 }, 0):fill_(1)
  end
  return out
end, { method = false, args = { "integer", "integer|table?", "table?" } })

-- ds.tensor(nested tables | number | boolean, {dtype = ...})
local function nested_shape(v, opname)
  local shape = {}
  local cur = v
  while type(cur) == "table" and not Tensor.is_tensor(cur) do
    -- depth-checked: a cyclic table (t[1] = t) would nest forever
    if #shape == S.MAXDIM then
      errors.raise(string.format("%s: nested tables deeper than %d dims (or a table containing itself)", opname,
        S.MAXDIM))
    end
    shape[#shape + 1] = #cur
    if #cur == 0 then break end
    cur = cur[1]
  end
  return shape
end

local function flatten_into(v, shape, depth, out, opname)
  if depth > #shape then
    if type(v) == "boolean" then v = v and 1 or 0 end
    if Tensor.is_tensor(v) then
      -- a leaf may be a 0-d tensor: its value is read, as torch.tensor copies it
      if #v._shape ~= 0 then
        errors.raise(opname .. ": a list element is a tensor of shape " .. S.str(v._shape)
          .. "; only 0-d tensors (or ds.stack)")
      end
      v = v:item()
    end
    if type(v) ~= "number" then
      errors.raise(string.format("%s: expected a number at depth %d, got %s", opname, depth, type(v)))
    end
    out[#out + 1] = v
    return
  end
  if type(v) ~= "table" or #v ~= shape[depth] then
    errors.raise(string.format("%s: ragged nested table (expected %d elements at depth %d, got %s)",
      opname, shape[depth], depth, type(v) == "table" and tostring(#v) or type(v)))
  end
  for i = 1, #v do flatten_into(v[i], shape, depth + 1, out, opname) end
end

C.export("tensor", function(v, opts)
  opts = opts or {}
  if Tensor.is_tensor(v) then return opts.dtype and v:astype(opts.dtype) or v:clone() end
  local shape = nested_shape(v, "tensor")
  local flat = {}
  flatten_into(v, shape, 1, flat, "tensor")
  local dt = opts.dtype and check_dtype(opts.dtype, "tensor")
  if not dt then
    -- the first leaf's kind: a 0-d tensor's dtype, bool for booleans, else f32
    local first = v
    for _ = 1, #shape do if type(first) == "table" and not Tensor.is_tensor(first) then first = first[1] end end
    dt = Tensor.is_tensor(first) and first.dtype or type(first) == "boolean" and "bool" or "f32"
  end
  local t = Tensor._empty(dt, shape, "tensor")
  local n = #flat
  if dt == "f32" or dt == "f64" then
    -- a fresh tensor is contiguous: store straight into its memory
    local p = ffi.cast(dtype.ctype[dt] .. "*", t._c.data)
    for i = 1, n do p[i - 1] = flat[i] end
  elseif dt == "i64" then
    local buf = ffi.new("int64_t[?]", n > 0 and n or 1)
    for i = 1, n do buf[i - 1] = flat[i] end
    dsffi.C.ds_write_flat_i64(t._c, buf)
  else
    local buf = ffi.new("double[?]", n > 0 and n or 1)
    for i = 1, n do buf[i - 1] = flat[i] end
    dsffi.C.ds_write_flat(t._c, buf)
  end
  return t
end, { method = false, args = { "any", "table?" } })

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
