-- ops/quantized.lua: int8 linear layers on src/qgemm.c. `linear_int8(x, w, wscale, bias)`: x (..., K) f32, w (N, K)
-- i8 (a weight quantized per output channel: W ~ w * wscale), wscale (N) f32, bias (N) f32 -> (..., N) f32, each row
-- of x quantized to u8 on the fly with its own scale and zero point (dynamic quantization), exact int32 products,
-- dequantized with the bias in one fixed f32 computation: the same bits on every host, path, thread count and
-- batch. `linear_int8_static(x, w, wscale, bias, x_scale, x_zero_point)`: the same with x quantized by a fixed
-- scale ({} f32 > 0) and zero point ({} u8) from calibration (static quantization). For frozen weights
-- (passes/prepack.lua): `pack_int8_weight` (w -> the kernels' strips), `int8_colsum` (w's row sums, for the zero
-- points) and `linear_int8_packed` / `linear_int8_static_packed`, the same ops reading them; `linear_int8_multi<n>`
-- several of them over one input as one product.
-- `conv2d_int8(x (B, C, H, W), w (O, C, kh, kw) i8, wscale (O), bias (O), {stride, padding, dilation})` and
-- `conv2d_int8_static(..., x_scale, x_zero_point, opts)` (src/qconv.c): each image quantized as a whole (its own
-- range, or the fixed one), unfolded, the same integer products and f32 dequantization as linear_int8;
-- `pack_int8_conv_weight` and `conv2d_int8[_static]_packed`, the same reading a constant weight packed once.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local conv_out = require("ds.ops.conv_shape").conv_out
local F = C.functions

local OP = "linear_int8"
local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

local function need_dtype(x, want, what, op)
  if x.dtype ~= want then raise("%s: %s must be %s, got %s", op, what, want, x.dtype) end
end

