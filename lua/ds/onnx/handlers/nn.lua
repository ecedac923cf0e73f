-- onnx/handlers/nn.lua: ONNX import handlers of products and neural-network layers: MatMul, Gemm, Conv,
-- pooling, normalizations.
local F = require("ds.ops")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local REQUIRED, T, is_const = common.REQUIRED, V.tensor, V.is_const
local dim, rank, axis0, refuse, all_const = common.dim, common.rank, common.axis0, common.refuse, common.all_const

-- ---- matmul, nn ----
def("MatMul", {}, function(ins) return F.matmul(T(ins[1]), T(ins[2])) end)
def("Gemm", { alpha = 1.0, beta = 1.0, transA = 0, transB = 0 }, function(ins, at)
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

-- symmetric 2-D pads [top, left, bottom, right] -> {top, left}
local function pads2(p, op)
  p = p or { 0, 0, 0, 0 }
  if #p ~= 4 or p[1] ~= p[3] or p[2] ~= p[4] then
    refuse(op .. ": pads " .. table.concat(p, ",") .. " are not symmetric 2-D pads (ds pads both sides alike)")
  end
  return { p[1], p[2] }
end
local function auto_pad_notset(at, op)
  if at.auto_pad and at.auto_pad ~= "NOTSET" then refuse(op .. ": auto_pad " .. at.auto_pad .. " is not supported") end
end
local function ones2(v) return v and #v > 0 and v or { 1, 1 } end

def("Conv", { auto_pad = "NOTSET", dilations = false, group = 1, kernel_shape = false, pads = false, strides = false },
  function(ins, at)
    auto_pad_notset(at, "Conv")
    local x, w = T(ins[1]), T(ins[2])
    if rank(w) ~= 4 then refuse("Conv: only 2-D convolutions (weight of rank 4) are supported") end
    return F.conv2d(x, w, ins[3] and T(ins[3]) or nil, { stride = ones2(at.strides), padding = pads2(at.pads, "Conv"),
      dilation = ones2(at.dilations), groups = at.group })
  end)
local function pool_check(at, op)
  auto_pad_notset(at, op)
  if at.ceil_mode ~= 0 then refuse(op .. ": ceil_mode 1 is not supported") end
  if at.dilations and #at.dilations > 0 and (at.dilations[1] ~= 1 or at.dilations[2] ~= 1) then
    refuse(op .. ": dilations are not supported")
  end
  if #at.kernel_shape ~= 2 then refuse(op .. ": only 2-D pooling is supported") end
end
def("MaxPool", { auto_pad = "NOTSET", ceil_mode = 0, dilations = false, kernel_shape = REQUIRED, pads = false,
  storage_order = 0, strides = false }, function(ins, at, node)
  pool_check(at, "MaxPool")
  if node.output and node.output[2] and node.output[2] ~= "" then
    refuse("MaxPool: the Indices output is not supported")
  end
  return F.max_pool2d(T(ins[1]), at.kernel_shape, { stride = ones2(at.strides), padding = pads2(at.pads, "MaxPool") })
end)
def("AveragePool", { auto_pad = "NOTSET", ceil_mode = 0, count_include_pad = 0, dilations = false,
  kernel_shape = REQUIRED, pads = false, strides = false }, function(ins, at)
  pool_check(at, "AveragePool")
  return F.avg_pool2d(T(ins[1]), at.kernel_shape, { stride = ones2(at.strides), padding = pads2(at.pads, "AveragePool"),
    count_include_pad = at.count_include_pad ~= 0 })
end)
def("GlobalAveragePool", {}, function(ins)
  local x = T(ins[1])
  local dims = {}
  for d = 3, rank(x) do dims[#dims + 1] = d end
  return x:mean(dims, true)
end)
def("BatchNormalization", { epsilon = 1e-5, momentum = 0.9, training_mode = 0, spatial = 1 }, function(ins, at)
  if at.training_mode ~= 0 then refuse("BatchNormalization in training mode is not supported (inference only)") end
  local x = T(ins[1])
  local scale, bias, mean, var = T(ins[2]), T(ins[3]), T(ins[4]), T(ins[5])
  local view = { 1, -1 }
  for _ = 3, rank(x) do view[#view + 1] = 1 end
  local inv = scale / (var + at.epsilon):sqrt()
  return (x - mean:reshape(view)) * inv:reshape(view) + bias:reshape(view)
end)
def("LayerNormalization", { axis = -1, epsilon = 1e-5, stash_type = 1 }, function(ins, at, node)
  local x = T(ins[1])
  local r = rank(x)
  local a = axis0(at.axis, r)
  local ns = {}
  for d = a + 1, r do ns[#ns + 1] = x.shape[d] end
  if node.output and ((node.output[2] or "") ~= "" or (node.output[3] or "") ~= "") then
    refuse("LayerNormalization: the Mean and InvStdDev outputs are not supported")
  end
  return F.layer_norm(x, ns, T(ins[2]), ins[3] and T(ins[3]) or nil, at.epsilon)
end)

return OPS
