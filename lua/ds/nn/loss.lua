-- nn/loss.lua: the losses as modules (PyTorch's names): each stores its options and calls its
-- ds.F function; tensor options (weight, pos_weight) are registered as buffers, as in PyTorch.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local Tensor = require("ds.tensor")

local M = {}

-- name -> the F function it calls; the module takes F's options table (reduction, ...)
local LOSSES = {
  CrossEntropyLoss = "cross_entropy", NLLLoss = "nll_loss", MSELoss = "mse_loss", L1Loss = "l1_loss",
  BCEWithLogitsLoss = "binary_cross_entropy_with_logits", BCELoss = "binary_cross_entropy",
  SmoothL1Loss = "smooth_l1_loss", HuberLoss = "huber_loss", KLDivLoss = "kl_div",
}

for name, fname in pairs(LOSSES) do
  local fn = F[fname]
  if fn then -- a loss whose function is not in ds.F yet has no module either
    local cls = Module:extend(name, { init = { "table?" } })
    cls._doc = "ds.F." .. fname .. " as a module (its options table; tensor options become buffers)"
    function cls:init(opts)
      local o = {}
      for k, v in pairs(opts or {}) do
        if Tensor.is_tensor(v) then self:register_buffer(k, v) else o[k] = v end
      end
      self.opts = o
    end
    -- the options with the buffers' current tensors (they follow :to(dtype) and load_state_dict)
    function cls:forward(input, target)
      local o = {}
      for k, v in pairs(self.opts) do o[k] = v end
      for _, k in ipairs { "weight", "pos_weight" } do o[k] = rawget(self, k) end
      return fn(input, target, o)
    end
    function cls:extra_repr()
      local keys, parts = {}, {}
      for k in pairs(self.opts) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(self.opts[k]) end
      return table.concat(parts, ", ")
    end
    M[name] = cls
  end
end

return M
