-- passes/rewrite_attention.lua: rewrite rule: softmax(q @ k^T * s + mask) @ v written out -> one
-- scaled_dot_product_attention. The scale divides or multiplies the scores or q (or is absent: 1); the mask is
-- added (float) or selects with where(mask, scores, -inf) / where(c, -inf, scores) (bool); k^T is whatever value
-- the product reads (a transpose or permute of k, undone by a view). The kernel never holds the (L, S) scores and
-- sums in its own order (within 1e-5 of the written-out ops), so the rule is opt-in.
local S = require("ds.shape")

local q = { alt = { { "mul", "q", { scalar = "qmul" } }, { "div", "q", { scalar = "qdiv" } }, "q" } }
local qk = { "matmul", q, "kt", as = "qk" }
local scaled = { alt = { { "div", qk, { scalar = "div" } }, { "mul", qk, { scalar = "mul" } }, qk } }
local masked = { alt = {
  { "add", scaled, "fmask" },
  { "where", { "logical_not", "bmask" }, -math.huge, scaled },
  { "where", "bmask", scaled, -math.huge },
  { "where", "hidden", -math.huge, scaled },
  scaled } }

-- k (..., S, E) from kt (..., E, S): the view that made kt, undone
local function untransposed(kt, ctx)
  local v = ctx.value(kt)
  local n, node = #v.shape, v.node
  if node and node.op == "transpose" and #ctx.value(node.inputs[1]).shape == n then
    local a = node.attrs
    if (a.dim0 == n - 1 and a.dim1 == n) or (a.dim0 == n and a.dim1 == n - 1) then return node.inputs[1] end
  elseif node and node.op == "permute" then
    local dims = {}
    for i, d in ipairs(node.attrs.dims) do dims[i] = d end
    dims[n - 1], dims[n] = dims[n], dims[n - 1]
    return (ctx.emit("permute", { node.inputs[1] }, { dims = dims }))
  end
  return (ctx.emit("transpose", { kt }, { dim0 = n - 1, dim1 = n }))
end

return {
  name = "attention", exact = false, tolerance = "1e-5 (the kernel's own summation order)",
  patterns = { { "matmul", { "softmax", masked, as = "p" }, "v" } },
  check = function(m, ctx)
    local p, qv = ctx.value(m.p), ctx.value(m.q)
    local bool = m.bmask or m.hidden
    return ctx.node(m.p).attrs.dim == #p.shape and #qv.shape >= 2 and #ctx.value(m.kt).shape >= 2
      and (qv.dtype == "f32" or qv.dtype == "f64") and (not bool or ctx.value(bool).dtype == "bool")
      and (not m.fmask or ctx.value(m.fmask).dtype == qv.dtype)
      and S.equal(ctx.value(m.qk).shape, p.shape)
  end,
  rewrite = function(m, ctx)
    local scale = (m.qmul or 1) / (m.qdiv or 1) * (m.mul or 1) / (m.div or 1)
    local ins = { m.q, untransposed(m.kt, ctx), m.v }
    local kind = "none"
    if m.fmask then ins[4], kind = m.fmask, "float"
    elseif m.bmask then ins[4], kind = m.bmask, "bool"
    elseif m.hidden then ins[4], kind = ctx.emit("logical_not", { m.hidden }, {}), "bool" end
    return (ctx.emit("scaled_dot_product_attention", ins, { scale = scale, mask = kind, is_causal = false }))
  end,
}
