-- ops/index.lua: joining and indexing ops (cat, stack, gather, scatter_add, scatter_reduce, index_select, index_add,
-- masked_fill, one_hot, embedding); indices are 1-based i64 and range-checked by the C kernels.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local Tensor = require("ds.tensor")
local sym = require("ds.sym")
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

local ARITH = C.set { "f32", "f64", "i64", "i32" }

local function copy_shape(s) local o = {}; for i = 1, #s do o[i] = s[i] end; return o end

-- a + b for dims that may be symbolic while tracing
local function add_dims(a, b)
  if type(a) == "number" and type(b) == "number" then return a + b end
  return sym.add(a, b)
end

local function need_tensor(x, opname, what)
  if not C.is_tensor(x) then
    errors.raise(string.format("%s: %s must be a tensor, got %s", opname, what, type(x)))
  end
end

-- index tensors are i64; other integer dtypes are widened, floats and bools refused
local function as_index(ix, opname, what)
  need_tensor(ix, opname, what or "index")
  if ix.dtype == "i64" then return ix end
  if not dtype.is_int[ix.dtype] then
    errors.raise(string.format("%s: %s must be an integer tensor (i64), got %s %s", opname, what or "index",
      ix.dtype, S.str(ix._shape)))
  end
  return D.cast(ix, "i64")
end

