-- onnx/handlers/nn_conv.lua: ONNX import handlers of convolutions: Conv and ConvTranspose in 1-D, 2-D and
-- N-D (every auto_pad, asymmetric pads, groups, dilations, strides, output_padding, output_shape).
--[[ 2-D runs ds's conv2d / conv_transpose2d kernels, 1-D runs them on (L, 1) planes, N-D (N >= 3) is the sum
  over the taps of the first spatial dim of (N-1)-D convolutions on the slices those taps read (conv) or
  write (transposed). Pads the kernels cannot take (asymmetric, or with output_padding) are made by padding
  or cropping the input / output explicitly. ]]
local F = require("ds.ops")
local NF = require("ds.nn.functional")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")
local G = require("ds.onnx.handlers.nn_geometry")

local OPS, def = common.family()
local T, refuse, rank = V.tensor, common.refuse, common.rank

local function index(list) return F.tensor(list, { dtype = "i64" }) end

-- x (N, C, S1..Sk) with dim 3 moved next to N and merged into it: (N * S1, C, S2..Sk), and S1
local function fold_first(x)
  local s = x.shape
  local perm = { 1, 3, 2 }
  for i = 4, #s do perm[i] = i end
  local shape = { -1, s[2] }
  for i = 4, #s do shape[#shape + 1] = s[i] end
  return x:permute(unpack(perm)):reshape(shape), s[3]
end
-- y (N * S1, C, S2..Sk) back to (N, C, S1, S2..Sk)
local function unfold_first(y, s1)
  local s = y.shape
  local shape = { -1, s1 }
  for i = 2, #s do shape[#shape + 1] = s[i] end
  local perm = { 1, 3, 2 }
  for i = 4, #s + 1 do perm[i] = i end
  return y:reshape(shape):permute(unpack(perm))
end
local function rest(list) return { unpack(list, 2) } end

--[[ conv of x (N, C, S...) already padded with w (OC, C/groups, K...): stride s, dilation d (lists); bias b
  (OC) or nil, given to the 1-D/2-D kernel (N-D callers add it). pad2: {top, left} symmetric padding the 2-D
  kernel applies itself (nil: none) ]]
local function conv_nd(x, w, s, d, groups, pad2, b)
  local k = rank(x) - 2
  if k == 2 then
    return F.conv2d(x, w, b, { stride = s, dilation = d, groups = groups, padding = pad2 or { 0, 0 } })
  elseif k == 1 then
    return F.conv2d(x:unsqueeze(-1), w:unsqueeze(-1), b, { stride = { s[1], 1 }, dilation = { d[1], 1 },
      groups = groups, padding = { pad2 and pad2[1] or 0, 0 } }):squeeze(-1)
  end
  local n, taps = x.shape[3], w.shape[3]
  local out = math.floor((n - ((taps - 1) * d[1] + 1)) / s[1]) + 1
  local sum
  for j = 0, taps - 1 do
    local idx = {}
    for o = 0, out - 1 do idx[o + 1] = o * s[1] + j * d[1] + 1 end
    local slices = fold_first(F.index_select(x, 3, index(idx)))
    local y = conv_nd(slices, w:select(3, j + 1), rest(s), rest(d), groups)
    sum = sum and sum + y or y
  end
  return unfold_first(sum, out)
end

local function bias_view(b, k)
  local shape = { 1, -1 }
  for i = 1, k do shape[i + 2] = 1 end
  return T(b):reshape(shape)
end

local function kernel_of(w, op)
  local ks = {}
  for i = 3, #w.shape do ks[i - 2] = w.shape[i] end
  if #ks == 0 then refuse(op .. ": the weight must be (M, C/group, k1, ...)") end
  return ks
end
local function check_kernel_shape(at, ks, op)
  if at.kernel_shape and #at.kernel_shape > 0 then
    for i, v in ipairs(ks) do
      if at.kernel_shape[i] ~= v then refuse(op .. ": kernel_shape does not match the weight's shape") end
    end
    if #at.kernel_shape ~= #ks then refuse(op .. ": kernel_shape does not match the weight's shape") end
  end
end

local CONV_ATTRS = { auto_pad = "NOTSET", dilations = false, group = 1, kernel_shape = false, pads = false,
  strides = false }
