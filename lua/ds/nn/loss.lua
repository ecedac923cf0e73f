-- nn/loss.lua: the losses as modules (PyTorch's names): each takes PyTorch's positional arguments and/or
-- an options table, checks them when constructed and calls its ds.F function; tensor options (weight,
-- pos_weight) are registered as buffers, as in PyTorch.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local LOSS_OPTIONS = require("ds.nn.loss_options")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local options = require("ds.options")

local M = {}

-- PyTorch 1.13's deprecated constructor arguments: a value there is refused (ds takes reduction only)
local DEPRECATED = { size_average = true, reduce = true }

-- name -> the F function it calls, its number of tensor inputs and PyTorch 1.13's constructor parameters in
-- order (the positional form: nn.NLLLoss(weight), nn.HuberLoss("sum", 0.5))
local LOSSES = {
  CrossEntropyLoss = { "cross_entropy", 2, { "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing" } },
  NLLLoss = { "nll_loss", 2, { "weight", "size_average", "ignore_index", "reduce", "reduction" } },
  MSELoss = { "mse_loss", 2, { "size_average", "reduce", "reduction" } },
  L1Loss = { "l1_loss", 2, { "size_average", "reduce", "reduction" } },
  BCEWithLogitsLoss = { "binary_cross_entropy_with_logits", 2, { "weight", "size_average", "reduce", "reduction", "pos_weight" } },
  BCELoss = { "binary_cross_entropy", 2, { "weight", "size_average", "reduce", "reduction" } },
  SmoothL1Loss = { "smooth_l1_loss", 2, { "size_average", "reduce", "reduction", "beta" } },
  HuberLoss = { "huber_loss", 2, { "reduction", "delta" } },
  KLDivLoss = { "kl_div", 2, { "size_average", "reduce", "reduction", "log_target" } },
  MarginRankingLoss = { "margin_ranking_loss", 3, { "margin", "size_average", "reduce", "reduction" } },
}

local function is_options(v) return type(v) == "table" and getmetatable(v) == nil end

-- (positional..., [options]) -> one options table, checked against the loss's options; errors name the module
local function constructor_options(name, fname, params, ...)
  local n = select("#", ...)
  local args = { ... }
  local opts = {}
  if n > 0 and is_options(args[n]) then
    for k, v in pairs(args[n]) do opts[k] = v end
    n = n - 1
  end
  if n > #params then
    errors.raise(string.format("%s: takes at most %d positional arguments (%s) and an options table, got %d",
      name, #params, table.concat(params, ", "), n))
  end
  for i = 1, n do
    local key, v = params[i], args[i]
    if v ~= nil then
      if is_options(v) then errors.raise(string.format("%s: the options table must be the last argument", name)) end
      if DEPRECATED[key] then
        errors.raise(string.format("%s: argument %d is PyTorch's deprecated %s; give the reduction as {reduction = \"mean\"|\"sum\"|\"none\"}",
          name, i, key))
      end
      if opts[key] ~= nil then errors.raise(string.format("%s: %s given twice (argument %d and the options table)", name, key, i)) end
      opts[key] = v
    end
  end
  return options.check(opts, name, LOSS_OPTIONS[fname])
end

for name, spec in pairs(LOSSES) do
  local fname, ninputs, params = spec[1], spec[2], spec[3]
  local fn = F[fname]
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. fname .. " as a module: nn." .. name .. "(" .. table.concat(params, ", ")
    .. ") positionally as PyTorch's (size_average and reduce refused) and/or an options table; tensor options become buffers"
  function cls:init(...)
    local o = {}
    for k, v in pairs(constructor_options(name, fname, params, ...)) do
      if Tensor.is_tensor(v) then self:register_buffer(k, v) else o[k] = v end
    end
    self.opts = o
  end
  -- the options with the buffers' current tensors (they follow :to(dtype) and load_state_dict)
  function cls:forward(a, b, c)
    local o = {}
    for k, v in pairs(self.opts) do o[k] = v end
    for _, k in ipairs { "weight", "pos_weight" } do o[k] = rawget(self, k) end
    if ninputs == 3 then return fn(a, b, c, o) end
    if c ~= nil then errors.raise(name .. ": takes 2 inputs (input, target), got a third") end
    return fn(a, b, o)
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

return M
