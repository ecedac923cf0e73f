-- ops/movement.lua: views that share storage (reshape, transpose, permute, narrow, select, unfold,
-- squeeze, unsqueeze, expand, flatten) -- no kernel, a new stride/offset over the same storage.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local Tensor = require("ds.tensor")
local sym = require("ds.sym")
local sum_to = require("ds.autograd").sum_to
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

local function strides_of(x) return x:strides() end
local function offset_of(x) return x:storage_offset() end

-- def.view(x, attrs, meta) -> base, shape, strides, offset: the storage the result views (x, or a contiguous
-- copy of it) and the result's layout there; eagerly dispatch makes the view, the compiler (passes/lower.lua)
-- runs the same rule on buffer layouts
local function def_view(def)
  def.kind = "view"; def.dtypes = C.ALL; def.ninputs = def.ninputs or 1
  return D.define(def)
end

-- reshape: -1 infers one dim; a non-contiguous input is copied first (like torch.reshape)
local function resolve_shape(x, want, opname)
  local out, infer_at, known = {}, nil, 1
  for i, d in ipairs(want) do
    if d == -1 then
      if infer_at then errors.raise(opname .. ": only one dim can be -1, got " .. S.str(want)) end
      infer_at = i
    elseif type(d) == "number" and (d < 0 or d ~= math.floor(d)) then
      errors.raise(string.format("%s: invalid size %s in %s", opname, tostring(d), S.str(want)))
    else
      known = S.mul(known, d)
    end
    out[i] = d
  end
  local n = S.numel(x._shape)
  if infer_at then
    if type(n) == "table" or type(known) == "table" then
      out[infer_at] = sym.div(n, known, opname)
    else
      if known == 0 or n % known ~= 0 then
        errors.raise(string.format("%s: cannot reshape %s (%d elements) into %s", opname, S.str(x._shape), n,
          S.str(want)))
      end
      out[infer_at] = n / known
    end
  elseif not S.same(n, known) then
    errors.raise(string.format("%s: cannot reshape %s (%s elements) into %s (%s elements)", opname,
      S.str(x._shape), tostring(n), S.str(want), tostring(known)))
  end
  return out
end

