-- ops/reduce.lua: reductions (sum, mean, prod, var, std, max/min, amax/amin, argmax/argmin,
-- logsumexp, all/any), softmax, log_softmax and cumsum; with backward rules written in ds ops.
--
-- Dtypes (PyTorch's rules): sum/prod of integers or bools give i64; mean/var/std of an integer
-- tensor is an error (as in torch: convert with x:astype("f32") first); logsumexp, softmax and
-- log_softmax promote integers to f32; max/min/amax/amin keep the dtype; argmax/argmin and the
-- indices of max/min are i64 and 1-based; all/any give bool.
-- Reduced dims are a number, a list ({1, 3}) or nil (all dims); keepdim keeps them as size 1.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

local is_tensor = C.is_tensor

-- ---- shapes ----
local function where_of(name, x) return name .. " of " .. S.str(x._shape) end

-- a 1-based dim (negative from the end); the message (built only on error) names op and shape
local function dim_of(d, x, name)
  local n = #x._shape
  if type(d) == "number" and n > 0 then
    local r = d < 0 and n + 1 + d or d
    if r >= 1 and r <= n and r == math.floor(r) then return r end
  end
  return S.dim(d, n, where_of(name, x))
end

-- the list {1..n}, shared (attrs are never modified in place)
local all_dims = {}
for n = 0, 8 do
  all_dims[n] = {}
  for i = 1, n do all_dims[n][i] = i end
end

-- nil or {} -> every dim; else sorted unique positive dims (a 0-d tensor accepts 1/-1 and has none)
local function norm_dims(dims, x, name)
  local n = #x._shape
  if dims == nil or #dims == 0 then return all_dims[n] end
  if #dims == 1 then
    local r = dim_of(dims[1], x, name)
    return n > 0 and { r } or all_dims[0]
  end
  local out, seen = {}, {}
  for _, d in ipairs(dims) do
    local r = dim_of(d, x, name)
    if seen[r] then errors.raise(string.format("%s: dim %d repeated in the dims list", where_of(name, x), d)) end
    seen[r] = true
    if n > 0 then out[#out + 1] = r end
  end
  table.sort(out)
  return out
end

local reduced_shape = S.reduced

-- a reduced result (or its grad) reshaped so that it broadcasts against the input
local function unreduce(t, x, attrs)
  if attrs.keepdim then return t end
  return t:reshape(reduced_shape(x._shape, attrs.dims, true))
end

-- number of reduced elements: a Lua number, or a tensor when a dim is symbolic (tracing)
local function count(x, dims)
  local n = 1
  for _, d in ipairs(dims) do
    if type(x._shape[d]) ~= "number" then return F.ones_like(x):sum(dims, true) end
    n = n * x._shape[d]
  end
  return n
end

-- ---- definitions ----
local function floats_only(name)
  return function(inputs)
    local dt = inputs[1].dtype
    if not dtype.is_float[dt] then
      errors.raise(string.format("%s: input has dtype %s; %s needs floating point (as in torch), use x:astype(\"f32\")",
        name, dt, name))
    end
    return inputs
  end
end

local function int_to_i64(dt) return dtype.is_float[dt] and dt or "i64" end
local function same(dt) return dt end

-- o: doc, dtypes, out (dtype map), promote, nonempty, extra attrs, noutputs, backward
local function def_reduce(name, o)
  local attrs = { { "dims", "dims" }, { "keepdim", "bool", false } }
  for _, a in ipairs(o.extra or {}) do attrs[#attrs + 1] = a end
  return D.define {
    name = name, doc = o.doc, kind = "reduce", kernel = "ds_" .. name .. "_%s", dtypes = o.dtypes, ninputs = 1,
    noutputs = o.noutputs, attrs = attrs, args = { "dims", "keepdim" },
    prepare = function(inputs, a)
      if not is_tensor(inputs[1]) then errors.raise(name .. ": expects a tensor, got " .. type(inputs[1])) end
      a.dims = norm_dims(a.dims, inputs[1], name)
    end,
    promote = o.promote,
    -- x: (..., R, ...) -> reduced shape
    infer = function(inputs, a)
      local x = inputs[1]
      if o.nonempty then
        for _, d in ipairs(a.dims) do
          if x._shape[d] == 0 then
            errors.raise(string.format("%s: cannot reduce over dim %d of size 0", where_of(name, x), d))
          end
        end
      end
      local s = reduced_shape(x._shape, a.dims, a.keepdim)
      local dt = (o.out or same)(x.dtype)
      if o.noutputs == 2 then return { { shape = s, dtype = dt }, { shape = s, dtype = "i64" } } end
      return { shape = s, dtype = dt }
    end,
    backward = o.backward,
  }
end

-- grad of a sum: broadcast back over the reduced dims, materialized (an expanded view could end up
-- as a leaf's .grad, where an in-place update such as grad:mul_(s) would hit each element many times)
local function expand_back(gk, x) return F.contiguous(gk:expand(x._shape)) end
local function sum_bw(ctx, g)
  return expand_back(unreduce(g, ctx.inputs[1], ctx.attrs), ctx.inputs[1])
end

def_reduce("sum", { doc = "sum over dims (integers and bools give i64)", dtypes = C.ALL, out = int_to_i64,
  backward = sum_bw })
def_reduce("mean", { doc = "arithmetic mean over dims (floating point only)", dtypes = C.FLOAT,
  promote = floats_only("mean"),
  backward = function(ctx, g)
    local x = ctx.inputs[1]
    return expand_back(unreduce(g, x, ctx.attrs) / count(x, ctx.attrs.dims), x)
  end })
-- d prod / dx_i = the product of the others: prod / x_i without zeros; with one zero, the product of the
-- non-zeros at the zero and 0 elsewhere; with two or more, 0 everywhere (as PyTorch)
def_reduce("prod", { doc = "product over dims (integers and bools give i64)", dtypes = C.ALL, out = int_to_i64,
  backward = function(ctx, g)
    local x, a = ctx.inputs[1], ctx.attrs
    local keep = { dims = a.dims, keepdim = a.keepdim }
    local is_zero = F.eq(x, 0)
    local safe = F.where(is_zero, 1, x)
    local nonzero_prod = unreduce(D.call(D.by_name.prod, { safe }, keep), x, a)
    local zeros = unreduce(D.call(D.by_name.sum, { is_zero }, keep), x, a)
    local others = F.where(is_zero, F.where(F.eq(zeros, 1), nonzero_prod, 0),
      F.where(F.eq(zeros, 0), nonzero_prod / safe, 0))
    return unreduce(g, x, a) * others
  end })

-- var/std: divisor max(0, N - correction); correction 1 (default) is the unbiased estimate
local function var_bw(is_std)
  return function(ctx, g)
    local x, a = ctx.inputs[1], ctx.attrs
    local dev = x - x:mean(a.dims, true)
    local den = count(x, a.dims) - a.correction
    if is_std then return unreduce(g, x, a) * dev / (unreduce(ctx.outputs[1], x, a) * den) end
    return unreduce(g, x, a) * 2 * dev / den
  end
end
def_reduce("var", { doc = "variance over dims, divisor N - correction (torch.var)", dtypes = C.FLOAT,
  promote = floats_only("var"), extra = { { "correction", "float", 1 } },
  backward = var_bw(false) })
def_reduce("std", { doc = "standard deviation over dims, divisor N - correction (torch.std)", dtypes = C.FLOAT,
  promote = floats_only("std"), extra = { { "correction", "float", 1 } },
  backward = var_bw(true) })

-- amax/amin: the grad is shared evenly by the elements equal to the result (as in torch)
local function extreme_bw(ctx, g)
  local x, a = ctx.inputs[1], ctx.attrs
  local mask = F.eq(x, unreduce(ctx.outputs[1], x, a)):astype(g.dtype)
  return unreduce(g, x, a) * mask / mask:sum(a.dims, true)
end
def_reduce("amax", { doc = "largest value over dims, no indices (torch.amax)", dtypes = C.ALL, nonempty = true,
  backward = extreme_bw })
def_reduce("amin", { doc = "smallest value over dims, no indices (torch.amin)", dtypes = C.ALL, nonempty = true,
  backward = extreme_bw })

-- max/min over one dim -> values, indices (1-based): the grad goes to the index's position
local function indexed_bw(ctx, g)
  local x, a = ctx.inputs[1], ctx.attrs
  local gk = unreduce(g, x, a)
  if #a.dims == 0 then return gk:reshape(x._shape) end
  local d, size = a.dims[1], x._shape[a.dims[1]]
  local pos -- 1..size along dim d (a symbolic size while tracing: a cumsum of ones)
  if type(size) == "number" then
    local pos_shape = {}
    for i = 1, #x._shape do pos_shape[i] = i == d and size or 1 end
    pos = F.arange(1, size + 1, { dtype = "i64" }):reshape(pos_shape)
  else
    pos = F.ones_like(x, { dtype = "i64" }):cumsum(d)
  end
  local hit = F.eq(pos, unreduce(ctx.outputs[2], x, a))
  return F.where(hit, gk, F.zeros_like(gk))
end
def_reduce("max", { doc = "largest value along one dim and its 1-based index (torch.max(x, dim))", dtypes = C.ALL,
  nonempty = true, noutputs = 2, backward = indexed_bw })
def_reduce("min", { doc = "smallest value along one dim and its 1-based index (torch.min(x, dim))", dtypes = C.ALL,
  nonempty = true, noutputs = 2, backward = indexed_bw })
def_reduce("argmax", { doc = "1-based index of the largest value along dim, or in the flattened tensor", dtypes = C.ALL,
  nonempty = true, out = function() return "i64" end })
def_reduce("argmin", { doc = "1-based index of the smallest value along dim, or in the flattened tensor",
  dtypes = C.ALL, nonempty = true, out = function() return "i64" end })
def_reduce("all", { doc = "true where every element over dims is non-zero", dtypes = C.ALL,
  out = function() return "bool" end })
def_reduce("any", { doc = "true where some element over dims is non-zero", dtypes = C.ALL,
  out = function() return "bool" end })

-- logsumexp: max-shifted in the kernel; grad = g * exp(x - lse)
def_reduce("logsumexp", { doc = "log(sum(exp(x))) over dims, computed shifted by the max", dtypes = C.FLOAT,
  promote = C.promote_float,
  backward = function(ctx, g)
    local x, a = ctx.inputs[1], ctx.attrs
    return unreduce(g, x, a) * F.exp(x - unreduce(ctx.outputs[1], x, a))
  end })

-- ---- along one dim: softmax, log_softmax, cumsum (same shape out) ----
local function def_along(name, o)
  local attrs = { { "dim", "dim" } }
  for _, a in ipairs(o.extra or {}) do attrs[#attrs + 1] = a end
  return D.define {
    name = name, doc = o.doc, kind = "reduce", kernel = "ds_" .. name .. "_%s", dtypes = o.dtypes, ninputs = 1,
    attrs = attrs, args = { "dim" },
    prepare = function(inputs, a)
      local x = inputs[1]
      if not is_tensor(x) then errors.raise(name .. ": expects a tensor, got " .. type(x)) end
      if a.dim == nil then errors.raise(where_of(name, x) .. ": dim is required") end
      a.dim = dim_of(a.dim, x, name)
    end,
    promote = o.promote,
    -- x: (...) -> (...)
    infer = function(inputs) return { shape = inputs[1]._shape, dtype = (o.out or same)(inputs[1].dtype) } end,
    backward = o.backward,
  }
end

def_along("softmax", { doc = "exp(x) / sum(exp(x)) along dim", dtypes = C.FLOAT, promote = C.promote_float,
  backward = function(ctx, g)
    local y = ctx.outputs[1]
    return y * (g - (g * y):sum(ctx.attrs.dim, true))
  end })
def_along("log_softmax", { doc = "x - logsumexp(x) along dim", dtypes = C.FLOAT, promote = C.promote_float,
  backward = function(ctx, g)
    return g - F.exp(ctx.outputs[1]) * g:sum(ctx.attrs.dim, true)
  end })
-- cumsum (reverse = true sums from the end); the grad of one direction is the other
def_along("cumsum", { doc = "cumulative sum along dim (reverse: from the end)", dtypes = C.ALL, out = int_to_i64,
  extra = { { "reverse", "bool", false } },
  backward = function(ctx, g)
    return D.call(D.by_name.cumsum, { g }, { dim = ctx.attrs.dim, reverse = not ctx.attrs.reverse })
  end })

-- ---- API ----
local function is_options(v)
  return type(v) == "table" and not is_tensor(v) and v[1] == nil and next(v) ~= nil
end

-- (dims, keepdim, opts) in any of the forms: (), (2), (2, true), ({1, 2}, true), ({dim =, keepdim =, ...}),
-- (2, {correction = 0}), (2, true, {...}); returns an attrs table for D.call
local function reduce_attrs(name, a, b, c)
  local opts
  if is_options(a) then opts, a, b = a, nil, nil
  elseif is_options(b) then opts, b = b, nil
  elseif is_options(c) then opts = c end
  local attrs = {}
  if opts then for k, v in pairs(opts) do attrs[k] = v end end
  local dims = a
  if attrs.dim ~= nil then dims = attrs.dim; attrs.dim = nil end
  if type(dims) == "number" then dims = { dims }
  elseif dims ~= nil and (type(dims) ~= "table" or is_tensor(dims)) then
    errors.raise(string.format("%s: dim must be a number or a list of numbers, got %s", name, type(dims)))
  end
  attrs.dims = dims
  if attrs.keepdim == nil then attrs.keepdim = b end
  if attrs.keepdim ~= nil and type(attrs.keepdim) ~= "boolean" then
    errors.raise(string.format("%s: keepdim must be a boolean, got %s", name, type(attrs.keepdim)))
  end
  if attrs.unbiased ~= nil then
    attrs.correction = attrs.unbiased and 1 or 0
    attrs.unbiased = nil
  end
  return attrs
end

-- PyTorch's dtype option (sum, mean, prod, cumsum, softmax, log_softmax): x is cast to dtype first and the
-- result has dtype (an i32 sum stays i32)
local TAKES_DTYPE = { sum = true, mean = true, prod = true, cumsum = true, softmax = true, log_softmax = true }
local function call_with_dtype(def, x, attrs)
  if attrs.dtype == nil or not TAKES_DTYPE[def.name] then return D.call(def, { x }, attrs) end
  local dt = dtype.normalize(attrs.dtype)
  if not dt then errors.raise(string.format("%s: dtype must be a dtype name, got %s", def.name, tostring(attrs.dtype))) end
  attrs.dtype = nil
  if not is_tensor(x) then errors.raise(def.name .. ": expects a tensor, got " .. type(x)) end
  local y = D.call(def, { x:astype(dt) }, attrs)
  return y.dtype == dt and y or y:astype(dt)
end

for _, name in ipairs { "sum", "mean", "prod", "amax", "amin", "logsumexp", "all", "any" } do
  local def = D.by_name[name]
  C.export(name, function(x, a, b, c) return call_with_dtype(def, x, reduce_attrs(name, a, b, c)) end)
end

-- var/std take PyTorch's positional order, x:var(dim, unbiased, keepdim) or x:var(unbiased), and an
-- options table ({dim =, unbiased =, correction =, keepdim =}) may end the arguments
local function var_attrs(name, ...)
  local args, n = { ... }, select("#", ...)
  local opts = {}
  if n > 0 and is_options(args[n]) then
    for k, v in pairs(args[n]) do opts[k] = v end
    args[n] = nil; n = n - 1
  end
  local dims, unbiased, keepdim
  if type(args[1]) == "boolean" then
    if n > 1 then errors.raise(name .. ": after unbiased (a boolean) no further positional arguments are taken") end
    unbiased = args[1]
  else
    if n > 3 then errors.raise(string.format("%s: takes (dim, unbiased, keepdim), got %d arguments", name, n)) end
    dims, unbiased, keepdim = args[1], args[2], args[3]
  end
  if unbiased ~= nil then
    if type(unbiased) ~= "boolean" then errors.raise(name .. ": unbiased must be a boolean, got " .. type(unbiased)) end
    if opts.unbiased ~= nil or opts.correction ~= nil then
      errors.raise(name .. ": unbiased given twice (positionally and as an option)")
    end
    opts.unbiased = unbiased
  end
  if keepdim ~= nil then
    if opts.keepdim ~= nil then errors.raise(name .. ": keepdim given twice (positionally and as an option)") end
    opts.keepdim = keepdim
  end
  return reduce_attrs(name, dims, nil, opts)
end
for _, name in ipairs { "var", "std" } do
  local def = D.by_name[name]
  C.export(name, function(x, ...) return D.call(def, { x }, var_attrs(name, ...)) end)
  -- var_mean / std_mean: the arguments of var / std; returns the statistic and the mean over the same dims
  C.export(name .. "_mean", function(x, ...)
    local attrs = var_attrs(name .. "_mean", ...)
    local dims, keepdim = attrs.dims, attrs.keepdim
    return D.call(def, { x }, attrs), D.call(D.by_name.mean, { x }, { dims = dims, keepdim = keepdim })
  end)
end

local function single_dim(name, attrs)
  if attrs.dims and #attrs.dims ~= 1 then
    errors.raise(string.format("%s: expects one dim, got %d (use amax/amin for several)", name, #attrs.dims))
  end
  return attrs
end

-- x:max() -> the largest value (0-d); x:max(dim[, keepdim]) -> values, indices; x:max(y) -> maximum
for _, name in ipairs { "max", "min" } do
  local def, all_def, pair = D.by_name[name], D.by_name["a" .. name], name == "max" and "maximum" or "minimum"
  C.export(name, function(x, a, b, c)
    if is_tensor(a) then return F[pair](x, a) end
    local attrs = single_dim(name, reduce_attrs(name, a, b, c))
    if attrs.dims == nil then return D.call(all_def, { x }, attrs) end
    return D.call(def, { x }, attrs)
  end)
end

-- argmax(x) -> flat index (0-d i64); argmax(x, dim[, keepdim]) -> indices along dim, 1-based
for _, name in ipairs { "argmax", "argmin" } do
  local def = D.by_name[name]
  C.export(name, function(x, a, b, c) return D.call(def, { x }, single_dim(name, reduce_attrs(name, a, b, c))) end)
end

-- softmax(x, dim) / log_softmax(x, dim) / cumsum(x, dim[, {reverse = true}]), or {dim = ...}
local function along_attrs(a, b)
  if not is_options(a) and b == nil then return { dim = a } end
  local attrs = {}
  local opts = is_options(a) and a or (is_options(b) and b or nil)
  if opts then for k, v in pairs(opts) do attrs[k] = v end end
  if not is_options(a) then attrs.dim = attrs.dim or a end
  return attrs
end
for _, name in ipairs { "softmax", "log_softmax", "cumsum" } do
  local def = D.by_name[name]
  C.export(name, function(x, a, b) return call_with_dtype(def, x, along_attrs(a, b)) end)
end

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
