-- ops/bf16.lua: bf16 products with f32 accumulation on src/bgemm.c. `matmul_bf16(a, b)`: a (..., M, K) bf16 @ b
-- (K, N) or (..., K, N) bf16 (the same leading dims as a) -> (..., M, N) f32, each output ds's bf16 dot
-- (docs/DTYPES.md, "bf16 compute": the pairs of k in order, odd k then even k, one rounding per fma, bf16
-- subnormals read as zero, a subnormal sum flushed): vdpbf16ps where the CPU has it, its exact emulation
-- elsewhere, the same bits on every host, path, thread count and batch. ds.compile's {dtype = "bf16"}
-- (passes/autocast.lua) builds it from matmul and linear.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local F = C.functions

local OP = "matmul_bf16"
local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

local M = {}

-- a (..., M, K), b (K, N) or (..., K, N) -> (..., M, N)
local function out_shape(a, b)
  local sa, sb = a._shape, b._shape
  local na, nb = #sa, #sb
  if na < 2 or not (nb == 2 or nb == na) then
    raise("%s: expected a (..., M, K) and b (K, N) or (..., K, N), got %s @ %s", OP, S.str(sa), S.str(sb))
  end
  local ok = S.same(sa[na], sb[nb - 1])
  for i = 1, na - 2 do ok = ok and (nb == 2 or S.same(sa[i], sb[i])) end
  if not ok then raise("%s: shapes %s @ %s do not agree", OP, S.str(sa), S.str(sb)) end
  local out = {}
  for i = 1, na - 1 do out[i] = sa[i] end
  out[na] = sb[nb]
  return out
end

M.matmul_bf16 = D.define {
  name = OP, kind = "matmul", kernel = "ds_matmul_bf16_%s", dtypes = { bf16 = true }, ninputs = 2,
  doc = "a @ b of bf16 operands with f32 accumulation, f32 result (ds's bf16 dot: vdpbf16ps or its exact "
    .. "emulation, the same bits on every host)",
  promote = function(inputs)
    for i, what in ipairs { "a", "b" } do
      if inputs[i].dtype ~= "bf16" then raise("%s: %s must be bf16, got %s", OP, what, inputs[i].dtype) end
      inputs[i] = F.contiguous(inputs[i])
    end
    return inputs
  end,
  infer = function(inputs) return { shape = out_shape(inputs[1], inputs[2]), dtype = "f32" } end,
  sample = function()
    local a = (F.sin(F.arange(24, { dtype = "f32" }) * 0.37)):reshape(2, 3, 4):astype("bf16")
    local b = (F.cos(F.arange(20, { dtype = "f32" }) * 0.21)):reshape(4, 5):astype("bf16")
    return { a, b }, {}, function(a_, b_) return F.matmul_bf16(a_, b_) end
  end,
}

-- for a constant b (passes/autocast.lua's prepack): b (K, N) bf16 -> its strips (ceil(N/16), ceil(K/2), 16) i32
-- (src/bgemm.h), and matmul_bf16 reading them (attrs: N); the same bits
M.pack_bf16_weight = D.define {
  name = "pack_bf16_weight", kind = "fused", kernel = "ds_pack_bf16_weight_%s", dtypes = { bf16 = true },
  ninputs = 1, internal = true,
  infer = function(inputs)
    local b = inputs[1]._shape
    return { shape = { math.floor((b[2] + 15) / 16), math.floor((b[1] + 1) / 2), 16 }, dtype = "i32" }
  end,
}

M.matmul_bf16_packed = D.define {
  name = "matmul_bf16_packed", kind = "fused", kernel = "ds_matmul_bf16_packed_%s", dtypes = { bf16 = true },
  ninputs = 2, internal = true, attrs = { { "N", "int" } },
  infer = function(inputs, a)
    local out = {}
    for i, d in ipairs(inputs[1]._shape) do out[i] = d end
    out[#out] = a.N
    return { shape = out, dtype = "f32" }
  end,
}

-- ds.matmul_bf16(a, b): see the header
C.export(OP, function(a, b, opts)
  options.check(opts, OP, {})
  if not (C.is_tensor(a) and C.is_tensor(b)) then raise("%s: both operands must be tensors", OP) end
  return D.call(M.matmul_bf16, { a, b }, {})
end, { method = false })

return M