def_view {
  name = "reshape",
  doc = "x with a new shape of as many elements (-1 infers one size); a view when the strides allow, else a copy",
  attrs = { { "shape", "ints" } },
  infer = function(inputs, attrs)
    return { shape = resolve_shape(inputs[1], attrs.shape, "reshape"), dtype = inputs[1].dtype }
  end,
  view = function(x, attrs, meta)
    -- a view when the strides allow one (as PyTorch's reshape), else a contiguous copy
    local st = x:is_contiguous() and S.contiguous_strides(meta.shape)
      or S.view_strides(x._shape, strides_of(x), meta.shape)
    if not st then x = F.contiguous(x); st = S.contiguous_strides(meta.shape) end
    return x, meta.shape, st, offset_of(x)
  end,
  backward = function(ctx, g) return g:reshape(ctx.inputs[1]._shape) end,
}

def_view {
  name = "transpose", doc = "view with dims dim0 and dim1 swapped", attrs = { { "dim0", "dim" }, { "dim1", "dim" } },
  args = { "dim0", "dim1" },
  prepare = function(inputs, attrs)
    local n = #inputs[1]._shape
    attrs.dim0 = S.dim(attrs.dim0, n, "transpose"); attrs.dim1 = S.dim(attrs.dim1, n, "transpose")
  end,
  infer = function(inputs, attrs)
    local s = {}
    for i, d in ipairs(inputs[1]._shape) do s[i] = d end
    s[attrs.dim0], s[attrs.dim1] = s[attrs.dim1], s[attrs.dim0]
    return { shape = s, dtype = inputs[1].dtype }
  end,
  view = function(x, attrs, meta)
    local st = strides_of(x)
    st[attrs.dim0], st[attrs.dim1] = st[attrs.dim1], st[attrs.dim0]
    return x, meta.shape, st, offset_of(x)
  end,
  backward = function(ctx, g) return g:transpose(ctx.attrs.dim0, ctx.attrs.dim1) end,
}

def_view {
  name = "permute", doc = "view with the dims reordered", attrs = { { "dims", "dims" } },
  prepare = function(inputs, attrs)
    local n, seen, dims = #inputs[1]._shape, {}, {}
    if #attrs.dims ~= n then
      errors.raise(string.format("permute: %d dims given for a %d-d tensor %s", #attrs.dims, n,
        S.str(inputs[1]._shape)))
    end
    for i, d in ipairs(attrs.dims) do
      dims[i] = S.dim(d, n, "permute")
      if seen[dims[i]] then errors.raise("permute: dim " .. d .. " repeated") end
      seen[dims[i]] = true
    end
    attrs.dims = dims
  end,
  infer = function(inputs, attrs)
    local s = {}
    for i, d in ipairs(attrs.dims) do s[i] = inputs[1]._shape[d] end
    return { shape = s, dtype = inputs[1].dtype }
  end,
  view = function(x, attrs, meta)
    local st0, st = strides_of(x), {}
    for i, d in ipairs(attrs.dims) do st[i] = st0[d] end
    return x, meta.shape, st, offset_of(x)
  end,
  backward = function(ctx, g)
    local inv = {}
    for i, d in ipairs(ctx.attrs.dims) do inv[d] = i end
    return g:permute(inv)
  end,
}

-- zeros around g along dim so that it fills [start, start+len) of a dim of size total (start may be symbolic)
local function pad_along(g, dim, start, total)
  local parts = {}
  local len = g._shape[dim]
  local function zeros_with(n)
    local s = {}
    for i, d in ipairs(g._shape) do s[i] = d end
    s[dim] = n
    return F.zeros(s, { dtype = g.dtype })
  end
  if type(start) ~= "number" or start > 1 then parts[#parts + 1] = zeros_with(sym.sub(start, 1)) end
  parts[#parts + 1] = g
  local after = sym.sub(sym.sub(total, sym.sub(start, 1)), len)
  if type(after) ~= "number" or after > 0 then parts[#parts + 1] = zeros_with(after) end
  if #parts == 1 then return g end
  return F.cat(parts, dim)
end

-- a position given from the end (negative) as one from the start: a number, or over a dynamic dim a symbolic one
local function from_end(pos, size)
  if type(pos) == "number" and pos < 0 then return sym.add(size, 1 + pos) end
  return pos
end

-- narrow's range once start, length and size are numbers (eagerly, and when a plan binds symbolic ones)
local function check_narrow(shape, dim, start, length)
  local size = shape[dim]
  if start < 1 or length < 0 or start - 1 + length > size then
    errors.raise(string.format("narrow: start %d, length %d out of range for dim %d of size %d (shape %s)", start,
      length, dim, size, S.str(shape)))
  end
end

def_view {
  name = "narrow", doc = "view of length elements of dim from 1-based start (start and length may be symbolic)",
  attrs = { { "dim", "dim" }, { "start", "int" }, { "length", "int" } }, args = { "dim", "start", "length" },
  prepare = function(inputs, attrs)
    local x = inputs[1]
    attrs.dim = S.dim(attrs.dim, #x._shape, "narrow")
    attrs.start = from_end(attrs.start, x._shape[attrs.dim])
    if type(attrs.length) == "number" and attrs.length < 0 then
      errors.raise(string.format("narrow: length %d is negative (shape %s)", attrs.length, S.str(x._shape)))
    end
    if type(x._shape[attrs.dim]) == "number" and type(attrs.start) == "number" and type(attrs.length) == "number" then
      check_narrow(x._shape, attrs.dim, attrs.start, attrs.length)
    end
  end,
  infer = function(inputs, attrs)
    local s = {}
    for i, d in ipairs(inputs[1]._shape) do s[i] = d end
    s[attrs.dim] = attrs.length
    return { shape = s, dtype = inputs[1].dtype }
  end,
  view = function(x, attrs, meta)
    check_narrow(x._shape, attrs.dim, attrs.start, attrs.length) -- symbolic ones are numbers by now
    local st = strides_of(x)
    return x, meta.shape, st, offset_of(x) + (attrs.start - 1) * st[attrs.dim]
  end,
  backward = function(ctx, g)
    return pad_along(g, ctx.attrs.dim, ctx.attrs.start, ctx.inputs[1]._shape[ctx.attrs.dim])
  end,
}

-- select's index once index and size are numbers
local function check_select(shape, dim, index)
  if index < 1 or index > shape[dim] then
    errors.raise(string.format("select: index %d out of range for dim %d of size %d (shape %s)", index, dim,
      shape[dim], S.str(shape)))
  end
end

def_view {
  name = "select", doc = "view at 1-based index of dim, that dim removed (the index may be symbolic)",
  attrs = { { "dim", "dim" }, { "index", "int" } }, args = { "dim", "index" },
  prepare = function(inputs, attrs)
    local x = inputs[1]
    if #x._shape == 0 then errors.raise("select: cannot index a 0-d tensor") end
    attrs.dim = S.dim(attrs.dim, #x._shape, "select")
    if not sym.is(attrs.index) and (type(attrs.index) ~= "number" or attrs.index ~= math.floor(attrs.index)) then
      errors.raise("select: index must be an integer, got " .. tostring(attrs.index))
    end
    attrs.index = from_end(attrs.index, x._shape[attrs.dim])
    if type(x._shape[attrs.dim]) == "number" and type(attrs.index) == "number" then
      check_select(x._shape, attrs.dim, attrs.index)
    end
  end,
  infer = function(inputs, attrs)
    local s = {}
    for i, d in ipairs(inputs[1]._shape) do if i ~= attrs.dim then s[#s + 1] = d end end
    return { shape = s, dtype = inputs[1].dtype }
  end,
  view = function(x, attrs, meta)
    check_select(x._shape, attrs.dim, attrs.index)
    local st0, st = strides_of(x), {}
    for i, v in ipairs(st0) do if i ~= attrs.dim then st[#st + 1] = v end end
    return x, meta.shape, st, offset_of(x) + (attrs.index - 1) * st0[attrs.dim]
  end,
  backward = function(ctx, g)
    return pad_along(g:unsqueeze(ctx.attrs.dim), ctx.attrs.dim, ctx.attrs.index, ctx.inputs[1]._shape[ctx.attrs.dim])
  end,
}

-- unfold's window count once the dim's size is a number: (len - size) // step + 1
local function check_unfold(shape, dim, size, step)
  local len = shape[dim]
  if size < 0 or size > len then
    errors.raise(string.format("unfold: size %d must be in [0, %d] (dim %d of %s)", size, len, dim, S.str(shape)))
  end
  return math.floor((len - size) / step) + 1
end

-- the 1-based positions along the dim that unfold's windows read, window by window: (windows * size)
local function unfold_index(windows, size, step)
  local idx = {}
  for i = 0, windows - 1 do for j = 1, size do idx[#idx + 1] = i * step + j end end
  return F.tensor(idx, { dtype = "i64" })
end

def_view {
  name = "unfold",
  doc = "x:unfold(dim, size, step): view of the windows of size elements every step along dim as a new last dim: " ..
    "(... L ...) -> (... (L - size) // step + 1 ... size), torch's Tensor.unfold",
  attrs = { { "dim", "dim" }, { "size", "int" }, { "step", "int" } }, args = { "dim", "size", "step" },
  prepare = function(inputs, attrs)
    local x = inputs[1]
    if #x._shape == 0 then errors.raise("unfold: expects a tensor with at least 1 dim, got a 0-d tensor") end
    attrs.dim = S.dim(attrs.dim, #x._shape, "unfold")
    for _, k in ipairs { "size", "step" } do
      if type(attrs[k]) ~= "number" or attrs[k] ~= math.floor(attrs[k]) then
        errors.raise(string.format("unfold: %s must be an integer, got %s", k, tostring(attrs[k])))
      end
    end
    if attrs.step < 1 then errors.raise("unfold: step must be a positive integer, got " .. attrs.step) end
    if type(x._shape[attrs.dim]) ~= "number" then
      errors.raise("unfold: dim " .. attrs.dim .. " must have a known size, got " .. S.str(x._shape))
    end
    check_unfold(x._shape, attrs.dim, attrs.size, attrs.step)
  end,
  infer = function(inputs, attrs)
    local s = {}
    for i, d in ipairs(inputs[1]._shape) do s[i] = d end
    s[attrs.dim] = check_unfold(s, attrs.dim, attrs.size, attrs.step)
    s[#s + 1] = attrs.size
    return { shape = s, dtype = inputs[1].dtype }
  end,
  view = function(x, attrs, meta)
    local st0, st = strides_of(x), {}
    for i, v in ipairs(st0) do st[i] = v end
    st[attrs.dim] = st0[attrs.dim] * attrs.step
    st[#st + 1] = st0[attrs.dim]
    return x, meta.shape, st, offset_of(x)
  end,
  -- the windows' gradients added back where they read: g moved to (... windows, size ...), flattened there,
  -- index_add along dim
  backward = function(ctx, g)
    local x, a = ctx.inputs[1], ctx.attrs
    local n, d = #x._shape, a.dim
    local windows = g._shape[d]
    if windows * a.size == 0 then return F.zeros(x._shape, { dtype = g.dtype }) end
    local perm, s = {}, {}
    for i = 1, d do perm[#perm + 1] = i end
    perm[#perm + 1] = n + 1
    for i = d + 1, n do perm[#perm + 1] = i end
    for i = 1, n do s[i] = x._shape[i] end
    s[d] = windows * a.size
    local flat = g:permute(perm):reshape(s)
    return F.index_add(F.zeros(x._shape, { dtype = g.dtype }), d, unfold_index(windows, a.size, a.step), flat)
  end,
}

-- expand: sizes may be -1 (keep); new leading dims allowed
def_view {
  name = "expand", doc = "view broadcast to a larger shape (stride 0; -1 keeps a size)",
  attrs = { { "shape", "ints" } },
  infer = function(inputs, attrs)
    local x, want = inputs[1], attrs.shape
    local nx, n = #x._shape, #want
    if n < nx then errors.raise(string.format("expand: %s has more dims than %s", S.str(x._shape), S.str(want))) end
    local s = {}
    for i = 1, n do
      local j = i - (n - nx)
      local cur = j >= 1 and x._shape[j] or nil
      local w = want[i]
      if w == -1 then
        if not cur then errors.raise("expand: -1 not allowed for a new leading dim") end
        s[i] = cur
      elseif cur == nil or cur == 1 or S.same(cur, w) then s[i] = w
      else
        errors.raise(string.format("expand: cannot expand %s to %s (dim %d: %s vs %s)", S.str(x._shape), S.str(want), i,
          tostring(cur), tostring(w)))
      end
    end
    return { shape = s, dtype = x.dtype }
  end,
  view = function(x, attrs, meta)
    local st0, st = strides_of(x), {}
    local n, nx = #meta.shape, #x._shape
    for i = 1, n do
      local j = i - (n - nx)
      st[i] = (j >= 1 and x._shape[j] == meta.shape[i]) and st0[j] or 0
    end
    return x, meta.shape, st, offset_of(x)
  end,
  backward = function(ctx, g) return sum_to(g, ctx.inputs[1]._shape) end,
}

-- ---- API: varargs/table shapes and the derived views ----
local function shape_args(opname, ...)
  local first = ...
  local listed = type(first) == "table" and not Tensor.is_tensor(first) and not sym.is(first)
  local s = listed and first or { ... }
  for i = 1, listed and table.maxn(s) or select("#", ...) do -- a nil among the sizes is an error too
    local d = s[i]
    if type(d) ~= "number" and not sym.is(d) then
      errors.raise(string.format("%s: size %d must be a number, got %s", opname, i, type(d)))
    end
  end
  return s
end

local reshape = D.by_name.reshape
C.export("reshape", function(x, ...) return D.call(reshape, { x }, { shape = shape_args("reshape", ...) }) end)
-- view never copies: writes through it must reach x (PyTorch's view); reshape copies when it must
C.export("view", function(x, ...)
  local shape = shape_args("view", ...)
  if rawget(x, "_c") and not x:is_contiguous() then
    local want = resolve_shape(x, shape, "view")
    if not S.view_strides(x._shape, strides_of(x), want) then
      errors.raise(string.format("view: a tensor of shape %s and strides %s cannot be viewed as %s "
        .. "without a copy; use reshape",
        S.str(x._shape), S.str(strides_of(x)), S.str(want)))
    end
  end
  return D.call(reshape, { x }, { shape = shape })
end)
C.export("view_as", function(x, y) return D.call(reshape, { x }, { shape = y._shape }) end,
  { args = { "tensor", "tensor" } })
C.export("reshape_as", function(x, y) return D.call(reshape, { x }, { shape = y._shape }) end,
  { args = { "tensor", "tensor" } })
C.export("transpose", C.api(D.by_name.transpose))
C.export("permute", function(x, ...) return D.call(D.by_name.permute, { x }, { dims = shape_args("permute", ...) }) end)
C.export("narrow", C.api(D.by_name.narrow), { args = { "tensor", "integer", "size", "size" } })
C.export("select", C.api(D.by_name.select), { args = { "tensor", "integer", "size" } })
C.export("unfold", C.api(D.by_name.unfold), { args = { "tensor", "integer", "integer", "integer" } })
C.export("expand", function(x, ...) return D.call(D.by_name.expand, { x }, { shape = shape_args("expand", ...) }) end)
C.export("expand_as", function(x, y) return D.call(D.by_name.expand, { x }, { shape = y._shape }) end,
  { args = { "tensor", "tensor" } })

C.export("t", function(x)
  local n = #x._shape
  if n > 2 then errors.raise("t: expects a tensor with <= 2 dims, got " .. S.str(x._shape)) end
  if n < 2 then return x end
  return x:transpose(1, 2)
end)

C.export("unsqueeze", function(x, dim)
  local n = #x._shape
  local d = S.dim(dim, n, "unsqueeze", true)
  local s = {}
  for i = 1, n do s[i] = x._shape[i] end
  table.insert(s, d, 1)
  return D.call(reshape, { x }, { shape = S.check(s, "unsqueeze") })
end)

C.export("squeeze", function(x, dim)
  local s = {}
  if dim == nil then
    for _, d in ipairs(x._shape) do if d ~= 1 then s[#s + 1] = d end end
  else
    local d = S.dim(dim, #x._shape, "squeeze")
    for i, v in ipairs(x._shape) do if i ~= d or v ~= 1 then s[#s + 1] = v end end
  end
  if #s == #x._shape then return x end
  return D.call(reshape, { x }, { shape = s })
end)

-- flatten(start_dim = 1, end_dim = -1)
C.export("flatten", function(x, start_dim, end_dim)
  local n = #x._shape
  if n == 0 then return x:reshape(1) end
  local a = S.dim(start_dim or 1, n, "flatten")
  local b = S.dim(end_dim or -1, n, "flatten")
  if a > b then errors.raise(string.format("flatten: start_dim %d after end_dim %d", a, b)) end
  local s = {}
  for i = 1, a - 1 do s[#s + 1] = x._shape[i] end
  local m = 1
  for i = a, b do m = S.mul(m, x._shape[i]) end
  s[#s + 1] = m
  for i = b + 1, n do s[#s + 1] = x._shape[i] end
  return D.call(reshape, { x }, { shape = s })
end)

C.export("contiguous", function(x, opts)
  options.check(opts, "contiguous", {})
  if x._c and x:is_contiguous() then return x end
  return D.call(EW.contiguous, { x })
end)
C.export("clone", function(x) return D.call(EW.contiguous, { x }) end)

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
