-- passes/rewrite_layer_norm.lua: rewrite rule: LayerNorm written out (mean, sub, pow 2 or d*d, mean, add eps,
-- sqrt + div, or rsqrt or 1 / sqrt + mul; then * weight + bias, either optional) -> one layer_norm over the
-- reduced last dims.
-- The kernel accumulates the row statistics in double and multiplies by 1/std: not the written-out f32 bits
-- (within 1e-5 relative of the row's scale), so the rule is opt-in.
local F = require("ds.ops")
local S = require("ds.shape")

local mu = { "mean", "x", as = "mu", attrs = { keepdim = true } }
local d = { "sub", "x", mu, as = "d" }
local var = { "mean", { alt = { { "pow", "d", 2 }, { "mul", "d", "d" } } }, as = "var", attrs = { keepdim = true } }
local ve = { "add", var, { scalar = "eps" } }
local norm = { alt = { { "div", d, { "sqrt", ve } }, { "mul", d, { "rsqrt", ve } },
                       { "mul", d, { "div", 1, { "sqrt", ve } } } } }

-- the normalized shape: the last dims both means reduce (dims {n-k+1 .. n}, known sizes), or nil
local function normalized(m, ctx)
  local xs = ctx.value(m.x).shape
  local dims, ns = ctx.node(m.mu).attrs.dims, {}
  if not S.equal(ctx.node(m.var).attrs.dims, dims) then return nil end
  for i, dim in ipairs(dims) do
    if dim ~= #xs - #dims + i or type(xs[dim]) ~= "number" then return nil end
    ns[i] = xs[dim]
  end
  return #ns > 0 and ns or nil
end

-- a weight or bias value usable as (ns): that shape, or with leading 1s
local function fits(shape, ns)
  if #shape < #ns then return false end
  for i = 1, #shape - #ns do if shape[i] ~= 1 then return false end end
  for i = 1, #ns do if shape[#shape - #ns + i] ~= ns[i] then return false end end
  return true
end

return {
  name = "layer_norm", exact = false, tolerance = "1e-5 relative to the row's scale (statistics in double)",
  patterns = { { "add", { "mul", norm, "w" }, "b" }, { "mul", norm, "w" }, norm },
  check = function(m, ctx)
    local x = ctx.value(m.x)
    local ns = normalized(m, ctx)
    if not ns or (x.dtype ~= "f32" and x.dtype ~= "f64") or m.eps < 0 then return false end
    for _, k in ipairs({ "w", "b" }) do
      local v = m[k] and ctx.value(m[k])
      if v and (v.dtype ~= x.dtype or not fits(v.shape, ns)) then return false end
    end
    return true
  end,
  rewrite = function(m, ctx)
    local x = ctx.value(m.x)
    local ns = normalized(m, ctx)
    local function param(id, fill)
      if not id then return ctx.constant(F.full(ns, fill, { dtype = x.dtype })) end
      if #ctx.value(id).shape == #ns then return id end
      return (ctx.emit("reshape", { id }, { shape = ns }))
    end
    return (ctx.emit("layer_norm", { ctx.contiguous(m.x), param(m.w, 1), param(m.b, 0) },
      { normalized_shape = ns, eps = m.eps }))
  end,
}