-- ---- cat(list, dim): (a..., n_k, b...) for each k -> (a..., sum n_k, b...) ----
local cat = D.define {
  name = "cat", doc = "tensors joined along an existing dim (torch.cat)", kind = "join", kernel = "ds_cat_%s",
  dtypes = C.ALL, variadic = true,
  attrs = { { "dim", "dim", 1 }, { "n", "int", 0 } }, args = { "dim" },
  prepare = function(inputs, attrs)
    if #inputs == 0 then errors.raise("cat: expects a non-empty list of tensors") end
    for i, x in ipairs(inputs) do need_tensor(x, "cat", "list element " .. i) end
    local first = inputs[1]._shape
    if #first == 0 then errors.raise("cat: cannot concatenate 0-d tensors; use ds.stack") end
    attrs.dim = S.dim(attrs.dim, #first, "cat")
    for i = 2, #inputs do
      local s = inputs[i]._shape
      local ok = #s == #first
      for d = 1, #first do
        if ok and d ~= attrs.dim and not S.same(s[d], first[d]) then ok = false end
      end
      if not ok then
        errors.raise(string.format("cat: tensor %d has shape %s, tensor 1 has %s; they may differ only in dim %d",
          i, S.str(s), S.str(first), attrs.dim))
      end
    end
    attrs.n = #inputs
  end,
  promote = C.promote_same,
  infer = function(inputs, attrs)
    local s = copy_shape(inputs[1]._shape)
    for i = 2, #inputs do s[attrs.dim] = add_dims(s[attrs.dim], inputs[i]._shape[attrs.dim]) end
    return { shape = s, dtype = inputs[1].dtype }
  end,
  pack = function(attrs) return { attrs.dim - 1, attrs.n } end,
  backward = function(ctx, g)
    local grads, start, dim = {}, 1, ctx.attrs.dim
    for i, x in ipairs(ctx.inputs) do
      local len = x._shape[dim]
      if ctx.needs[i] then grads[i] = g:narrow(dim, start, len) end
      start = add_dims(start, len)
    end
    return unpack(grads, 1, #ctx.inputs)
  end,
}
C.export("cat", C.api(cat), { method = false })
C.export("concat", C.functions.cat, { method = false })

-- stack(list, dim): k tensors of shape s -> s with a new dim of size k at dim (1..#s+1)
C.export("stack", function(list, dim)
  if type(list) ~= "table" or C.is_tensor(list) or #list == 0 then
    errors.raise("stack: expects a non-empty list of tensors as its first argument")
  end
  for i, x in ipairs(list) do need_tensor(x, "stack", "list element " .. i) end
  local first = list[1]._shape
  for i = 2, #list do
    if not S.equal(list[i]._shape, first) then
      errors.raise(string.format("stack: tensor %d has shape %s, tensor 1 has %s; all must be equal", i,
        S.str(list[i]._shape), S.str(first)))
    end
  end
  if #first >= S.MAXDIM then
    errors.raise(string.format("stack: stacking %d-d tensors would make more than %d dims", #first, S.MAXDIM))
  end
  local d = S.dim(dim or 1, #first, "stack", true)
  local parts = {}
  for i, x in ipairs(list) do parts[i] = x:unsqueeze(d) end
  return D.call(cat, parts, { dim = d })
end, { method = false })

-- gather/scatter_add: index has x's rank and is no larger than x outside dim; returns dim normalized
local function check_index_dims(x, ix, dim, opname)
  local sx, si = x._shape, ix._shape
  if #sx == 0 or #sx ~= #si then
    errors.raise(string.format("%s: input %s and index %s need the same number of dims (>= 1)", opname, S.str(sx),
      S.str(si)))
  end
  dim = S.dim(dim, #sx, opname)
  for d = 1, #sx do
    if d ~= dim and type(si[d]) == "number" and type(sx[d]) == "number" and si[d] > sx[d] then
      errors.raise(string.format("%s: index %s is larger than input %s in dim %d", opname, S.str(si), S.str(sx), d))
    end
  end
  return dim
end

-- ---- gather(x, dim, index): out[i][j] = x[index[i][j]][j] (dim 1); out has index's shape ----
local gather = D.define {
  name = "gather", doc = "values of x at the 1-based indices along dim; the index's shape", kind = "index",
  kernel = "ds_gather_%s", dtypes = C.ALL, ninputs = 2,
  attrs = { { "dim", "dim" } }, args = { "dim" },
  prepare = function(inputs, attrs)
    local x = inputs[1]
    need_tensor(x, "gather", "input")
    local ix = as_index(inputs[2], "gather")
    attrs.dim = check_index_dims(x, ix, attrs.dim, "gather")
    return { x, ix }
  end,
  infer = function(inputs) return { shape = inputs[2]._shape, dtype = inputs[1].dtype } end,
  backward = function(ctx, g)
    local x, ix = ctx.inputs[1], ctx.inputs[2]
    return F.scatter_add(F.zeros_like(x, { dtype = g.dtype }), ctx.attrs.dim, ix, g)
  end,
}
C.export("gather", function(x, dim, index, opts)
  options.check(opts, "gather", {})
  return D.call(gather, { x, index }, { dim = dim })
end)

-- src as PyTorch takes it: index's rank and at least index's size in every dim; its leading block of
-- index's shape is what is scattered
local function src_like_index(src, ix, opname)
  local ss, si = src._shape, ix._shape
  local fits = #ss == #si
  for d = 1, #si do -- symbolic sizes (tracing) must be the same
    local numbers = type(si[d]) == "number" and type(ss[d]) == "number"
    fits = fits and (S.same(si[d], ss[d]) or numbers and si[d] <= ss[d])
  end
  if not fits then
    errors.raise(string.format("%s: src %s must have index %s's number of dims and be at least as large in each",
      opname, S.str(ss), S.str(si)))
  end
  for d = 1, #si do
    if not S.same(si[d], ss[d]) then src = src:narrow(d, 1, si[d]) end
  end
  return src
end

-- ---- scatter_add(x, dim, index, src): out = x; out[index[i][j]][j] += src[i][j] (dim 1) ----
local scatter_add = D.define {
  name = "scatter_add", doc = "x with src added at the 1-based indices along dim (duplicates accumulate)",
  kind = "index", kernel = "ds_scatter_add_%s", dtypes = ARITH, ninputs = 3,
  attrs = { { "dim", "dim" } }, args = { "dim" },
  prepare = function(inputs, attrs)
    local x, src = inputs[1], inputs[3]
    need_tensor(x, "scatter_add", "input"); need_tensor(src, "scatter_add", "src")
    local ix = as_index(inputs[2], "scatter_add")
    attrs.dim = check_index_dims(x, ix, attrs.dim, "scatter_add")
    return { x, ix, src_like_index(src, ix, "scatter_add") }
  end,
  promote = function(inputs)
    local dt = C.result_dtype { inputs[1], inputs[3] }
    return { D.cast(inputs[1], dt), inputs[2], D.cast(inputs[3], dt) }
  end,
  infer = function(inputs) return { shape = inputs[1]._shape, dtype = inputs[1].dtype } end,
  backward = function(ctx, g)
    return ctx.needs[1] and g or nil, nil, ctx.needs[3] and g:gather(ctx.attrs.dim, ctx.inputs[2]) or nil
  end,
}
C.export("scatter_add", function(x, dim, index, src, opts)
  options.check(opts, "scatter_add", {})
  return D.call(scatter_add, { x, index, src }, { dim = dim })
end)
Tensor._define("ds.ops.index", { scatter_add_ = function(x, dim, index, src, opts)
  options.check(opts, "scatter_add_", {})
  return D.call(scatter_add, { x, index, src }, { dim = dim }, x)
end })

-- the gradients of scatter_reduce's amax/amin (torch's rule): shared evenly by x's element and the src elements
-- equal to the result at each position
local function extreme_scatter_bw(ctx, g)
  local x, ix, src, out, dim = ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.outputs[1], ctx.attrs.dim
  local self_hit = F.eq(x, out):astype(g.dtype)
  local src_hit = F.eq(src, out:gather(dim, ix)):astype(g.dtype) -- src has index's shape (prepare)
  local share = g / (self_hit + F.scatter_add(F.zeros_like(g), dim, ix, src_hit))
  return ctx.needs[1] and share * self_hit or nil, nil, ctx.needs[3] and share:gather(dim, ix) * src_hit or nil
end
local SCATTER_BACKWARD = {
  sum = function(ctx, g) return scatter_add.backward(ctx, g) end,
  -- the product of the others: out / x and out / src (undefined where they are 0)
  prod = function(ctx, g)
    local x, ix, src, out, dim = ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.outputs[1], ctx.attrs.dim
    return ctx.needs[1] and g * out / x or nil, nil, ctx.needs[3] and (g * out):gather(dim, ix) / src or nil
  end,
  amax = extreme_scatter_bw, amin = extreme_scatter_bw,
}

-- ---- scatter_reduce(x, dim, index, src, reduce): out = x; out[index[i][j]][j] = reduce(out[..], src[i][j]) (dim
-- 1) with reduce sum, prod, amax or amin (torch.scatter_reduce with include_self = true) ----
local scatter_reduce = D.define {
  name = "scatter_reduce", doc = "x combined (sum, prod, amax, amin) with src at the 1-based indices along dim",
  kind = "index", kernel = "ds_scatter_reduce_%s", dtypes = ARITH, ninputs = 3,
  attrs = { { "dim", "dim" }, { "reduce", "enum", "sum", { "sum", "prod", "amax", "amin" } } },
  args = { "dim", "reduce" },
  prepare = function(inputs, attrs)
    local x, src = inputs[1], inputs[3]
    need_tensor(x, "scatter_reduce", "input"); need_tensor(src, "scatter_reduce", "src")
    local ix = as_index(inputs[2], "scatter_reduce")
    attrs.dim = check_index_dims(x, ix, attrs.dim, "scatter_reduce")
    return { x, ix, src_like_index(src, ix, "scatter_reduce") }
  end,
  promote = scatter_add.promote,
  infer = function(inputs) return { shape = inputs[1]._shape, dtype = inputs[1].dtype } end,
  backward = function(ctx, g) return SCATTER_BACKWARD[ctx.attrs.reduce](ctx, g) end,
}
C.export("scatter_reduce", function(x, dim, index, src, reduce)
  return D.call(scatter_reduce, { x, index, src }, { dim = dim, reduce = reduce })
end)

-- 1-D (or 0-d) index for index_select / index_add
local function index_1d(ix, opname)
  ix = as_index(ix, opname)
  if #ix._shape > 1 then
    errors.raise(string.format("%s: index must be 0-d or 1-D, got %s", opname, S.str(ix._shape)))
  end
  return ix
end

-- ---- index_select(x, dim, index): (a..., n, b...) with m indices -> (a..., m, b...) ----
local index_select = D.define {
  name = "index_select", doc = "the slices of x along dim at a 1-D list of 1-based indices", kind = "index",
  kernel = "ds_index_select_%s", dtypes = C.ALL, ninputs = 2,
  attrs = { { "dim", "dim" } }, args = { "dim" },
  prepare = function(inputs, attrs)
    local x = inputs[1]
    need_tensor(x, "index_select", "input")
    if #x._shape == 0 then errors.raise("index_select: input must have at least 1 dim") end
    attrs.dim = S.dim(attrs.dim, #x._shape, "index_select")
    return { x, index_1d(inputs[2], "index_select") }
  end,
  infer = function(inputs, attrs)
    local s = copy_shape(inputs[1]._shape)
    s[attrs.dim] = S.numel(inputs[2]._shape)
    return { shape = s, dtype = inputs[1].dtype }
  end,
  backward = function(ctx, g)
    local x, ix = ctx.inputs[1], ctx.inputs[2]
    return F.index_add(F.zeros_like(x, { dtype = g.dtype }), ctx.attrs.dim, ix, g)
  end,
}
C.export("index_select", function(x, dim, index, opts)
  options.check(opts, "index_select", {})
  return D.call(index_select, { x, index }, { dim = dim })
end)

-- ---- index_add(x, dim, index, src): out = x; out.select(dim, index[j]) += src.select(dim, j) ----
local index_add = D.define {
  name = "index_add", doc = "x with the slices of src added at 1-based indices along dim", kind = "index",
  kernel = "ds_index_add_%s", dtypes = ARITH, ninputs = 3,
  attrs = { { "dim", "dim" } }, args = { "dim" },
  prepare = function(inputs, attrs)
    local x, src = inputs[1], inputs[3]
    need_tensor(x, "index_add", "input"); need_tensor(src, "index_add", "src")
    if #x._shape == 0 then errors.raise("index_add: input must have at least 1 dim") end
    attrs.dim = S.dim(attrs.dim, #x._shape, "index_add")
    local ix = index_1d(inputs[2], "index_add")
    local want = copy_shape(x._shape)
    want[attrs.dim] = S.numel(ix._shape)
    if not S.equal(src._shape, want) then
      errors.raise(string.format("index_add: src has shape %s, expected %s (input %s with %s indices in dim %d)",
        S.str(src._shape), S.str(want), S.str(x._shape), tostring(want[attrs.dim]), attrs.dim))
    end
    return { x, ix, src }
  end,
  promote = scatter_add.promote,
  infer = function(inputs) return { shape = inputs[1]._shape, dtype = inputs[1].dtype } end,
  backward = function(ctx, g)
    return ctx.needs[1] and g or nil, nil, ctx.needs[3] and g:index_select(ctx.attrs.dim, ctx.inputs[2]) or nil
  end,
}
-- src scaled by the alpha option (torch.index_add(..., alpha =)); an integer x takes an integer alpha
local function index_add_src(opname, x, src, opts)
  opts = options.check(opts, opname, { alpha = "number" })
  local alpha = opts.alpha
  if alpha == nil or alpha == 1 then return src end
  if C.is_tensor(x) and not dtype.is_float[x.dtype] and alpha ~= math.floor(alpha) then
    errors.raise(string.format("%s: alpha %s must be an integer for a %s tensor", opname, tostring(alpha), x.dtype))
  end
  need_tensor(src, opname, "src")
  return src * alpha
end
C.export("index_add", function(x, dim, index, src, opts)
  return D.call(index_add, { x, index, index_add_src("index_add", x, src, opts) }, { dim = dim })
end)
Tensor._define("ds.ops.index", { index_add_ = function(x, dim, index, src, opts)
  return D.call(index_add, { x, index, index_add_src("index_add_", x, src, opts) }, { dim = dim }, x)
end })

-- ---- masked_fill(x, mask, value): where mask (bool, broadcast to x) is true, value; else x ----
-- written with where, so its gradient flows to x (and to value when it is a tensor)
local function masked_fill(x, mask, value)
  need_tensor(x, "masked_fill", "input")
  need_tensor(mask, "masked_fill", "mask")
  if mask.dtype ~= "bool" then
    errors.raise(string.format("masked_fill: mask must be a bool tensor, got %s %s (use x:gt(0) etc.)", mask.dtype,
      S.str(mask._shape)))
  end
  local s = S.broadcast(x._shape, mask._shape, "masked_fill")
  if not S.equal(s, x._shape) then
    errors.raise(string.format("masked_fill: mask %s does not broadcast to the input's shape %s", S.str(mask._shape),
      S.str(x._shape)))
  end
  if C.is_tensor(value) then
    if #value._shape ~= 0 then
      errors.raise("masked_fill: a tensor value must be 0-d, got shape " .. S.str(value._shape))
    end
    value = value.dtype == x.dtype and value or value:astype(x.dtype)
  elseif type(value) == "number" or type(value) == "boolean" then
    value = D.cast(value, x.dtype)
  else
    errors.raise("masked_fill: value must be a number or a 0-d tensor, got " .. type(value))
  end
  return F.where(mask, value, x)
end
C.export("masked_fill", masked_fill)
Tensor._define("ds.ops.index", {
  masked_fill_ = function(x, mask, value) return x:copy_(masked_fill(x, mask, value)) end,
})

-- ---- one_hot(labels, num_classes, {dtype = "i64"}): (...) 1-based classes -> (..., num_classes) ----
local one_hot = D.define {
  name = "one_hot", doc = "1-based class labels as one-hot rows of num_classes (F.one_hot)", kind = "index",
  kernel = "ds_one_hot_%s", dtypes = C.set { "i64", "f32", "f64" }, ninputs = 1,
  attrs = { { "num_classes", "int", -1 }, { "dtype", "dtype", "i64" } }, args = { "num_classes" },
  prepare = function(inputs, attrs)
    local lab = as_index(inputs[1], "one_hot", "labels")
    local dt = dtype.normalize(attrs.dtype)
    if not (dt == "i64" or dt == "f32" or dt == "f64") then
      errors.raise("one_hot: dtype must be i64, f32 or f64, got " .. tostring(attrs.dtype))
    end
    attrs.dtype = dt
    if attrs.num_classes == -1 then -- infer from the data (eager only), like torch
      if not lab._c then
        errors.raise("one_hot: num_classes must be given when tracing (the labels have no values yet)")
      end
      local m = 0
      for _, v in ipairs(lab:_flat()) do if v > m then m = v end end
      attrs.num_classes = m
    end
    if type(attrs.num_classes) ~= "number" or attrs.num_classes < 1
      or attrs.num_classes ~= math.floor(attrs.num_classes) then
      errors.raise("one_hot: num_classes must be a positive integer, got " .. tostring(attrs.num_classes))
    end
    return { lab }
  end,
  infer = function(inputs, attrs)
    local s = copy_shape(inputs[1]._shape)
    s[#s + 1] = attrs.num_classes
    return { shape = s, dtype = attrs.dtype }
  end,
  kernel_dtype = function(_, outputs) return outputs[1].dtype end,
  pack = function(attrs) return { attrs.num_classes } end,
}
C.export("one_hot", C.api(one_hot))

-- ---- embedding(ids, weight, {padding_idx}): ids (...) 1-based, weight (V, D) -> (..., D) ----
-- padding_idx's row gets no gradient (negative counts from the end, as in PyTorch)
local embedding = D.define {
  name = "embedding", doc = "rows of weight (V, D) at 1-based ids; padding_idx's row gets no gradient (F.embedding)",
  kind = "index", kernel = "ds_embedding_%s", dtypes = C.ALL, ninputs = 2,
  attrs = { { "padding_idx", "int" } }, args = { "padding_idx" },
  prepare = function(inputs, attrs)
    local ids = as_index(inputs[1], "embedding", "ids")
    local w = inputs[2]
    need_tensor(w, "embedding", "weight")
    if #w._shape ~= 2 then
      errors.raise("embedding: weight must be 2-D (num_embeddings, dim), got " .. S.str(w._shape))
    end
    local p, V = attrs.padding_idx, w._shape[1]
    if p ~= nil and type(V) == "number" then
      if p < 0 then p = V + 1 + p end
      if p < 1 or p > V or p ~= math.floor(p) then
        errors.raise(string.format("embedding: padding_idx %s out of range for %d embeddings",
          tostring(attrs.padding_idx), V))
      end
      attrs.padding_idx = p
    end
    return { ids, w }
  end,
  infer = function(inputs)
    local s = copy_shape(inputs[1]._shape)
    s[#s + 1] = inputs[2]._shape[2]
    return { shape = s, dtype = inputs[2].dtype }
  end,
  kernel_dtype = function(inputs) return inputs[2].dtype end,
  pack = function() return {} end,
  backward = function(ctx, g)
    if not ctx.needs[2] then return nil end
    local ids, w = ctx.inputs[1], ctx.inputs[2]
    local rows = g:reshape(-1, w._shape[2])
    local flat = ids:reshape(-1)
    local p = ctx.attrs.padding_idx
    if p ~= nil then rows = F.masked_fill(rows, F.eq(flat, p):unsqueeze(2), 0) end
    return nil, F.index_add(F.zeros_like(w, { dtype = g.dtype }), 1, flat, rows)
  end,
}
C.export("embedding", C.api(embedding), { method = false })

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
