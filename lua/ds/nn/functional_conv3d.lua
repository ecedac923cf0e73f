-- nn/functional_conv3d.lua: ds.F.conv3d, conv_transpose3d and conv_transpose1d, composed from the 2-D convolution
-- ops so they differentiate, trace and compile with no kernel of their own:
-- conv3d: the KD depth taps become channels: the padded input's depth slices od * sd + kd * dd for every
-- (kd, od) are gathered into (N * OD, groups * KD * C/groups, H, W) and convolved once by conv2d with the weight
-- (OC, KD * C/groups, KH, KW) -- one product over (c, kd, kh, kw) per output, as PyTorch's; the order of that
-- sum differs from PyTorch's, so results agree to rounding.
-- conv_transpose3d: one conv_transpose2d of the (N * D, C, H, W) slices producing KD * OC channels, each depth
-- tap added (index_add) at output depth id * sd + kd * dd, then the depth padding cut.
-- conv_transpose1d: conv_transpose2d over (L, 1).
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local spatial = require("ds.nn.functional_spatial")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function need_tensor(x, opname, what)
  if not Tensor.is_tensor(x) then raise("%s: %s must be a tensor, got %s", opname, what, type(x)) end
  return x
end
-- a number or a list of n integers >= min as a list of n
local function tuple(v, n, opname, what, min)
  if type(v) == "number" then local t = {}; for i = 1, n do t[i] = v end; v = t end
  if type(v) ~= "table" or #v ~= n then
    raise("%s: %s must be an integer or a list of %d, got %s", opname, what, n, tostring(v))
  end
  for i = 1, n do
    if type(v[i]) ~= "number" or v[i] ~= math.floor(v[i]) or v[i] < min then
      raise("%s: %s must be integers >= %d, got %s", opname, what, min, tostring(v[i]))
    end
  end
  return v
end
-- the dims from `first` on must have known sizes (first = 2 for a batched input: the batch may be symbolic)
local function known(x, opname, first)
  for i = first, #x._shape do
    local n = x._shape[i]
    if type(n) ~= "number" then raise("%s: dim %d of %s must have a known size", opname, i, S.str(x._shape)) end
  end
end
-- x (N, C, ...) or (C, ...) with `dims` spatial dims: the batched form and whether it was unbatched
local function batch(x, dims, opname, form)
  if #x._shape == dims + 1 then return x:unsqueeze(1), true end
  if #x._shape ~= dims + 2 then raise("%s: input must be %s, got %s", opname, form, S.str(x._shape)) end
  return x, false
end
local function check_bias(b, oc, opname)
  if b == nil then return nil end
  need_tensor(b, opname, "bias")
  if #b._shape ~= 1 or not S.same(b._shape[1], oc) then
    raise("%s: bias %s must be (%s)", opname, S.str(b._shape), tostring(oc))
  end
  return b
end

-- padding "same" (stride 1): total d (k - 1) per dim, the odd one on the right, as PyTorch; "valid": none;
-- else a number or a triple. -> {left, right} per dim
local function conv_padding(padding, k, d, stride, opname)
  local lr = {}
  if padding == "same" then
    for i = 1, 3 do
      if stride[i] ~= 1 then raise("%s: padding 'same' needs stride 1, got %s", opname, tostring(stride[i])) end
      local total = d[i] * (k[i] - 1)
      lr[i] = { math.floor(total / 2), total - math.floor(total / 2) }
    end
  elseif padding == "valid" then
    for i = 1, 3 do lr[i] = { 0, 0 } end
  else
    local p = tuple(padding, 3, opname, "padding", 0)
    for i = 1, 3 do lr[i] = { p[i], p[i] } end
  end
  return lr
end

