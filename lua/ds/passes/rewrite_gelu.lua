-- passes/rewrite_gelu.lua: rewrite rule: GELU written out -> gelu (x * 0.5 * (1 + erf(x / sqrt 2)), x / sqrt 2 or
-- x * (1 / sqrt 2)) or gelu_tanh (x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))), the three factors in
-- any grouping. The kernels evaluate in double and round once; the written-out f32 ops round at every step
-- (they differ by a few ulp), so the rule is opt-in.

-- the products x * half * e in each grouping of the three factors (half: 0.5 or a division by 2)
local function products(e)
  local half_x = { alt = { { "mul", "x", 0.5 }, { "div", "x", 2 } } }
  return { { "mul", half_x, e }, { "mul", { "mul", "x", e }, 0.5 }, { "mul", "x", { "mul", e, 0.5 } },
           { "div", { "mul", "x", e }, 2 } }
end

local scaled = { alt = { { "div", "x", 1.4142135623730951 }, { "mul", "x", 0.7071067811865476 } } }
local erf_form = products({ "add", { "erf", scaled }, 1 })
local cube = { alt = { { "pow", "x", 3 }, { "mul", "x", { "mul", "x", "x" } }, { "mul", { "mul", "x", "x" }, "x" } } }
local inner = { "mul", { "add", "x", { "mul", cube, 0.044715 } }, 0.7978845608028654 }
local tanh_form = products({ "add", { "tanh", inner, as = "tanh" }, 1 })

local function float(m, ctx) local dt = ctx.value(m.x).dtype; return dt == "f32" or dt == "f64" end

return {
  name = "gelu", exact = false, tolerance = "4 ulp (double evaluation rounded once vs f32 steps)",
  patterns = { erf_form[1], erf_form[2], erf_form[3], erf_form[4],
               tanh_form[1], tanh_form[2], tanh_form[3], tanh_form[4] },
  check = float,
  rewrite = function(m, ctx) return (ctx.emit(m.tanh and "gelu_tanh" or "gelu", { m.x }, {})) end,
}
