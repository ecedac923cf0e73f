-- onnx/handlers/nn_norm.lua: ONNX import handlers of normalizations: BatchNormalization (inference, every
-- opset's form), InstanceNormalization, GroupNormalization, LayerNormalization (with Mean and InvStdDev),
-- LpNormalization, LRN, MeanVarianceNormalization.
local F = require("ds.ops")
local D = require("ds.dispatch")
local NF = require("ds.nn.functional")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, refuse, rank, axis0 = V.tensor, common.refuse, common.rank, common.axis0

-- true when the node writes output k (1-based)
local function has_output(node, k) return (node.output[k] or "") ~= "" end

-- y = (x - mean) / sqrt(var + eps) * scale + bias with the stats (C) along dim 2, or (C, D1, ...) for the
-- per-activation form of opsets 1-8 (spatial = 0)
def("BatchNormalization", { epsilon = 1e-5, momentum = 0.9, training_mode = 0, spatial = 1, is_test = false,
  consumed_inputs = false }, function(ins, at, node)
  if at.training_mode ~= 0 or at.is_test == 0 then
    refuse("BatchNormalization in training mode is not supported (inference only)")
  end
  for k = 2, 5 do
    if has_output(node, k) then
      refuse("BatchNormalization: the running and saved statistics outputs are training outputs")
    end
  end
  local x = T(ins[1])
  local scale, bias, mean, var = T(ins[2]), T(ins[3]), T(ins[4]), T(ins[5])
  local view = { 1, -1 }
  if at.spatial == 0 and rank(scale) > 1 then
    view = { 1 }
    for _, d in ipairs(scale.shape) do view[#view + 1] = d end
  else
    for _ = 3, rank(x) do view[#view + 1] = 1 end
  end
  local inv = scale / (var + at.epsilon):sqrt()
  return (x - mean:reshape(view)) * inv:reshape(view) + bias:reshape(view)
end)

def("InstanceNormalization", { epsilon = 1e-5 }, function(ins, at)
  return NF.instance_norm(T(ins[1]), { weight = T(ins[2]), bias = T(ins[3]), eps = at.epsilon })
end)

-- scale and bias are per group in opset 18, per channel from opset 21
def("GroupNormalization", { epsilon = 1e-5, num_groups = common.REQUIRED, stash_type = 1 }, function(ins, at, _, opset)
  local x, scale, bias = T(ins[1]), T(ins[2]), T(ins[3])
  local c, groups = x.shape[2], at.num_groups
  if type(c) ~= "number" or c % groups ~= 0 then
    refuse("GroupNormalization: num_groups " .. groups .. " must divide the channels " .. tostring(c))
  end
  if opset < 21 then -- (G) -> (C): each group's value for its C / G channels
    scale = scale:reshape(groups, 1):expand(groups, c / groups):reshape(c)
    bias = bias:reshape(groups, 1):expand(groups, c / groups):reshape(c)
  end
  return NF.group_norm(x, groups, scale, bias, at.epsilon)
end)

--[[ LayerNormalization over the dims from axis on: Y, and Mean and InvStdDev (X's shape with those dims 1, of
  the stash type) from ds's layer_norm op, which computes them ]]
def("LayerNormalization", { axis = -1, epsilon = 1e-5, stash_type = 1 }, function(ins, at)
  local x = T(ins[1])
  local r = rank(x)
  local a = axis0(at.axis, r, "LayerNormalization")
  local stash = types.DS[at.stash_type]
  if stash ~= "f32" and stash ~= "f64" then
    refuse("LayerNormalization: stash_type " .. at.stash_type .. " is not supported")
  end
  local ns = {}
  for d = a + 1, r do
    if type(x.shape[d]) ~= "number" then refuse("LayerNormalization: the normalized dims must have known sizes") end
    ns[#ns + 1] = x.shape[d]
  end
  local w = T(ins[2])
  local b = ins[3] and T(ins[3]) or F.zeros(ns, { dtype = x.dtype })
  w, b = w:expand(ns), b:expand(ns)
  local y, mean, rstd = D.call(D.by_name.layer_norm, { x, w, b }, { normalized_shape = ns, eps = at.epsilon })
  return y, mean:astype(stash), rstd:astype(stash)
end)

def("LpNormalization", { axis = -1, p = 2 }, function(ins, at)
  local x = T(ins[1])
  local d = axis0(at.axis, rank(x), "LpNormalization") + 1
  if at.p == 1 then return x / F.abs(x):sum(d, true) end
  if at.p == 2 then return x / (x * x):sum(d, true):sqrt() end
  refuse("LpNormalization: p must be 1 or 2, got " .. tostring(at.p))
end)

-- y = x / (bias + alpha / size * (sum of x^2 over the size channels around c)) ^ beta
def("LRN", { alpha = 1e-4, beta = 0.75, bias = 1.0, size = common.REQUIRED }, function(ins, at)
  local x = T(ins[1])
  local r, c = rank(x), x.shape[2]
  if type(c) ~= "number" then refuse("LRN: the channel dim must have a known size") end
  local before, after = math.floor((at.size - 1) / 2), math.ceil((at.size - 1) / 2)
  local pad = {}
  for _ = 3, r do pad[#pad + 1], pad[#pad + 2] = 0, 0 end
  pad[#pad + 1], pad[#pad + 2] = before, after
  local sq = NF.pad(x * x, pad, "constant", 0)
  local sum
  for j = 1, at.size do
    local part = sq:narrow(2, j, c)
    sum = sum and sum + part or part
  end
  return x / F.pow(sum * (at.alpha / at.size) + at.bias, at.beta)
end)

-- (x - mean) / (sqrt(var) + 1e-9) over axes (ONNX's function body)
def("MeanVarianceNormalization", { axes = { 0, 2, 3 } }, function(ins, at)
  local x = T(ins[1])
  local r = rank(x)
  local dims = {}
  for i, a in ipairs(at.axes) do dims[i] = axis0(a, r, "MeanVarianceNormalization") + 1 end
  local centered = x - x:mean(dims, true)
  return centered / ((centered * centered):mean(dims, true):sqrt() + 1e-9)
end)

return OPS
