-- nn/functional_spatial.lua: ds.F's spatial functions composed from table ops (so they differentiate,
-- trace and compile): pad (constant, reflect, replicate, circular; any number of trailing dims), interpolate
-- (nearest, nearest-exact, area, linear, bilinear, bicubic, trilinear; align_corners), adaptive_avg_pool2d,
-- adaptive_max_pool2d, max_pool2d / avg_pool2d with ceil_mode, conv2d's padding "same" with even kernels, conv1d,
-- conv_transpose2d.
local ops = require("ds.ops")
local D = require("ds.dispatch")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local nn_ops = require("ds.ops.nn") -- the conv2d_backward_input def

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function need_tensor(x, opname)
  if not Tensor.is_tensor(x) then raise("%s: input must be a tensor, got %s", opname, type(x)) end
  return x
end
-- the size of dim d, which these functions need as a number (not a symbolic dim)
local function size(x, d, opname)
  local n = x._shape[d]
  if type(n) ~= "number" then raise("%s: dim %d of %s must have a known size", opname, d, S.str(x._shape)) end
  return n
end
local function index_tensor(list) return ops.tensor(list, { dtype = "i64" }) end
-- a number or {h, w} as a list of n numbers
local function tuple(v, n, opname, what)
  if type(v) == "number" then local t = {}; for i = 1, n do t[i] = v end; return t end
  if type(v) ~= "table" or #v ~= n then
    raise("%s: %s must be a number or a list of %d, got %s", opname, what, n, tostring(v))
  end
  return v
end