-- x: (N, C, D, H, W) or (C, D, H, W); w: (OC, C/groups, KD, KH, KW); b: (OC) -> (N, OC, OD, OH, OW);
-- opts: stride, padding (number, triple, "same", "valid"), dilation, groups
function M.conv3d(x, w, b, opts)
  local op = "conv3d"
  need_tensor(x, op, "input"); need_tensor(w, op, "weight")
  opts = options.check(opts, op, { stride = "any", padding = "any", dilation = "any", groups = { "integer", min = 1 } })
  local unbatched
  x, unbatched = batch(x, 3, op, "(N, C, D, H, W) or (C, D, H, W)")
  if #w._shape ~= 5 then raise("%s: weight must be (OC, C/groups, KD, KH, KW), got %s", op, S.str(w._shape)) end
  known(x, op, 2); known(w, op, 1)
  local G = opts.groups or 1
  local N, C = x._shape[1], x._shape[2]
  local OC, CG, k = w._shape[1], w._shape[2], { w._shape[3], w._shape[4], w._shape[5] }
  if C ~= CG * G or OC % G ~= 0 then
    raise("%s: input %s with groups %d does not match weight %s", op, S.str(x._shape), G, S.str(w._shape))
  end
  local stride = tuple(opts.stride or 1, 3, op, "stride", 1)
  local dil = tuple(opts.dilation or 1, 3, op, "dilation", 1)
  local lr = conv_padding(opts.padding or 0, k, dil, stride, op)
  x = spatial.pad(x, { lr[3][1], lr[3][2], lr[2][1], lr[2][2], lr[1][1], lr[1][2] })
  local Dp, Hp, Wp = x._shape[3], x._shape[4], x._shape[5]
  local OD = math.floor((Dp - dil[1] * (k[1] - 1) - 1) / stride[1]) + 1
  if OD < 1 or Hp < dil[2] * (k[2] - 1) + 1 or Wp < dil[3] * (k[3] - 1) + 1 then
    raise("%s: the kernel %s (dilation %s) is larger than the padded input %s", op, S.str(k), S.str(dil),
      S.str(x._shape))
  end
  local idx = {}
  for kd = 0, k[1] - 1 do
    for od = 0, OD - 1 do idx[#idx + 1] = od * stride[1] + kd * dil[1] + 1 end
  end
  -- (N, C, KD * OD, Hp, Wp) -> (N, OD, G, KD, C/G, Hp, Wp) -> (N * OD, G * KD * C/G, Hp, Wp)
  local xs = ops.index_select(x, 3, ops.tensor(idx, { dtype = "i64" })):reshape(N, G, CG, k[1], OD, Hp, Wp)
    :permute(1, 5, 2, 4, 3, 6, 7):reshape(N * OD, C * k[1], Hp, Wp)
  local w2 = w:permute(1, 3, 2, 4, 5):reshape(OC, k[1] * CG, k[2], k[3])
  local y = ops.conv2d(xs, w2, check_bias(b, OC, op), { stride = { stride[2], stride[3] },
    dilation = { dil[2], dil[3] }, groups = G })
  y = y:reshape(N, OD, OC, y._shape[3], y._shape[4]):permute(1, 3, 2, 4, 5):contiguous()
  return unbatched and y:squeeze(1) or y
end

local TRANSPOSE_SPEC = { stride = "any", padding = "any", output_padding = "any", dilation = "any",
  groups = { "integer", min = 1 } }

-- x: (N, C, L) or (C, L); w: (C, OC/groups, K); b: (OC) -> (N, OC, OL), OL = (L - 1) stride - 2 padding +
-- dilation (K - 1) + output_padding + 1; opts: stride, padding, output_padding, dilation, groups (integers)
function M.conv_transpose1d(x, w, b, opts)
  local op = "conv_transpose1d"
  need_tensor(x, op, "input"); need_tensor(w, op, "weight")
  opts = options.check(opts, op, TRANSPOSE_SPEC)
  if #x._shape ~= 2 and #x._shape ~= 3 then raise("%s: input must be (N, C, L) or (C, L), got %s", op,
    S.str(x._shape)) end
  if #w._shape ~= 3 then raise("%s: weight must be (C, OC/groups, K), got %s", op, S.str(w._shape)) end
  local one = {}
  for _, key in ipairs { "stride", "padding", "output_padding", "dilation" } do
    local v = opts[key]
    if type(v) == "table" and #v == 1 then v = v[1] end
    if v ~= nil and type(v) ~= "number" then raise("%s: %s must be an integer, got %s", op, key, tostring(v)) end
    one[key] = v
  end
  local G = opts.groups or 1
  if type(w._shape[2]) == "number" then check_bias(b, w._shape[2] * G, op) end
  return spatial.conv_transpose2d(x:unsqueeze(-1), w:unsqueeze(-1), b, {
    stride = { one.stride or 1, 1 }, padding = { one.padding or 0, 0 }, output_padding = { one.output_padding or 0, 0 },
    dilation = { one.dilation or 1, 1 }, groups = G }):squeeze(-1)
