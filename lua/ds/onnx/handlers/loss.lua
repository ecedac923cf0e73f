-- onnx/handlers/loss.lua: ONNX import handlers of losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss),
-- on ds's nll_loss with ONNX's 0-based class labels shifted to ds's 1-based ones.
local F = require("ds.ops")
local NF = require("ds.nn.functional")
local dtype = require("ds.dtype")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, refuse = V.tensor, common.refuse

local REDUCTIONS = { none = true, sum = true, mean = true }

-- the loss of log-probabilities logp (N, C, d...) at 0-based labels (N, d...), with the optional weight (C)
local function nll(op, logp, labels, weight, at)
  if not REDUCTIONS[at.reduction] then refuse(op .. ": reduction '" .. tostring(at.reduction) .. "' is not one of "
    .. "none, sum, mean") end
  if #logp.shape < 2 then refuse(op .. ": the input must be (N, C) or (N, C, d...), got rank " .. #logp.shape) end
  if not dtype.is_int[labels.dtype] then refuse(op .. ": labels must be integers, got " .. labels.dtype) end
  local opts = { reduction = at.reduction, weight = weight }
  if at.ignore_index then opts.ignore_index = at.ignore_index + 1 end
  return NF.nll_loss(logp, labels + 1, opts)
end

def("NegativeLogLikelihoodLoss", { reduction = "mean", ignore_index = false }, function(ins, at)
  return nll("NegativeLogLikelihoodLoss", T(ins[1]), T(ins[2]), ins[3] and T(ins[3]), at)
end)

-- scores (N, C, d...) -> loss, and log_prob (N, C, d...) = log_softmax over the classes
def("SoftmaxCrossEntropyLoss", { reduction = "mean", ignore_index = false }, function(ins, at)
  local scores = T(ins[1])
  if #scores.shape < 2 then
    refuse("SoftmaxCrossEntropyLoss: the scores must be (N, C) or (N, C, d...), got rank " .. #scores.shape)
  end
  local logp = F.log_softmax(scores, 2)
  return nll("SoftmaxCrossEntropyLoss", logp, T(ins[2]), ins[3] and T(ins[3]), at), logp
end)

return OPS
