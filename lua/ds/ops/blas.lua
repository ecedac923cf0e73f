-- ops/blas.lua: matmul (1-D, 2-D, batched with broadcasting) on sgemm/dgemm.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local sum_to = require("ds.autograd").sum_to
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

-- the kernel sees >= 2-D operands; 1-D operands are unsqueezed by the API and squeezed after
D.define {
  name = "matmul", kind = "matmul", kernel = "ds_matmul_%s", dtypes = C.NUMERIC, ninputs = 2,
  doc = "matrix product, batched with broadcasting; integer operands keep their dtype (src/matmul_int.c)",
  -- floats (and int with float) compute in the float dtype; integers keep theirs (as PyTorch); bool is refused
  promote = function(inputs)
    local dt = C.result_dtype(inputs)
    if dt == "bool" then errors.raise("matmul: bool operands are not supported (as in torch); convert with :long()") end
    return C.promote_same(inputs)
  end,
  infer = function(inputs)
    local a, b = inputs[1]._shape, inputs[2]._shape
    local na, nb = #a, #b
    if na < 2 or nb < 2 then errors.raise("matmul: kernel operands must be >= 2-D") end
    if not S.same(a[na], b[nb - 1]) then
      errors.raise(string.format("matmul: inner dims %s and %s differ (%s @ %s)", tostring(a[na]), tostring(b[nb - 1]),
        S.str(a), S.str(b)))
    end
    local ba, bb = {}, {}
    for i = 1, na - 2 do ba[i] = a[i] end
    for i = 1, nb - 2 do bb[i] = b[i] end
    local s = S.broadcast(ba, bb, "matmul")
    local out = {}
    for i, d in ipairs(s) do out[i] = d end
    out[#out + 1] = a[na - 1]; out[#out + 1] = b[nb]
    return { shape = out, dtype = inputs[1].dtype }
  end,
  backward = function(ctx, g)
    local a, b = ctx.inputs[1], ctx.inputs[2]
    local ga = ctx.needs[1] and sum_to(F.matmul(g, b:transpose(-1, -2)), a._shape) or nil
    local gb = ctx.needs[2] and sum_to(F.matmul(a:transpose(-1, -2), g), b._shape) or nil
    return ga, gb
  end,
}

local mm = D.by_name.matmul
C.export("matmul", function(a, b, opts)
  options.check(opts, "matmul", {})
  if not (C.is_tensor(a) and C.is_tensor(b)) then errors.raise("matmul: both operands must be tensors") end
  local na, nb = #a._shape, #b._shape
  if na == 0 or nb == 0 then
    errors.raise(string.format("matmul: both operands need >= 1 dim, got %s @ %s", S.str(a._shape), S.str(b._shape)))
  end
  if na == 1 and nb == 1 and not S.same(a._shape[1], b._shape[1]) then
    errors.raise(string.format("matmul: inner dims %s and %s differ (%s @ %s)", tostring(a._shape[1]),
      tostring(b._shape[1]), S.str(a._shape), S.str(b._shape)))
  end
  local a2 = na == 1 and a:unsqueeze(1) or a
  local b2 = nb == 1 and b:unsqueeze(2) or b
  local y = D.call(mm, { a2, b2 })
  if na == 1 then y = y:squeeze(-2) end
  if nb == 1 then y = y:squeeze(-1) end
  return y
end)
C.export("mm", C.functions.matmul)
-- bmm(a (B, n, k), b (B, k, m)) -> (B, n, m): 3-D operands of one batch size (no broadcasting, as torch.bmm)
C.export("bmm", function(a, b)
  if not (C.is_tensor(a) and C.is_tensor(b)) then errors.raise("bmm: both operands must be tensors") end
  local sa, sb = a._shape, b._shape
  if #sa ~= 3 or #sb ~= 3 or not S.same(sa[1], sb[1]) then
    errors.raise(string.format("bmm: expects 3-D operands (B, n, k) and (B, k, m) of one batch size, got %s @ %s",
      S.str(sa), S.str(sb)))
  end
  return D.call(mm, { a, b })
end)
local defs = D.defined_since(first) -- this family's op defs by name (bf16's are its own module's)
require("ds.ops.bf16")   -- matmul_bf16 (bf16 products, f32 accumulation)
return defs
