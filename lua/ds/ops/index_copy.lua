-- ops/index_copy.lua: ds.index_copy_(x, dim, index, src): x.select(dim, index[j]) = src.select(dim, j) in place on
-- one C kernel (src/index_copy.c), no autograd; in a compiled graph a module buffer is written where it lives,
-- which is how a preallocated KV cache (nn/kv_cache.lua) takes new positions without a plan per length.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local tape = require("ds.tape")
local first = #D.list + 1 -- this family's ops, returned at the end

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- x (..., n, ...), index (m) i64, src (..., m, ...): no outputs; x (input 1) is written in place
local def = D.define {
  name = "index_copy_", doc = "x with the slices of src written at 1-based indices along dim, in place (index_copy_)",
  kind = "update", kernel = "ds_index_copy_%s", dtypes = C.ALL, ninputs = 3, noutputs = 0, mutates = { 1 },
  attrs = { { "dim", "dim" } }, args = { "dim" },
  prepare = function(inputs, attrs)
    local x, ix, src = inputs[1], inputs[2], inputs[3]
    for i, what in ipairs { "x", "index", "src" } do
      if not C.is_tensor(inputs[i]) then raise("index_copy_: %s must be a tensor, got %s", what, type(inputs[i])) end
    end
    if #x._shape == 0 then raise("index_copy_: x must have at least 1 dim") end
    attrs.dim = S.dim(attrs.dim, #x._shape, "index_copy_")
    if ix.dtype ~= "i64" or #ix._shape > 1 then
      raise("index_copy_: index must be a 0-d or 1-D i64 tensor of 1-based indices, got %s %s", ix.dtype,
        S.str(ix._shape))
    end
    local want = {}
    for i, d in ipairs(x._shape) do want[i] = d end
    want[attrs.dim] = S.numel(ix._shape)
    if not S.equal(src._shape, want) then
      raise("index_copy_: src has shape %s, expected %s (x %s with %s indices in dim %d)", S.str(src._shape),
        S.str(want), S.str(x._shape), tostring(want[attrs.dim]), attrs.dim)
    end
    if src.dtype ~= x.dtype then raise("index_copy_: src is %s, x is %s (convert with :astype)", src.dtype, x.dtype) end
  end,
  infer = function() return {} end,
  kernel_dtype = function(inputs) return inputs[1].dtype end,
  sample = function()
    local T = C.functions.tensor
    return { C.functions.zeros(2, 5), T({ 4, 2 }, { dtype = "i64" }), T({ { 1, 2 }, { 3, 4 } }) }, {},
      function(x, ix, src) return C.functions.index_copy_(x, 2, ix, src) * 1 end
  end,
}

-- ds.index_copy_(x, dim, index, src): x written in place and returned (x:index_copy_, ops/index_compose.lua, is
-- the differentiable composition)
local function index_copy_(x, dim, index, src, opts)
  options.check(opts, "index_copy_", {})
  if state.grad_enabled and (tape.requires(x) or tape.requires(src)) then
    raise("index_copy_: no gradient flows through index_copy_ (x or src requires grad); call it inside ds.no_grad")
  end
  if state.trace and C.is_tensor(x) and rawget(x, "_base") then
    raise("index_copy_: x is a view inside a traced function; a graph writes whole tensors: index_copy_ into the "
      .. "tensor it views")
  end
  D.call(def, { x, index, src }, { dim = dim }) -- dispatch bumps x's version (def.mutates)
  return x
end
C.export("index_copy_", index_copy_, { method = false, args = { "tensor", "integer", "tensor", "tensor", "table?" } })

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
