-- onnx/handlers/nn.lua: ONNX import handlers of products and neural-network layers: MatMul, Gemm, their
-- integer forms, DepthToSpace, SpaceToDepth; with the convolutions, pools and normalizations of nn_conv.lua,
-- nn_pool.lua, nn_norm.lua, nn_grid_sample.lua and nn_roi_align.lua merged in.
local F = require("ds.ops")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, rank, refuse = V.tensor, common.rank, common.refuse

-- ---- matmul, nn ----
def("MatMul", {}, function(ins) return F.matmul(T(ins[1]), T(ins[2])) end)
def("Gemm", { alpha = 1.0, beta = 1.0, transA = 0, transB = 0, broadcast = false }, function(ins, at)
  local a, b = T(ins[1]), T(ins[2])
  if at.transA ~= 0 then a = a:t() end
  if at.transB ~= 0 then b = b:t() end
  local y = F.matmul(a, b)
  if at.alpha ~= 1 then y = y * at.alpha end
  if ins[3] then
    local c = T(ins[3])
    y = y + (at.beta ~= 1 and c * at.beta or c)
  end
  return y
end)


--[[ MatMulInteger / ConvInteger: (a - a_zero_point) times (b - b_zero_point) in i32. The products are summed
  in f64, exact for 8-bit operands (sums below 2^53), then cast to i32. ]]
local function widened(v, zero, per_row)
  local t = T(v):astype("f64")
  if not zero then return t end
  local z = T(zero):astype("f64")
  if per_row and rank(z) == 1 and z:numel() > 1 then z = z:reshape(per_row) end -- an M-vector; N-D as it is
  return t - z
end
def("MatMulInteger", {}, function(ins)
  local a_rows = rank(ins[1]) >= 2 and { -1, 1 } or nil -- a's zero point may be one per row
  return F.matmul(widened(ins[1], ins[3], a_rows), widened(ins[2], ins[4])):astype("i32")
end)
def("ConvInteger", { auto_pad = "NOTSET", dilations = false, group = 1, kernel_shape = false, pads = false,
  strides = false }, function(ins, at, node, opset, ctx)
  local w = ins[2]
  local per_channel = { -1 }
  for _ = 2, rank(w) do per_channel[#per_channel + 1] = 1 end
  local y = OPS.Conv.run({ widened(ins[1], ins[3]), widened(w, ins[4], per_channel) }, at, node, opset, ctx)
  return y:astype("i32")
end)

-- DepthToSpace: (N, C, H, W) -> (N, C / b^2, H b, W b), channels read depth-column-row (DCR) or CRD
def("DepthToSpace", { blocksize = common.REQUIRED, mode = "DCR" }, function(ins, at)
  local x = T(ins[1])
  local b, s = at.blocksize, x.shape
  if rank(x) ~= 4 then refuse("DepthToSpace: the input must be (N, C, H, W)") end
  local c = s[2] / (b * b)
  if at.mode == "DCR" then
    return x:reshape(s[1], b, b, c, s[3], s[4]):permute(1, 4, 5, 2, 6, 3):reshape(s[1], c, s[3] * b, s[4] * b)
  elseif at.mode == "CRD" then
    return x:reshape(s[1], c, b, b, s[3], s[4]):permute(1, 2, 5, 3, 6, 4):reshape(s[1], c, s[3] * b, s[4] * b)
  end
  refuse("DepthToSpace: mode " .. tostring(at.mode) .. " is not DCR or CRD")
end)
-- SpaceToDepth: (N, C, H, W) -> (N, C b^2, H / b, W / b)
def("SpaceToDepth", { blocksize = common.REQUIRED }, function(ins, at)
  local x = T(ins[1])
  local b, s = at.blocksize, x.shape
  if rank(x) ~= 4 then refuse("SpaceToDepth: the input must be (N, C, H, W)") end
  return x:reshape(s[1], s[2], s[3] / b, b, s[4] / b, b):permute(1, 4, 6, 2, 3, 5)
    :reshape(s[1], s[2] * b * b, s[3] / b, s[4] / b)
end)

for _, family in ipairs { "nn_conv", "nn_pool", "nn_norm", "nn_grid_sample", "nn_roi_align" } do
  for name, h in pairs(require("ds.onnx.handlers." .. family)) do
    assert(not OPS[name], "ONNX op " .. name .. " is defined twice")
    OPS[name] = h
  end
end

return OPS