-- x (..., K), then N: the output shape (..., N)
local function out_shape(x, K, N, op)
  local xs = x._shape
  if #xs < 1 or not S.same(xs[#xs], K) then raise("%s: input %s does not end in K = %s", op, S.str(xs), tostring(K)) end
  local out = {}
  for i = 1, #xs - 1 do out[i] = xs[i] end
  out[#xs] = N
  return out
end

-- x (..., H, D) read as rows of K = H * D when xdims is 2 (passes/prepack.lua: attention's heads), else x (..., K):
-- the output shape (..., N)
local function rows_shape(x, K, N, xdims, op)
  if xdims ~= 2 then return out_shape(x, K, N, op) end
  local xs, out = x._shape, {}
  if #xs < 2 or not S.same(xs[#xs - 1] * xs[#xs], K) then
    raise("%s: input %s does not end in H x D = K = %s", op, S.str(xs), tostring(K))
  end
  for i = 1, #xs - 2 do out[i] = xs[i] end
  out[#xs - 1] = N
  return out
end

local function check_vectors(ws, b, N, op)
  need_dtype(ws, "f32", "wscale", op)
  need_dtype(b, "f32", "bias", op)
  if not S.equal(ws._shape, { N }) or not S.equal(b._shape, { N }) then
    raise("%s: wscale %s and bias %s must be (N) = (%s)", op, S.str(ws._shape), S.str(b._shape), tostring(N))
  end
end

local function contiguous_all(inputs)
  for i = 1, #inputs do inputs[i] = F.contiguous(inputs[i]) end
  return inputs
end

local function f32_kernel() return "f32" end

local M = {}

M.linear_int8 = D.define {
  name = OP, kind = "nn", kernel = "ds_linear_int8_%s", dtypes = { f32 = true }, lowp_inputs = true, ninputs = 4,
  doc = "x @ W^T + bias with W stored int8 per output channel (W ~ w * wscale) and each row of x quantized to u8 "
    .. "on the fly: exact int32 products, the same bits on every host (ds.quantize builds it)",
  kernel_dtype = f32_kernel,
  promote = contiguous_all,
  infer = function(inputs)
    local x, w, ws, b = inputs[1], inputs[2], inputs[3], inputs[4]
    need_dtype(x, "f32", "input", OP)
    need_dtype(w, "i8", "weight", OP)
    if #w._shape ~= 2 then raise("%s: weight must be (N, K), got %s", OP, S.str(w._shape)) end
    check_vectors(ws, b, w._shape[1], OP)
    return { shape = out_shape(x, w._shape[2], w._shape[1], OP), dtype = "f32" }
  end,
  sample = function()
    local x = F.sin(F.arange(24, { dtype = "f32" }) * 0.37):reshape(2, 3, 4)
    local w = (F.arange(20, { dtype = "f32" }) * 13 % 255 - 127):reshape(5, 4):astype("i8")
    local ws, b = F.arange(5, { dtype = "f32" }) * 0.01 + 0.02, F.cos(F.arange(5, { dtype = "f32" }))
    return { x, w, ws, b }, {}, function(x_, w_, ws_, b_) return F.linear_int8(x_, w_, ws_, b_) end
  end,
}

M.pack_int8_weight = D.define {
  name = "pack_int8_weight", kind = "fused", kernel = "ds_pack_int8_weight_%s", dtypes = { i8 = true }, ninputs = 1,
  internal = true,
  infer = function(inputs)
    local w = inputs[1]._shape
    return { shape = { math.floor((w[1] + 15) / 16), math.floor((w[2] + 3) / 4), 64 }, dtype = "i8" }
  end,
}

M.int8_colsum = D.define {
  name = "int8_colsum", kind = "fused", kernel = "ds_int8_colsum_%s", dtypes = { i8 = true }, ninputs = 1,
  internal = true,
  infer = function(inputs) return { shape = { inputs[1]._shape[1] }, dtype = "i32" } end,
}

local STATIC = "linear_int8_static"
-- x_scale {} f32 and x_zero_point {} u8 of a static op
local function check_fixed(xs, xz, op)
  need_dtype(xs, "f32", "x_scale", op)
  need_dtype(xz, "u8", "x_zero_point", op)
  if S.numel(xs._shape) ~= 1 or S.numel(xz._shape) ~= 1 then
    raise("%s: x_scale %s and x_zero_point %s must be single values", op, S.str(xs._shape), S.str(xz._shape))
  end
end

M.linear_int8_static = D.define {
  name = STATIC, kind = "nn", kernel = "ds_linear_int8_static_%s", dtypes = { f32 = true }, lowp_inputs = true,
  ninputs = 6,
  doc = "linear_int8 with x quantized by a fixed scale and zero point (static quantization: ds.quantize's "
    .. "calibration): exact int32 products, the same bits on every host",
  kernel_dtype = f32_kernel,
  promote = contiguous_all,
  infer = function(inputs)
    local x, w, ws, b = inputs[1], inputs[2], inputs[3], inputs[4]
    need_dtype(x, "f32", "input", STATIC)
    need_dtype(w, "i8", "weight", STATIC)
    if #w._shape ~= 2 then raise("%s: weight must be (N, K), got %s", STATIC, S.str(w._shape)) end
    check_vectors(ws, b, w._shape[1], STATIC)
    check_fixed(inputs[5], inputs[6], STATIC)
    return { shape = out_shape(x, w._shape[2], w._shape[1], STATIC), dtype = "f32" }
  end,
  sample = function()
    local x = F.sin(F.arange(24, { dtype = "f32" }) * 0.37):reshape(2, 3, 4)
    local w = (F.arange(20, { dtype = "f32" }) * 13 % 255 - 127):reshape(5, 4):astype("i8")
    local ws, b = F.arange(5, { dtype = "f32" }) * 0.01 + 0.02, F.cos(F.arange(5, { dtype = "f32" }))
    local xs, xz = F.full({}, 2 / 255, { dtype = "f32" }), F.full({}, 128, { dtype = "u8" })
    return { x, w, ws, b, xs, xz }, {}, function(...) return F.linear_int8_static(...) end
  end,
}

-- x, packed w, colsum, wscale, bias; attrs: K, xdims (rows_shape)
M.linear_int8_packed = D.define {
  name = "linear_int8_packed", kind = "fused", kernel = "ds_linear_int8_packed_%s",
  dtypes = { f32 = true }, lowp_inputs = true, ninputs = 5, internal = true, kernel_dtype = f32_kernel,
  attrs = { { "K", "int" }, { "xdims", "int", 1 } },
  infer = function(inputs, a)
    local N = inputs[3]._shape[1]
    check_vectors(inputs[4], inputs[5], N, "linear_int8_packed")
    return { shape = rows_shape(inputs[1], a.K, N, a.xdims, "linear_int8_packed"), dtype = "f32" }
  end,
}

-- x, packed w, colsum, wscale, bias, x_scale, x_zero_point; attrs: K, xdims (rows_shape)
M.linear_int8_static_packed = D.define {
  name = "linear_int8_static_packed", kind = "fused", kernel = "ds_linear_int8_static_packed_%s",
  dtypes = { f32 = true }, lowp_inputs = true, ninputs = 7, internal = true, kernel_dtype = f32_kernel,
  attrs = { { "K", "int" }, { "xdims", "int", 1 } },
  infer = function(inputs, a)
    local N = inputs[3]._shape[1]
    check_vectors(inputs[4], inputs[5], N, "linear_int8_static_packed")
    check_fixed(inputs[6], inputs[7], "linear_int8_static_packed")
    return { shape = rows_shape(inputs[1], a.K, N, a.xdims, "linear_int8_static_packed"), dtype = "f32" }
  end,
}

-- n int8 linears over one x as one product (passes/prepack.lua): x, the weights packed one after another, their
-- colsums, wscales and biases joined; attrs: K, xdims (rows_shape), sizes = {N_1 .. N_n} -> n outputs (..., N_p),
-- each the bits linear_int8_packed gives it alone
local multi = {}
function M.linear_int8_multi(n)
  if not multi[n] then
    multi[n] = D.define {
      name = "linear_int8_multi" .. n, kind = "fused", kernel = "ds_linear_int8_multi_%s",
      dtypes = { f32 = true }, lowp_inputs = true, ninputs = 5, noutputs = n, internal = true,
      kernel_dtype = f32_kernel,
      attrs = { { "K", "int" }, { "xdims", "int", 1 }, { "sizes", "ints" } },
      infer = function(inputs, a)
        local N, out = 0, {}
        for p = 1, n do
          N = N + a.sizes[p]
          out[p] = { shape = rows_shape(inputs[1], a.K, a.sizes[p], a.xdims, "linear_int8_multi"), dtype = "f32" }
        end
        check_vectors(inputs[4], inputs[5], N, "linear_int8_multi")
        return out
      end,
    }
  end
  return multi[n]
end

-- the int8 convolution's definition (static: with x_scale, x_zero_point)
local function conv_def(name, static)
  return D.define {
    name = name, kind = "nn", kernel = "ds_" .. name .. "_%s", dtypes = { f32 = true }, lowp_inputs = true,
    ninputs = static and 6 or 4,
    doc = static and "conv2d_int8 with x quantized by a fixed scale and zero point (static quantization)"
      or "2-D convolution (groups 1) with the weight stored int8 per output channel and each image of x quantized "
      .. "to u8 on the fly: exact int32 products, the same bits on every host (ds.quantize builds it)",
    kernel_dtype = f32_kernel,
    promote = contiguous_all,
    attrs = { { "stride", "ints", { 1, 1 } }, { "padding", "ints", { 0, 0 } }, { "dilation", "ints", { 1, 1 } } },
    pack = function(a)
      return { a.stride[1], a.stride[2], a.padding[1], a.padding[2], a.dilation[1], a.dilation[2] }
    end,
    infer = function(inputs, a)
      local x, w = inputs[1], inputs[2]
      need_dtype(x, "f32", "input", name)
      need_dtype(w, "i8", "weight", name)
      local xs, ws = x._shape, w._shape
      if #xs ~= 4 or #ws ~= 4 or not S.same(xs[2], ws[2]) then
        raise("%s: input %s and weight %s must be (B, C, H, W) and (O, C, kh, kw)", name, S.str(xs), S.str(ws))
      end
      for _, k in ipairs({ "stride", "dilation" }) do
        if #a[k] ~= 2 or a[k][1] < 1 or a[k][2] < 1 then raise("%s: %s must be two integers >= 1", name, k) end
      end
      if #a.padding ~= 2 or a.padding[1] < 0 or a.padding[2] < 0 then
        raise("%s: padding must be two integers >= 0", name)
      end
      check_vectors(inputs[3], inputs[4], ws[1], name)
      if static then check_fixed(inputs[5], inputs[6], name) end
      return { shape = { xs[1], ws[1], conv_out(xs[3], ws[3], a.stride[1], a.padding[1], a.dilation[1], name, xs, ws),
        conv_out(xs[4], ws[4], a.stride[2], a.padding[2], a.dilation[2], name, xs, ws) }, dtype = "f32" }
    end,
    sample = function()
      local x = F.sin(F.arange(2 * 2 * 5 * 4, { dtype = "f32" }) * 0.37):reshape(2, 2, 5, 4)
      local w = (F.arange(3 * 2 * 2 * 2, { dtype = "f32" }) * 13 % 255 - 127):reshape(3, 2, 2, 2):astype("i8")
      local ws, b = F.arange(3, { dtype = "f32" }) * 0.01 + 0.02, F.cos(F.arange(3, { dtype = "f32" }))
      local inputs = { x, w, ws, b }
      if static then
        inputs[5], inputs[6] = F.full({}, 2 / 255, { dtype = "f32" }), F.full({}, 128, { dtype = "u8" })
      end
      local attrs = { padding = { 1, 1 }, stride = { 2, 1 } }
      return inputs, attrs, function(...)
        local args = { ... }
        args[#inputs + 1] = attrs
        return F[name](unpack(args, 1, #inputs + 1))
      end
    end,
  }
end
M.conv2d_int8 = conv_def("conv2d_int8", false)
M.conv2d_int8_static = conv_def("conv2d_int8_static", true)

-- for a constant weight (passes/prepack.lua): w (O, C, kh, kw) i8 -> its layout for src/qconv.c as int32 words
-- (attrs: the convolution's column dilation, which decides the grouping of the taps), and conv2d_int8[_static]
-- reading it (attrs: stride, padding, dilation, kernel = {kh, kw}); the same bits
M.pack_int8_conv_weight = D.define {
  name = "pack_int8_conv_weight", kind = "fused", kernel = "ds_pack_int8_conv_weight_%s", dtypes = { i8 = true },
  ninputs = 1, internal = true, attrs = { { "dilation", "int", 1 } },
  infer = function(inputs)
    local w = inputs[1]._shape
    local G = math.floor((w[2] * w[3] * w[4] + 3) / 4)
    return { shape = { 5 + w[1] * (1 + 3 * G) + 12 * G }, dtype = "i32" }   -- src/qconv.c's packed_len
  end,
}

local function conv_packed_def(name, static)
  return D.define {
    name = name, kind = "fused", kernel = "ds_" .. name .. "_%s", dtypes = { f32 = true }, lowp_inputs = true,
    ninputs = static and 6 or 4, internal = true, kernel_dtype = f32_kernel,
    attrs = { { "stride", "ints", { 1, 1 } }, { "padding", "ints", { 0, 0 } }, { "dilation", "ints", { 1, 1 } },
              { "kernel", "ints" } },
    pack = function(a)
      return { a.stride[1], a.stride[2], a.padding[1], a.padding[2], a.dilation[1], a.dilation[2], a.kernel[1],
               a.kernel[2] }
    end,
    infer = function(inputs, a)
      local xs, k, O = inputs[1]._shape, a.kernel, inputs[3]._shape[1]
      check_vectors(inputs[3], inputs[4], O, name)
      local ws = { O, xs[2], k[1], k[2] }
      return { shape = { xs[1], O, conv_out(xs[3], k[1], a.stride[1], a.padding[1], a.dilation[1], name, xs, ws),
        conv_out(xs[4], k[2], a.stride[2], a.padding[2], a.dilation[2], name, xs, ws) }, dtype = "f32" }
    end,
  }
end
M.conv2d_int8_packed = conv_packed_def("conv2d_int8_packed", false)
M.conv2d_int8_static_packed = conv_packed_def("conv2d_int8_static_packed", true)

-- x, w, wscale checked as tensors, bias (nil: zeros) made one: the list of inputs of op
local function linear_inputs(op, x, w, wscale, bias)
  local given = { x, w, wscale }
  for i, name in ipairs { "x", "w", "wscale" } do
    if not C.is_tensor(given[i]) then raise("%s: %s must be a tensor, got %s", op, name, type(given[i])) end
  end
  if bias == nil then bias = F.zeros(w._shape[1], { dtype = "f32" }) end
  if not C.is_tensor(bias) then raise("%s: bias must be a tensor or nil, got %s", op, type(bias)) end
  return { x, w, wscale, bias }
end

-- ds.linear_int8(x, w, wscale, bias): see the header; bias may be nil (zeros)
C.export(OP, function(x, w, wscale, bias, opts)
  options.check(opts, OP, {})   -- it takes none: any key is an error
  return D.call(M.linear_int8, linear_inputs(OP, x, w, wscale, bias), {})
end, { method = false })

-- ds.linear_int8_static(x, w, wscale, bias, x_scale, x_zero_point): see the header; bias may be nil (zeros)
C.export(STATIC, function(x, w, wscale, bias, x_scale, x_zero_point, opts)
  options.check(opts, STATIC, {})   -- it takes none: any key is an error
  local inputs = linear_inputs(STATIC, x, w, wscale, bias)
  if not C.is_tensor(x_scale) or not C.is_tensor(x_zero_point) then
    raise("%s: x_scale and x_zero_point must be tensors ({} f32 and {} u8)", STATIC)
  end
  inputs[5], inputs[6] = x_scale, x_zero_point
  return D.call(M.linear_int8_static, inputs, {})
end, { method = false })

-- a number or pair option of a convolution as a pair
local function pair(v, what, op)
  if type(v) == "number" then return { v, v } end
  if type(v) == "table" and #v == 2 and type(v[1]) == "number" and type(v[2]) == "number" then return v end
  raise("%s: %s must be a number or a pair of numbers, got %s", op, what, tostring(v))
end
local CONV_OPTS = { stride = "any", padding = "any", dilation = "any" }
local function conv_attrs(opts, op)
  opts = options.check(opts, op, CONV_OPTS)
  return { stride = pair(opts.stride or 1, "stride", op), padding = pair(opts.padding or 0, "padding", op),
    dilation = pair(opts.dilation or 1, "dilation", op) }
end

-- ds.conv2d_int8(x, w, wscale, bias, {stride, padding, dilation}): see the header; bias may be nil (zeros)
C.export("conv2d_int8", function(x, w, wscale, bias, opts)
  return D.call(M.conv2d_int8, linear_inputs("conv2d_int8", x, w, wscale, bias), conv_attrs(opts, "conv2d_int8"))
end, { method = false })

-- ds.conv2d_int8_static(x, w, wscale, bias, x_scale, x_zero_point, {stride, padding, dilation})
C.export("conv2d_int8_static", function(x, w, wscale, bias, x_scale, x_zero_point, opts)
  local op = "conv2d_int8_static"
  local inputs = linear_inputs(op, x, w, wscale, bias)
  if not C.is_tensor(x_scale) or not C.is_tensor(x_zero_point) then
    raise("%s: x_scale and x_zero_point must be tensors ({} f32 and {} u8)", op)
  end
  inputs[5], inputs[6] = x_scale, x_zero_point
  return D.call(M.conv2d_int8_static, inputs, conv_attrs(opts, op))
end, { method = false })

return M
