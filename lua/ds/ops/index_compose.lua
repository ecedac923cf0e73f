-- ops/index_compose.lua: indexing functions composed of table ops (index_select, gather, index_add,
-- cumsum, where, comparisons): repeat_interleave, index_fill, index_copy, masked_scatter, take_along_dim,
-- searchsorted, bucketize, scatter_reduce with include_self and mean. Indices taken and given are 1-based (searchsorted's insertion points too).
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local Tensor = require("ds.tensor")
local D = require("ds.dispatch")
local index_ops = require("ds.ops.index") -- the scatter_reduce def
local F = C.functions

local is_tensor = C.is_tensor

local function need_tensor(name, x, what)
  if not is_tensor(x) then errors.raise(string.format("%s: %s must be a tensor, got %s", name, what, type(x))) end
  return x
end

-- repeat_interleave(x, repeats, dim = nil, {output_size =}): each slice of x along dim (of the flattened x
-- without dim) repeated repeats times; repeats a number or a 1-D integer tensor (one count per slice, read
-- eagerly: the output's size depends on it). repeat_interleave(counts) alone gives 1, 1, ..(counts[1] times), 2, ...
C.export("repeat_interleave", function(x, repeats, dim, opts)
  need_tensor("repeat_interleave", x, "input")
  if type(dim) == "table" then opts, dim = dim, nil end
  options.check(opts, "repeat_interleave", { output_size = "integer" })
  if repeats == nil then
    if #x._shape ~= 1 or not dtype.is_int[x.dtype] then
      errors.raise("repeat_interleave: counts alone must be a 1-D integer tensor, got " .. x.dtype .. " " .. S.str(x._shape))
    end
    return F.repeat_interleave(F.arange(1, x._shape[1] + 1, { dtype = "i64" }), x)
  end
  if dim == nil then x, dim = x:reshape(-1), 1 end
  local d = S.dim(dim, #x._shape, "repeat_interleave of " .. S.str(x._shape))
  if type(repeats) == "number" then
    if repeats < 0 or repeats ~= math.floor(repeats) then
      errors.raise("repeat_interleave: repeats must be a non-negative integer, got " .. tostring(repeats))
    end
    local wide, big, out = {}, {}, {}
    for i, s in ipairs(x._shape) do
      wide[#wide + 1] = s; big[#big + 1] = s
      if i == d then wide[#wide + 1] = 1; big[#big + 1] = repeats end
      out[i] = i == d and S.mul(s, repeats) or s
    end
    return x:reshape(wide):expand(big):reshape(out)
  end
  need_tensor("repeat_interleave", repeats, "repeats")
  if not dtype.is_int[repeats.dtype] or #repeats._shape > 1 then
    errors.raise(string.format("repeat_interleave: repeats must be a number or a 0-d/1-D integer tensor, got %s %s",
      repeats.dtype, S.str(repeats._shape)))
  end
  if state.trace then
    errors.raise("repeat_interleave: repeats as a tensor decides the output's size from its values, so it cannot "
      .. "be traced; give a number, or compute the indices eagerly")
  end
  local counts = repeats:reshape(-1):totable()
  if #counts == 1 then return F.repeat_interleave(x, counts[1], d) end
  if #counts ~= x._shape[d] then
    errors.raise(string.format("repeat_interleave: %d repeats for size %s of dim %d", #counts, tostring(x._shape[d]), d))
  end
  local idx = {}
  for i, c in ipairs(counts) do
    if c < 0 then errors.raise("repeat_interleave: repeats must be non-negative, got " .. c) end
    for _ = 1, c do idx[#idx + 1] = i end
  end
  local index = #idx > 0 and F.tensor(idx, { dtype = "i64" }) or F.zeros({ 0 }, { dtype = "i64" })
  return F.index_select(x, d, index)
end)

-- a bool mask, true at the 1-based indices along dim d of x, shaped to broadcast against x
local function index_mask(x, d, index)
  local n = x._shape[d]
  local hits = F.index_add(F.zeros({ n }, { dtype = "i64" }), 1, index:reshape(-1), F.ones_like(index:reshape(-1)))
  local shape = {}
  for i = 1, #x._shape do shape[i] = i == d and n or 1 end
  return hits:gt(0):reshape(shape)
end

local function dim_and_index(name, x, dim, index)
  need_tensor(name, x, "input"); need_tensor(name, index, "index")
  if #index._shape > 1 then errors.raise(name .. ": index must be 0-d or 1-D, got " .. S.str(index._shape)) end
  if #x._shape == 0 then x = x:reshape(1) end
  return S.dim(dim, #x._shape, name .. " of " .. S.str(x._shape)), index
end

-- index_fill(x, dim, index, value): x with the slices at index along dim set to value (a number or a 0-d tensor)
local function index_fill(x, dim, index, value)
  local d
  d, index = dim_and_index("index_fill", x, dim, index)
  local xs = #x._shape == 0 and x:reshape(1) or x
  return F.masked_fill(xs, index_mask(xs, d, index), value):reshape(x._shape)
end
C.export("index_fill", index_fill)
Tensor._define("ds.ops.index_compose", {
  index_fill_ = function(x, dim, index, value) return x:copy_(index_fill(x, dim, index, value)) end,
})

-- index_copy(x, dim, index, source): x with source's slices written at index along dim (repeated indices:
-- PyTorch leaves the winner unspecified; here they sum)
local function index_copy(x, dim, index, source)
  local d
  d, index = dim_and_index("index_copy", x, dim, index)
  need_tensor("index_copy", source, "source")
  local xs = #x._shape == 0 and x:reshape(1) or x
  local src = #source._shape == 0 and source:reshape(1) or source
  local written = F.index_add(F.zeros_like(xs), d, index:reshape(-1), src:astype(x.dtype))
  return F.where(index_mask(xs, d, index), written, xs):reshape(x._shape)
end
C.export("index_copy", index_copy)
Tensor._define("ds.ops.index_compose", { index_copy_ = function(x, dim, index, source, opts)
  options.check(opts, "index_copy_", {})
  return x:copy_(index_copy(x, dim, index, source))
end })

-- masked_scatter(x, mask, source): where mask (broadcast to x) is true, source's elements in row-major order
local function masked_scatter(x, mask, source)
  need_tensor("masked_scatter", x, "input"); need_tensor("masked_scatter", mask, "mask")
  need_tensor("masked_scatter", source, "source")
  if mask.dtype ~= "bool" then errors.raise("masked_scatter: mask must be a bool tensor, got " .. mask.dtype) end
  if source.dtype ~= x.dtype then
    errors.raise(string.format("masked_scatter: source is %s, input %s (they must agree)", source.dtype, x.dtype))
  end
  local m = mask:expand(S.broadcast(x._shape, mask._shape, "masked_scatter")):reshape(-1)
  local taken = F.where(m, m:cumsum(1), 1) -- the 1-based position in source of each written element
  local values = F.gather(source:reshape(-1), 1, taken)
  return F.where(m, values, x:reshape(-1)):reshape(x._shape)
end
C.export("masked_scatter", masked_scatter)
Tensor._define("ds.ops.index_compose", {
  masked_scatter_ = function(x, mask, source) return x:copy_(masked_scatter(x, mask, source)) end,
})

-- take_along_dim(x, indices, dim = nil): gather along dim after broadcasting the other dims of x and indices
-- (dim = nil: over the flattened x)
C.export("take_along_dim", function(x, indices, dim)
  need_tensor("take_along_dim", x, "input"); need_tensor("take_along_dim", indices, "indices")
  if dim == nil then return F.gather(x:reshape(-1), 1, indices:reshape(-1)) end
  if #x._shape ~= #indices._shape then
    errors.raise(string.format("take_along_dim: input %s and indices %s must have as many dims", S.str(x._shape),
      S.str(indices._shape)))
  end
  local d = S.dim(dim, #x._shape, "take_along_dim of " .. S.str(x._shape))
  local xs, is = {}, {}
  for i = 1, #x._shape do
    local b = i ~= d and S.broadcast({ x._shape[i] }, { indices._shape[i] }, "take_along_dim")[1]
    xs[i] = b or x._shape[i]; is[i] = b or indices._shape[i]
  end
  return F.gather(x:expand(xs), d, indices:expand(is))
end)

-- the insertion points of values in sorted (its last dim sorted; 1-D, or with values' leading dims): the
-- number of sorted values below each value (at or below with right) plus 1, i64 (i32 with out_int32)
local function insertion(sorted, values, right, out_int32)
  local scalar = not is_tensor(values)
  if scalar then values = F.full({}, values, { dtype = sorted.dtype }) end
  local below
  if #sorted._shape == 1 then
    local v = values:unsqueeze(-1)
    below = right and sorted:le(v) or sorted:lt(v)
  else
    local v = values:unsqueeze(-1)
    local s = sorted:unsqueeze(-2)
    below = right and s:le(v) or s:lt(v)
  end
  local pos = below:sum(-1) + 1
  return out_int32 and pos:astype("i32") or pos
end

-- searchsorted(sorted_sequence, values, {right = false, side = "left"|"right", out_int32 = false, sorter =})
C.export("searchsorted", function(sorted, values, opts)
  need_tensor("searchsorted", sorted, "sorted_sequence")
  opts = options.check(opts, "searchsorted", { right = "boolean", side = { "left", "right" }, out_int32 = "boolean",
    sorter = "tensor" })
  if opts.side and opts.right ~= nil and (opts.side == "right") ~= opts.right then
    errors.raise("searchsorted: side and right disagree")
  end
  if opts.sorter then sorted = F.gather(sorted, -1, opts.sorter) end
  if #sorted._shape > 1 and is_tensor(values) then
    for i = 1, #sorted._shape - 1 do
      if not S.same(sorted._shape[i], values._shape[i]) or #values._shape ~= #sorted._shape then
        errors.raise(string.format("searchsorted: sorted_sequence %s and values %s differ in their leading dims",
          S.str(sorted._shape), S.str(values._shape)))
      end
    end
  end
  return insertion(sorted, values, opts.right or opts.side == "right", opts.out_int32)
end, { method = false })

-- bucketize(x, boundaries, {right = false, out_int32 = false}): the 1-based bucket of each value (boundaries 1-D)
C.export("bucketize", function(x, boundaries, opts)
  need_tensor("bucketize", boundaries, "boundaries")
  if #boundaries._shape ~= 1 then errors.raise("bucketize: boundaries must be 1-D, got " .. S.str(boundaries._shape)) end
  opts = options.check(opts, "bucketize", { right = "boolean", out_int32 = "boolean" })
  return insertion(boundaries, x, opts.right, opts.out_int32)
end)

-- scatter_reduce(x, dim, index, src, reduce, {include_self = true}): reduce sum, prod, amax, amin or mean (x's
-- element counted once with include_self; integers' means floor); include_self = false reduces the src
-- elements alone where index hits and keeps x elsewhere
local function scatter_reduce_kernel(x, dim, index, src, reduce)
  return D.call(index_ops.scatter_reduce, { x, index, src }, { dim = dim, reduce = reduce })
end
local function scatter_reduce(x, dim, index, src, reduce, opts)
  local include = options.check(opts, "scatter_reduce", { include_self = "boolean" }).include_self ~= false
  if reduce ~= "mean" and include then return scatter_reduce_kernel(x, dim, index, src, reduce) end
  need_tensor("scatter_reduce", x, "input"); need_tensor("scatter_reduce", index, "index")
  need_tensor("scatter_reduce", src, "src")
  if reduce ~= "mean" and reduce ~= "sum" and reduce ~= "prod" and reduce ~= "amax" and reduce ~= "amin" then
    errors.raise("scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', got " .. tostring(reduce))
  end
  local count = F.scatter_add(F.zeros_like(x), dim, index, F.ones_like(index, { dtype = x.dtype }))
  local hit = count:gt(0)
  local float = dtype.is_float[x.dtype]
  if reduce == "mean" then
    local total = scatter_reduce_kernel(include and x or F.where(hit, 0, x), dim, index, src, "sum")
    local n = include and count + 1 or F.where(hit, count, 1)
    return float and total / n or F.floor_divide(total, n)
  end
  if S.numel(src._shape) == 0 then return x end
  local identity = ({ sum = 0, prod = 1 })[reduce]
  if identity == nil then
    if float then identity = reduce == "amax" and -math.huge or math.huge
    else identity = reduce == "amax" and src:amin() or src:amax() end -- no gradient for integers
  end
  return scatter_reduce_kernel(F.where(hit, identity, x), dim, index, src, reduce)
end
C.export("scatter_reduce", scatter_reduce, { replace = true }) -- ops/index.lua's, with mean and include_self
Tensor._define("ds.ops.index_compose", { scatter_reduce_ = function(x, dim, index, src, reduce, opts)
  return x:copy_(scatter_reduce(x, dim, index, src, reduce, opts))
end })
