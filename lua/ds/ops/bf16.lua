-- ops/bf16.lua: bf16 products with f32 accumulation on src/bgemm.c. `matmul_bf16(a, b)`: a (..., M, K) bf16 @ b
-- (K, N) or (..., K, N) bf16 (the same leading dims as a) -> (..., M, N) f32, each output ds's bf16 dot
-- (docs/DTYPES.md, "bf16 compute": the pairs of k in order, odd k then even k, one rounding per fma, bf16
-- subnormals read as zero, a subnormal sum flushed): vdpbf16ps where the CPU has it, its exact emulation
-- elsewhere, the same bits on every host, path, thread count and batch. `conv2d_bf16(x, w, b)`: conv2d (groups 1)
-- on the same dot, plus an f32 bias. ds.compile's {dtype = "bf16"} (passes/autocast.lua) builds them from matmul,
-- linear and conv2d.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local nn_ops = require("ds.ops.nn") -- the conv2d def (its shape rule)
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

local CONV = "conv2d_bf16"
-- x (N, C, H, W) bf16, w (OC, C, KH, KW) bf16, b (OC) f32 -> (N, OC, OH, OW) f32: conv2d (groups 1) whose every
-- output is ds's bf16 dot over (c, kh, kw) in PyTorch's unfold order, plus the bias (src/bgemm_conv.c)
M.conv2d_bf16 = D.define {
  name = CONV, kind = "nn", kernel = "ds_conv2d_bf16_%s", dtypes = { bf16 = true }, lowp_inputs = true,
  ninputs = 3,
  attrs = { { "stride", "ints", { 1, 1 } }, { "padding", "ints", { 0, 0 } }, { "dilation", "ints", { 1, 1 } } },
  doc = "conv2d (groups 1) of bf16 input and weight with f32 accumulation plus an f32 bias, f32 result (im2col "
    .. "on matmul_bf16's dot: the same bits on every host)",
  pack = function(a) return { a.stride[1], a.stride[2], a.padding[1], a.padding[2], a.dilation[1], a.dilation[2] } end,
  promote = function(inputs)
    for i, want in ipairs { { "input", "bf16" }, { "weight", "bf16" }, { "bias", "f32" } } do
      if inputs[i].dtype ~= want[2] then raise("%s: %s must be %s, got %s", CONV, want[1], want[2], inputs[i].dtype) end
      inputs[i] = F.contiguous(inputs[i])
    end
    return inputs
  end,
  infer = function(inputs, a)
    for _, k in ipairs { "stride", "padding", "dilation" } do
      local v = a[k]
      if #v ~= 2 or v[1] < (k == "padding" and 0 or 1) or v[2] < (k == "padding" and 0 or 1) then
        raise("%s: %s must be two integers >= %d", CONV, k, k == "padding" and 0 or 1)
      end
    end
    local conv = nn_ops.conv2d
    local out = conv.infer(inputs, { stride = a.stride, padding = a.padding, dilation = a.dilation, groups = 1 }, conv)
    return { shape = out.shape, dtype = "f32" }
  end,
  sample = function()
    local x = F.sin(F.arange(2 * 3 * 5 * 5, { dtype = "f32" }) * 0.3):reshape(2, 3, 5, 5):astype("bf16")
    local w = F.cos(F.arange(4 * 3 * 3 * 3, { dtype = "f32" }) * 0.7):reshape(4, 3, 3, 3):astype("bf16")
    local b = F.arange(4, { dtype = "f32" }) * 0.1
    return { x, w, b }, { padding = { 1, 1 } },
      function(x_, w_, b_) return F.conv2d_bf16(x_, w_, b_, { padding = { 1, 1 } }) end
  end,
}

-- ds.conv2d_bf16(x, w, b, {stride =, padding =, dilation =}): see M.conv2d_bf16 (numbers as pairs)
C.export(CONV, function(x, w, b, opts)
  options.check(opts, CONV, { stride = "any", padding = "any", dilation = "any" })
  if not (C.is_tensor(x) and C.is_tensor(w) and C.is_tensor(b)) then raise("%s: x, w and b must be tensors", CONV) end
  local attrs = {}
  for k, v in pairs(opts or {}) do attrs[k] = type(v) == "number" and { v, v } or v end
  return D.call(M.conv2d_bf16, { x, w, b }, attrs)
end, { method = false })

-- ds.matmul_bf16(a, b): see the header
C.export(OP, function(a, b, opts)
  options.check(opts, OP, {})
  if not (C.is_tensor(a) and C.is_tensor(b)) then raise("%s: both operands must be tensors", OP) end
  return D.call(M.matmul_bf16, { a, b }, {})
end, { method = false })

return M