def("Conv", CONV_ATTRS, function(ins, at)
  local x, w = T(ins[1]), T(ins[2])
  local ks = kernel_of(w, "Conv")
  check_kernel_shape(at, ks, "Conv")
  if rank(x) ~= #ks + 2 then refuse("Conv: input rank " .. rank(x) .. " does not match the weight's kernel") end
  local g = G.geometry(at, G.spatial_sizes(x, "Conv", #ks <= 2), ks, "Conv") -- the 1-D/2-D kernel takes dynamic sizes
  local pad2
  if #ks <= 2 and G.symmetric(g) then pad2 = { g.pb[1], g.pb[2] } else x = G.pad(x, g, 0) end
  if #ks <= 2 then return conv_nd(x, w, g.s, g.d, at.group, pad2, ins[3] and T(ins[3]) or nil) end
  local y = conv_nd(x, w, g.s, g.d, at.group, pad2)
  if ins[3] then y = y + bias_view(ins[3], #ks) end
  return y
end)

--[[ the full transposed convolution of x (N, C, S...) with w (C, M/groups, K...): each input position i writes
  its kernel at i * s + j * d, so the output has (S - 1) s + (K - 1) d + 1 positions; no bias ]]
local function conv_transpose_full(x, w, s, d, groups)
  local k = rank(x) - 2
  if k == 2 then return NF.conv_transpose2d(x, w, nil, { stride = s, dilation = d, groups = groups }) end
  if k == 1 then
    return NF.conv_transpose2d(x:unsqueeze(-1), w:unsqueeze(-1), nil, { stride = { s[1], 1 },
      dilation = { d[1], 1 }, groups = groups }):squeeze(-1)
  end
  local slices, n = fold_first(x)
  local taps = w.shape[3]
  local full = (n - 1) * s[1] + (taps - 1) * d[1] + 1
  local sum
  for j = 0, taps - 1 do
    local y = unfold_first(conv_transpose_full(slices, w:select(3, j + 1), rest(s), rest(d), groups), n)
    -- output position o takes input slice i where o = i s + j d, else a zero slice (index n + 1)
    local padded = F.cat({ y, y:narrow(3, 1, 1) * 0 }, 3)
    local idx = {}
    for o = 0, full - 1 do
      local i = (o - j * d[1]) / s[1]
      idx[o + 1] = (i == math.floor(i) and i >= 0 and i < n) and i + 1 or n + 1
    end
    local placed = F.index_select(padded, 3, index(idx))
    sum = sum and sum + placed or placed
  end
  return sum
end

def("ConvTranspose", { auto_pad = "NOTSET", dilations = false, group = 1, kernel_shape = false,
  output_padding = false, output_shape = false, pads = false, strides = false }, function(ins, at)
  local x, w = T(ins[1]), T(ins[2])
  local ks = kernel_of(w, "ConvTranspose")
  check_kernel_shape(at, ks, "ConvTranspose")
  local k = #ks
  if rank(x) ~= k + 2 then refuse("ConvTranspose: input rank " .. rank(x) .. " does not match the weight's kernel") end
  local n = G.spatial_sizes(x, "ConvTranspose")
  local s = G.per_dim(at.strides, k, 1, "strides", "ConvTranspose")
  local d = G.per_dim(at.dilations, k, 1, "dilations", "ConvTranspose")
  local op = G.per_dim(at.output_padding, k, 0, "output_padding", "ConvTranspose")
  local shape = at.output_shape and #at.output_shape > 0 and at.output_shape
  if shape and #shape == k + 2 then shape = { unpack(shape, 3) } end
  if shape and #shape ~= k then refuse("ConvTranspose: output_shape must give the " .. k .. " spatial sizes") end
  local auto_pad = at.auto_pad
  local y = conv_transpose_full(x, w, s, d, at.group)
  local crop = {}
  for i = 1, k do
    local full = (n[i] - 1) * s[i] + (ks[i] - 1) * d[i] + 1
    local pb, pe
    if shape or auto_pad == "SAME_UPPER" or auto_pad == "SAME_LOWER" then
      -- ONNX: total = full + output_padding - out; SAME_UPPER puts the odd pad after, others before
      local out = shape and shape[i] or n[i] * s[i]
      local total = full + op[i] - out
      local half = math.floor(total / 2)
      if auto_pad == "SAME_UPPER" then pb, pe = half, total - half else pb, pe = total - half, half end
    elseif auto_pad == "VALID" or auto_pad == "NOTSET" then
      local pads = auto_pad == "NOTSET" and at.pads and #at.pads > 0 and at.pads
      if pads and #pads ~= 2 * k then refuse("ConvTranspose: pads must have " .. 2 * k .. " values") end
      pb, pe = pads and pads[i] or 0, pads and pads[i + k] or 0
    else
      refuse("ConvTranspose: auto_pad " .. tostring(auto_pad) .. " is not an ONNX auto_pad")
    end
    if full + op[i] - pb - pe < 1 then refuse("ConvTranspose: the output would be empty") end
    -- keep full positions [pb, full + op - pe): crop (or zero-pad) pb before, op - pe after
    crop[2 * (k - i) + 1], crop[2 * (k - i) + 2] = -pb, op[i] - pe
  end
  y = NF.pad(y, crop, "constant", 0)
  if ins[3] then y = y + bias_view(ins[3], k) end
  return y
end)

return OPS