-- ---- pad: pad = {left, right} of the last dim, then of the dim before, ... (PyTorch's order) ----
-- source position (0-based) of output position j of a dim of size n padded by l on the left
local SOURCE = {
  reflect = function(j, n) if j < 0 then return -j elseif j >= n then return 2 * (n - 1) - j end return j end,
  replicate = function(j, n) return math.min(math.max(j, 0), n - 1) end,
  circular = function(j, n) return j % n end,
}
local function pad_constant(x, d, l, r, value)
  if l < 0 then x = x:narrow(d, 1 - l, size(x, d, "pad") + l); l = 0 end
  if r < 0 then x = x:narrow(d, 1, size(x, d, "pad") + r); r = 0 end
  local parts = {}
  local function block(k)
    local shape = {}
    for i = 1, #x._shape do shape[i] = x._shape[i] end
    shape[d] = k
    return ops.full(shape, value, { dtype = x.dtype })
  end
  if l > 0 then parts[#parts + 1] = block(l) end
  parts[#parts + 1] = x
  if r > 0 then parts[#parts + 1] = block(r) end
  return #parts == 1 and x or ops.cat(parts, d)
end
local function pad_indexed(x, d, l, r, mode)
  local n = size(x, d, "pad")
  if l < 0 or r < 0 then raise("pad: mode '%s' takes no negative padding, got %d, %d", mode, l, r) end
  if mode == "reflect" and (l >= n or r >= n) then
    raise("pad: reflect padding %d, %d must be less than the size %d of dim %d", l, r, n, d)
  end
  if mode == "circular" and (l > n or r > n) then
    raise("pad: circular padding %d, %d must be at most the size %d of dim %d", l, r, n, d)
  end
  local idx = {}
  for j = -l, n - 1 + r do idx[#idx + 1] = SOURCE[mode](j, n) + 1 end
  return ops.index_select(x, d, index_tensor(idx))
end
-- x: (..., d_k, ..., d_n); pad: 2m numbers for the last m dims; mode: constant (value), reflect, replicate, circular
function M.pad(x, pad, mode, value)
  need_tensor(x, "pad")
  mode = mode or "constant"
  if not (mode == "constant" or SOURCE[mode]) then
    raise("pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '%s'", tostring(mode))
  end
  if type(pad) ~= "table" or #pad % 2 ~= 0 or #pad / 2 > #x._shape then
    raise("pad: pad must be a list of 2 numbers per padded dim (at most %d dims), got %s", #x._shape, tostring(pad))
  end
  for _, p in ipairs(pad) do
    if type(p) ~= "number" or p ~= math.floor(p) then raise("pad: paddings must be integers, got %s", tostring(p)) end
  end
  if mode ~= "constant" and value ~= nil and value ~= 0 then raise("pad: value applies to mode 'constant' only") end
  for k = 1, #pad / 2 do
    local d = #x._shape - k + 1
    local l, r = pad[2 * k - 1], pad[2 * k]
    if l ~= 0 or r ~= 0 then
      x = mode == "constant" and pad_constant(x, d, l, r, value or 0) or pad_indexed(x, d, l, r, mode)
    end
  end
  return x
end

-- ---- interpolate: x (N, C, spatial...) resized along each spatial dim (one pass per dim) ----
-- nearest: source floor(j * scale) (nearest-exact: floor((j + 0.5) scale)); linear: (j + 0.5) scale - 0.5 (clamped
-- at 0), or j (n-1)/(m-1) with align_corners; bicubic: the same source unclamped, PyTorch's cubic convolution
-- (A = -0.75) over 4 taps clamped to the border; area: the adaptive average (separable, one matrix per dim);
-- scale = in/out, or 1/scale_factor when a scale_factor is given (PyTorch's rule)
local averaging_matrix
local CUBIC_A = -0.75
local function cubic_weights(t)
  local A = CUBIC_A
  local function near(u) return ((A + 2) * u - (A + 3)) * u * u + 1 end -- |u| <= 1
  local function far(u) return ((A * u - 5 * A) * u + 8 * A) * u - 4 * A end -- 1 < |u| < 2
  return { far(t + 1), near(t), near(1 - t), far(2 - t) }
end
local function resize_dim(x, d, m, scale_factor, mode, align_corners)
  local n = size(x, d, "interpolate")
  local scale = scale_factor and 1 / scale_factor or n / m
  if mode == "nearest" or mode == "nearest-exact" then
    local idx, half = {}, mode == "nearest" and 0 or 0.5
    for j = 0, m - 1 do idx[j + 1] = math.min(math.floor((j + half) * scale), n - 1) + 1 end
    return ops.index_select(x, d, index_tensor(idx))
  end
  if mode == "area" then
    return ops.matmul(x:transpose(d, -1), averaging_matrix(n, m, x.dtype, "interpolate"):t()):transpose(d, -1)
  end
  local wshape = {}
  for i = 1, #x._shape do wshape[i] = 1 end
  wshape[d] = m
  if mode == "bicubic" then
    local taps, weights = { {}, {}, {}, {} }, { {}, {}, {}, {} }
    for j = 0, m - 1 do
      local src = align_corners and (m > 1 and j * (n - 1) / (m - 1) or 0) or (j + 0.5) * scale - 0.5
      local fl = math.floor(src)
      local w = cubic_weights(src - fl)
      for q = 1, 4 do
        taps[q][j + 1] = math.min(math.max(fl - 2 + q, 0), n - 1) + 1
        weights[q][j + 1] = w[q]
      end
    end
    local y
    for q = 1, 4 do
      local w = ops.tensor(weights[q], { dtype = x.dtype }):reshape(wshape)
      local term = ops.index_select(x, d, index_tensor(taps[q])) * w
      y = y and y + term or term
    end
    return y
  end
  local i0, i1, w1 = {}, {}, {}
  for j = 0, m - 1 do
    local src
    if align_corners then src = m > 1 and j * (n - 1) / (m - 1) or 0
    else src = math.max((j + 0.5) * scale - 0.5, 0) end
    local lo = math.min(math.floor(src), n - 1)
    i0[j + 1], i1[j + 1], w1[j + 1] = lo + 1, math.min(lo + 1, n - 1) + 1, src - lo
  end
  local w = ops.tensor(w1, { dtype = x.dtype }):reshape(wshape)
  local a, b = ops.index_select(x, d, index_tensor(i0)), ops.index_select(x, d, index_tensor(i1))
  return a + (b - a) * w
end
-- the spatial dims a mode needs (0: any number)
local INTERP_MODES = { nearest = 0, ["nearest-exact"] = 0, area = 0, linear = 1, bilinear = 2, bicubic = 2,
  trilinear = 3 }
-- opts: size (number or list), scale_factor (number or list), mode ("nearest"), align_corners, recompute_scale_factor
function M.interpolate(x, opts)
  need_tensor(x, "interpolate")
  opts = options.check(opts, "interpolate", { size = "any", scale_factor = "any",
    mode = { "nearest", "nearest-exact", "area", "linear", "bilinear", "bicubic", "trilinear" },
    align_corners = "boolean", recompute_scale_factor = "boolean" })
  local mode = opts.mode or "nearest"
  local k = #x._shape - 2
  if k < 1 or k > 3 then
    raise("interpolate: input must be (N,C,spatial...) with 1 to 3 spatial dims, got %s", S.str(x._shape))
  end
  if INTERP_MODES[mode] > 0 and INTERP_MODES[mode] ~= k then
    raise("interpolate: mode '%s' needs %d spatial dims, got %s", mode, INTERP_MODES[mode], S.str(x._shape))
  end
  if (mode == "nearest" or mode == "nearest-exact" or mode == "area") and opts.align_corners ~= nil then
    raise("interpolate: align_corners applies to the linear and bicubic modes only")
  end
  if (opts.size == nil) == (opts.scale_factor == nil) then
    raise("interpolate: give exactly one of size and scale_factor")
  end
  local sizes, factors = {}, opts.scale_factor and tuple(opts.scale_factor, k, "interpolate", "scale_factor")
  for i = 1, k do
    local n = size(x, i + 2, "interpolate")
    sizes[i] = opts.size and tuple(opts.size, k, "interpolate", "size")[i] or math.floor(n * factors[i])
    if type(sizes[i]) ~= "number" or sizes[i] < 1 or sizes[i] ~= math.floor(sizes[i]) then
      raise("interpolate: output sizes must be integers >= 1, got %s", tostring(sizes[i]))
    end
  end
  for i = 1, k do
    -- recompute_scale_factor: the sizes from scale_factor, then interpolated as if given (scale in / out)
    local factor = factors and not opts.recompute_scale_factor and factors[i] or nil
    x = resize_dim(x, i + 2, sizes[i], factor, mode, opts.align_corners == true)
  end
  return x
end

-- ---- adaptive pooling: output cell i of a dim of size n covers [floor(i n / m), ceil((i + 1) n / m)) ----
local function cells(n, m)
  local out = {}
  for i = 0, m - 1 do out[i + 1] = { math.floor(i * n / m), math.ceil((i + 1) * n / m) } end
  return out
end
-- output sizes are bounded (each cell is work and memory: inf or 2^31 would loop unbounded)
local MAX_OUTPUT = 65536
local function output_pair(output_size, x, opname)
  local o = tuple(output_size, 2, opname, "output_size")
  local r = {}
  for i = 1, 2 do
    r[i] = o[i] == nil and size(x, #x._shape - 2 + i, opname) or o[i]
    if type(r[i]) ~= "number" or not (r[i] >= 1 and r[i] <= MAX_OUTPUT) or r[i] ~= math.floor(r[i]) then
      raise("%s: output_size must be integers in 1..%d, got %s", opname, MAX_OUTPUT, tostring(r[i]))
    end
  end
  return r
end
local function spatial_input(x, opname)
  need_tensor(x, opname)
  if #x._shape ~= 3 and #x._shape ~= 4 then
    raise("%s: input must be (N,C,H,W) or (C,H,W), got %s", opname, S.str(x._shape))
  end
end
-- the (m, n) averaging matrix of a dim: row i holds 1/len over cell i; at most MAX_AVERAGING entries
local MAX_AVERAGING = 2 ^ 24
function averaging_matrix(n, m, dt, opname)
  if m * n > MAX_AVERAGING then
    raise("%s: output size %d over an input dim of %d needs a %dx%d averaging matrix, more than "
      .. "2^24 entries", opname or "adaptive_avg_pool2d", m, n, m, n)
  end
  local rows = {}
  for i, c in ipairs(cells(n, m)) do
    local row = {}
    for j = 1, n do row[j] = (j > c[1] and j <= c[2]) and 1 / (c[2] - c[1]) or 0 end
    rows[i] = row
  end
  return ops.tensor(rows, { dtype = dt })
end
-- x: (N,C,H,W) or (C,H,W) -> (..., OH, OW): A_h x A_w^T with the averaging matrices
function M.adaptive_avg_pool2d(x, output_size)
  spatial_input(x, "adaptive_avg_pool2d")
  local o = output_pair(output_size, x, "adaptive_avg_pool2d")
  local h, w = size(x, #x._shape - 1, "adaptive_avg_pool2d"), size(x, #x._shape, "adaptive_avg_pool2d")
  local y = ops.matmul(x, averaging_matrix(w, o[2], x.dtype):t())
  return ops.matmul(averaging_matrix(h, o[1], x.dtype), y)
end
-- the max over each cell of dim d, the cells joined again along d (cat takes at most 4096 inputs: in groups)
local function max_cells(x, d, m)
  local parts = {}
  for i, c in ipairs(cells(size(x, d, "adaptive_max_pool2d"), m)) do
    parts[i] = x:narrow(d, c[1] + 1, c[2] - c[1]):amax(d, true)
  end
  if #parts > 4096 then
    local groups = {}
    for i = 1, #parts, 4096 do groups[#groups + 1] = ops.cat({ unpack(parts, i, math.min(i + 4095, #parts)) }, d) end
    parts = groups
  end
  return #parts == 1 and parts[1] or ops.cat(parts, d)
end
-- with indices: each cell's max and its 1-based position flat over (H, W), the first of ties (PyTorch's), one
-- max per cell
local function max_cells_with_indices(x, o)
  local n = #x._shape
  local H, W = size(x, n - 1, "adaptive_max_pool2d"), size(x, n, "adaptive_max_pool2d")
  local values, indices = {}, {}
  for _, ch in ipairs(cells(H, o[1])) do
    for _, cw in ipairs(cells(W, o[2])) do
      local rh, rw = ch[2] - ch[1], cw[2] - cw[1]
      local region = x:narrow(n - 1, ch[1] + 1, rh):narrow(n, cw[1] + 1, rw):flatten(n - 1)
      local v, i = region:max(n - 1)
      local row, col = ops.floor_divide(i - 1, rw), ops.remainder(i - 1, rw)
      values[#values + 1], indices[#indices + 1] = v, (row + ch[1]) * W + col + cw[1] + 1
    end
  end
  local shape = {}
  for d = 1, n - 2 do shape[d] = x._shape[d] end
  shape[n - 1], shape[n] = o[1], o[2]
  return ops.stack(values, n - 1):reshape(shape), ops.stack(indices, n - 1):reshape(shape)
end
-- x: (N,C,H,W) or (C,H,W) -> (..., OH, OW) [, indices]; return_indices: a boolean or {return_indices =}
function M.adaptive_max_pool2d(x, output_size, return_indices)
  spatial_input(x, "adaptive_max_pool2d")
  if type(return_indices) == "table" then
    return_indices = options.check(return_indices, "adaptive_max_pool2d", { return_indices = "boolean" }).return_indices
  end
  local o = output_pair(output_size, x, "adaptive_max_pool2d")
  if return_indices then return max_cells_with_indices(x, o) end
  local n = #x._shape
  return max_cells(max_cells(x, n - 1, o[1]), n, o[2])
end

-- ---- pooling with ceil_mode: the last window may start past the input (not past its left padding) ----
local function ceil_out(n, k, s, p)
  local m = math.ceil((n + 2 * p - k) / s) + 1
  if (m - 1) * s >= n + p then m = m - 1 end
  return m
end
local function pool_geometry(x, kernel_size, opts, opname)
  spatial_input(x, opname)
  local k = tuple(kernel_size, 2, opname, "kernel_size")
  local s = tuple(opts.stride or k, 2, opname, "stride")
  local p = tuple(opts.padding or 0, 2, opname, "padding")
  local n = { size(x, #x._shape - 1, opname), size(x, #x._shape, opname) }
  local out, extra = {}, {}
  for i = 1, 2 do
    if 2 * p[i] > k[i] then raise("%s: padding %d must be at most half the kernel %d", opname, p[i], k[i]) end
    out[i] = ceil_out(n[i], k[i], s[i], p[i])
    extra[i] = math.max((out[i] - 1) * s[i] + k[i] - (n[i] + 2 * p[i]), 0)
  end
  return k, s, p, n, out, extra
end
-- x padded with value: p on the left, p + extra on the right of H and W
local function pad_for_ceil(x, p, extra, value)
  return M.pad(x, { p[2], p[2] + extra[2], p[1], p[1] + extra[1] }, "constant", value)
end
local function max_pool2d_ceil(x, kernel_size, opts)
  if opts.return_indices then raise("max_pool2d: return_indices with ceil_mode is not implemented") end
  local k, s, p, _, _, extra = pool_geometry(x, kernel_size, opts, "max_pool2d")
  return ops.max_pool2d(pad_for_ceil(x, p, extra, -math.huge), k, { stride = s })
end
-- PyTorch's divisor: the window clipped to the padded input (count_include_pad) or to the input itself
local function avg_pool2d_ceil(x, kernel_size, opts)
  local k, s, p, n, out, extra = pool_geometry(x, kernel_size, opts, "avg_pool2d")
  local include_pad = opts.count_include_pad ~= false
  local sums = ops.avg_pool2d(pad_for_ceil(x, p, extra, 0), k, { stride = s }) * (k[1] * k[2])
  local function extent(i, o)
    local lo = o * s[i] - p[i]
    local hi = math.min(lo + k[i], n[i] + p[i])
    if not include_pad then lo, hi = math.max(lo, 0), math.min(hi, n[i]) end
    return hi - lo
  end
  local divisor = {}
  for oh = 1, out[1] do
    divisor[oh] = {}
    for ow = 1, out[2] do divisor[oh][ow] = extent(1, oh - 1) * extent(2, ow - 1) end
  end
  return sums / ops.tensor(divisor, { dtype = x.dtype })
end

-- not ds.F functions: F.max_pool2d / F.avg_pool2d call them for ceil_mode
M.ceil_mode = { max_pool2d = max_pool2d_ceil, avg_pool2d = avg_pool2d_ceil }

-- ---- conv2d with padding "same" split as PyTorch's: a dim whose total d (k - 1) is odd is padded explicitly,
-- the odd one on the right (the conv2d op takes symmetric padding) ----
local function conv2d_same(x, w, b, opts)
  if type(opts) ~= "table" or opts.padding ~= "same" or not Tensor.is_tensor(w) or #w._shape ~= 4 then
    return ops.conv2d(x, w, b, opts)
  end
  local dilation = tuple(opts.dilation or 1, 2, "conv2d", "dilation")
  local totals, odd = {}, false
  for i = 1, 2 do
    local k = w._shape[i + 2]
    if type(k) ~= "number" then return ops.conv2d(x, w, b, opts) end
    totals[i] = dilation[i] * (k - 1)
    odd = odd or totals[i] % 2 == 1
  end
  if not odd then return ops.conv2d(x, w, b, opts) end
  local stride = tuple(opts.stride or 1, 2, "conv2d", "stride")
  if stride[1] ~= 1 or stride[2] ~= 1 then raise("conv2d: padding 'same' needs stride 1, got %s", S.str(stride)) end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.padding = 0
  local h, wl = math.floor(totals[1] / 2), math.floor(totals[2] / 2)
  return ops.conv2d(M.pad(need_tensor(x, "conv2d"), { wl, totals[2] - wl, h, totals[1] - h }), w, b, o)
end
-- not a ds.F function: F.conv2d calls it
M.conv = { conv2d = conv2d_same }

-- ---- conv1d: x (N,C,L) or (C,L), w (OC,C/groups,K) -> (N,OC,OL), as conv2d over (L, 1) ----
function M.conv1d(x, w, b, opts)
  need_tensor(x, "conv1d"); need_tensor(w, "conv1d")
  opts = options.check(opts, "conv1d", { stride = "integer", padding = "any", dilation = "integer",
    groups = "integer" })
  if #x._shape ~= 2 and #x._shape ~= 3 then raise("conv1d: input must be (N,C,L) or (C,L), got %s", S.str(x._shape)) end
  if #w._shape ~= 3 then raise("conv1d: weight must be (OC,C/groups,K), got %s", S.str(w._shape)) end
  local padding = opts.padding or 0
  if type(padding) == "number" then padding = { padding, 0 }
  elseif padding ~= "same" and padding ~= "valid" then
    raise("conv1d: padding must be a number, 'same' or 'valid', got %s", tostring(padding)) end
  local y = conv2d_same(x:unsqueeze(-1), w:unsqueeze(-1), b, {
    stride = { opts.stride or 1, 1 }, padding = padding, dilation = { opts.dilation or 1, 1 }, groups =
      opts.groups or 1 })
  return y:squeeze(-1)
end

-- ---- conv_transpose2d: x (N,C,H,W), w (C,OC/groups,KH,KW) -> (N,OC,OH,OW), conv2d's input gradient:
-- OH = (H - 1) stride - 2 padding + dilation (KH - 1) + output_padding + 1 (output_padding below
-- max(stride, dilation), as PyTorch) ----
function M.conv_transpose2d(x, w, b, opts)
  need_tensor(x, "conv_transpose2d"); need_tensor(w, "conv_transpose2d")
  opts = options.check(opts, "conv_transpose2d", { stride = "any", padding = "any", output_padding = "any",
    groups = "integer", dilation = "any" })
  local squeeze = #x._shape == 3
  if squeeze then x = x:unsqueeze(1) end
  if #x._shape ~= 4 then raise("conv_transpose2d: input must be (N,C,H,W) or (C,H,W), got %s", S.str(x._shape)) end
  if #w._shape ~= 4 then raise("conv_transpose2d: weight must be (C,OC/groups,KH,KW), got %s", S.str(w._shape)) end
  local stride, padding = tuple(opts.stride or 1, 2, "conv_transpose2d", "stride"),
    tuple(opts.padding or 0, 2, "conv_transpose2d", "padding")
  local dilation = tuple(opts.dilation or 1, 2, "conv_transpose2d", "dilation")
  local output_padding = tuple(opts.output_padding or 0, 2, "conv_transpose2d", "output_padding")
  local groups = opts.groups or 1
  local out = {}
  for i = 1, 2 do
    if output_padding[i] >= math.max(stride[i], dilation[i]) then
      raise("conv_transpose2d: output_padding %d must be smaller than stride or dilation", output_padding[i])
    end
    out[i] = (size(x, i + 2, "conv_transpose2d") - 1) * stride[i] - 2 * padding[i]
      + dilation[i] * (w._shape[i + 2] - 1) + output_padding[i] + 1
  end
  if w._shape[1] ~= x._shape[2] then
    raise("conv_transpose2d: weight %s must have %s input channels (input %s)", S.str(w._shape), tostring(x._shape[2]),
      S.str(x._shape))
  end
  local y
  if output_padding[1] < stride[1] and output_padding[2] < stride[2] then
    y = D.call(nn_ops.conv2d_backward_input, { x, w },
      { stride = stride, padding = padding, dilation = dilation, groups = groups, input_size = out })
  else
    -- output_padding reaching the stride (dilation > stride): the unpadded result, cropped by padding on both
    -- sides, then zeros (never reached) to the size asked
    local full = {}
    for i = 1, 2 do full[i] = out[i] + 2 * padding[i] - output_padding[i] end
    y = D.call(nn_ops.conv2d_backward_input, { x, w },
      { stride = stride, padding = { 0, 0 }, dilation = dilation, groups = groups, input_size = full })
    for i = 1, 2 do
      local d = i + 2
      local keep = math.min(out[i], full[i] - padding[i])
      y = y:narrow(d, padding[i] + 1, keep)
      if keep < out[i] then
        y = pad_constant(y, d, 0, out[i] - keep, 0)
      end
    end
  end
  if b ~= nil then y = y + need_tensor(b, "conv_transpose2d"):reshape(1, -1, 1, 1) end
  return squeeze and y:squeeze(1) or y
end

return M
