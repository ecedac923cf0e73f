-- optim/adam_variants.lua: RAdam, NAdam and Adamax (torch 1.13 formulas and defaults; maximize as later torch
-- versions have it), one fused update kernel per parameter; state per parameter: step (f32), exp_avg and
-- exp_avg_sq (Adamax: exp_inf; NAdam also mu_product, an f32 scalar as torch keeps it).
local variant = require("ds.optim.single_update")
local adam = require("ds.optim.adam")
local errors = require("ds.errors")
local defs = require("ds.ops.optim").defs
local F = require("ds.ops")

local POSITIONAL = { "lr", "betas", "eps", "weight_decay" } -- PyTorch's order (foreach, next, is not taken)

local function moments(p) return { step = F.zeros({}), exp_avg = F.zeros_like(p), exp_avg_sq = F.zeros_like(p) } end

local RAdam = variant("RAdam", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, maximize = false },
  POSITIONAL, defs.radam_update, moments, function(st) return { st.exp_avg, st.exp_avg_sq, st.step } end, adam.values)
RAdam.check_group = adam.check_group

local NAdam = variant("NAdam", { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
                                 momentum_decay = 4e-3, maximize = false },
  { "lr", "betas", "eps", "weight_decay", "momentum_decay" }, defs.nadam_update,
  function(p)
    local st = moments(p)
    st.mu_product = F.ones({})
    return st
  end,
  function(st) return { st.exp_avg, st.exp_avg_sq, st.mu_product, st.step } end,
  function(self, g)
    local v = adam.values(self, g)
    v.momentum_decay = g.momentum_decay
    return v
  end)
function NAdam.check_group(g, name)
  adam.check_group(g, name)
  if g.momentum_decay < 0 then errors.raise(name .. ": invalid momentum_decay " .. g.momentum_decay) end
end

local Adamax = variant("Adamax", { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, maximize = false },
  POSITIONAL, defs.adamax_update,
  function(p) return { step = F.zeros({}), exp_avg = F.zeros_like(p), exp_inf = F.zeros_like(p) } end,
  function(st) return { st.exp_avg, st.exp_inf, st.step } end, adam.values)
Adamax.check_group = adam.check_group

return { RAdam = RAdam, NAdam = NAdam, Adamax = Adamax }