end

-- x: (N, C, D, H, W) or (C, D, H, W); w: (C, OC/groups, KD, KH, KW); b: (OC) -> (N, OC, OD, OH, OW), each
-- dim as conv_transpose1d's; opts: stride, padding, output_padding, dilation (numbers or triples), groups
function M.conv_transpose3d(x, w, b, opts)
  local op = "conv_transpose3d"
  need_tensor(x, op, "input"); need_tensor(w, op, "weight")
  opts = options.check(opts, op, TRANSPOSE_SPEC)
  local unbatched
  x, unbatched = batch(x, 3, op, "(N, C, D, H, W) or (C, D, H, W)")
  if #w._shape ~= 5 then raise("%s: weight must be (C, OC/groups, KD, KH, KW), got %s", op, S.str(w._shape)) end
  known(x, op, 2); known(w, op, 1)
  local G = opts.groups or 1
  local N, C, D, H, W = unpack(x._shape)
  local OCG, k = w._shape[2], { w._shape[3], w._shape[4], w._shape[5] }
  if w._shape[1] ~= C or C % G ~= 0 then
    raise("%s: input %s with groups %d does not match weight %s", op, S.str(x._shape), G, S.str(w._shape))
  end
  local OC = OCG * G
  local stride = tuple(opts.stride or 1, 3, op, "stride", 1)
  local pad = tuple(opts.padding or 0, 3, op, "padding", 0)
  local outpad = tuple(opts.output_padding or 0, 3, op, "output_padding", 0)
  local dil = tuple(opts.dilation or 1, 3, op, "dilation", 1)
  for i = 1, 3 do
    if outpad[i] >= math.max(stride[i], dil[i]) then
      raise("%s: output_padding %d must be smaller than stride or dilation", op, outpad[i])
    end
  end
  local Dfull = (D - 1) * stride[1] + dil[1] * (k[1] - 1) + 1 + outpad[1]
  local OD = Dfull - 2 * pad[1]
  if OD < 1 then raise("%s: padding %d leaves no output depth (input %s)", op, pad[1], S.str(x._shape)) end
  -- the depth taps as output channels, group-major: (C, KD * OC/G, KH, KW)
  local w2 = w:permute(1, 3, 2, 4, 5):reshape(C, k[1] * OCG, k[2], k[3])
  local z = spatial.conv_transpose2d(x:permute(1, 3, 2, 4, 5):reshape(N * D, C, H, W), w2, nil, {
    stride = { stride[2], stride[3] }, padding = { pad[2], pad[3] }, output_padding = { outpad[2], outpad[3] },
    dilation = { dil[2], dil[3] }, groups = G })
  local OH, OW = z._shape[3], z._shape[4]
  -- (N * D, G * KD * OC/G, OH, OW) -> (N, OC, D * KD, OH, OW), then tap (id, kd) added at depth id * sd + kd * dd
  z = z:reshape(N, D, G, k[1], OCG, OH, OW):permute(1, 3, 5, 2, 4, 6, 7):reshape(N, OC, D * k[1], OH, OW)
  local idx = {}
  for id = 0, D - 1 do
    for kd = 0, k[1] - 1 do idx[#idx + 1] = id * stride[1] + kd * dil[1] + 1 end
  end
  local y = ops.zeros({ N, OC, Dfull, OH, OW }, { dtype = z.dtype }):index_add(3, ops.tensor(idx, { dtype = "i64" }), z)
  y = y:narrow(3, pad[1] + 1, OD)
  if b ~= nil then y = y + check_bias(b, OC, op):reshape(1, OC, 1, 1, 1) end
  return unbatched and y:squeeze(1) or y
end

return M
