-- passes/rewrite_conv_bn.lua: rewrite rule: an inference BatchNormalization after a conv2d folded into the conv's
-- weight and bias. The normalization is a chain of per-channel constants (a frozen graph, after folding): ONNX's
-- (y - mean) * (scale / sqrt(var + eps)) + bias, ds's (y - mean) * rsqrt(var + eps) * weight + bias, or the same
-- without the affine part. W' = W * a and b' = b * a + c per out channel, computed in double once; the product then
-- rounds W * a instead of the conv's output (within 1e-5 relative), so the rule is opt-in.
local F = require("ds.ops")

local conv = { "conv2d", "x", { constant = "w" }, { constant = "b" }, as = "conv" }
local centered = { "sub", conv, { constant = "c1" } }
local scaled = { "mul", centered, { constant = "c2" } }

-- the chain, from the conv up: {op, constant name}
local CHAIN = { { "sub", "c1" }, { "mul", "c2" }, { "mul", "c3" }, { "add", "c4" } }

-- a constant usable per channel of (N, C, H, W): (C, 1, 1), (1, C, 1, 1), or one element
local function per_channel(shape, c)
  local n, numel = #shape, 1
  for _, d in ipairs(shape) do numel = numel * d end
  if numel == 1 then return true end
  if n < 3 or n > 4 or shape[n - 2] ~= c then return false end
  return shape[n] == 1 and shape[n - 1] == 1 and (n == 3 or shape[1] == 1)
end

local function tensor(ctx, id) return ctx.ir.consts[ctx.value(id).index].tensor end

-- the constant as a (C) f64 vector
local function vector(ctx, id, c) return F.expand(tensor(ctx, id):astype("f64"):reshape(-1), c) end

return {
  name = "conv_bn", exact = false, tolerance = "1e-5 relative (the weights round once more)",
  patterns = { { "add", { "mul", scaled, { constant = "c3" } }, { constant = "c4" } },
               { "add", scaled, { constant = "c4" } }, scaled },
  check = function(m, ctx)
    local y = ctx.value(m.conv)
    if y.dtype ~= "f32" and y.dtype ~= "f64" then return false end
    for _, step in ipairs(CHAIN) do
      local id = m[step[2]]
      if id and (ctx.value(id).dtype ~= y.dtype or not per_channel(ctx.value(id).shape, y.shape[2])) then
        return false
      end
    end
    return true
  end,
  rewrite = function(m, ctx)
    local node, w = ctx.node(m.conv), tensor(ctx, m.w)
    local c = w._shape[1]
    local a, off = F.ones({ c }, { dtype = "f64" }), F.zeros({ c }, { dtype = "f64" })
    for _, step in ipairs(CHAIN) do
      local id = m[step[2]]
      if id then
        local k = vector(ctx, id, c)
        if step[1] == "sub" then off = off - k
        elseif step[1] == "add" then off = off + k
        else a, off = a * k, off * k end
      end
    end
    local w2 = (w:astype("f64") * a:reshape(c, 1, 1, 1)):astype(w.dtype)
    local b2 = (tensor(ctx, m.b):astype("f64") * a + off):astype(w.dtype)
    return (ctx.emit("conv2d", { m.x, ctx.constant(w2), ctx.constant(b2) }, node.attrs))
  end,
}
