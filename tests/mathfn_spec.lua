-- tests/mathfn_spec.lua: the f32 math of mathfn.h (exp, log, tanh, erf, sigmoid, silu, gelu, softplus, ...)
-- against f64 over every f32 exponent, denormals, +-0, +-inf and NaN: at most 2 ulp (the figures are printed).
-- The same functions give the same bits on every ISA path: tests/isa_cases.lua holds them for tests/isa_spec.lua.
local ds = require("ds")
local sweep = require("mathfn_sweep")
local F = ds.nn.functional

local FLT_MAX, ROUNDS_TO_INF = 3.4028234663852886e38, 3.4028235677973366e38

-- |y - r| in units of the f32 ulp at r (subnormal spacing below 2^-126); y an f32 result, r the f64 reference
local function ulp_error(y, r)
  if r ~= r then return y ~= y and 0 or math.huge end
  if y ~= y then return math.huge end
  local a = math.abs(r)
  if a >= ROUNDS_TO_INF then return y == (r > 0 and 1 or -1) * math.huge and 0 or math.huge end
  if math.abs(y) == math.huge then y = (y > 0 and 1 or -1) * 2 ^ 128 end
  local _, e = math.frexp(a)
  return math.abs(y - r) / 2 ^ (math.max(e - 1, -126) - 23)
end

describe("f32 math against f64", function()
  local x = sweep.inputs(128)
  local xd = x:astype("f64")
  local n = x:numel()
  -- the values through totable, which reads NaN payloads as the one NaN: through an FFI pointer some reach Lua
  -- as other types and math.abs on them retried forever (a hang in about one run in four)
  local px = x:totable()
  for _, fn in ipairs(sweep.functions) do
    it(fn[1] .. ": at most 2 ulp over the whole f32 range", function()
      local y, r = fn[2](x), fn[2](xd)
      assert.equal("f32", y.dtype)
      local py, pr = y:totable(), r:totable()
      local worst, at = 0, 1
      for i = 1, n do
        local err = ulp_error(py[i], pr[i])
        if err > worst then worst, at = err, i end
      end
      print(string.format("mathfn_spec: %-18s max %.3f ulp (x = %.9g: %.9g, f64 %.17g)", fn[1], worst, px[at], py[at], pr[at]))
      assert(worst <= 2, string.format("%s: %.3f ulp at x = %.9g", fn[1], worst, px[at]))
    end)
  end

  -- erf and gelu compute in f32 (mathfn.h): their bound is measured over a dense sample of the whole range where
  -- they are not constant, gelu's negative tail relative to its tiny values down to the subnormals
  local useful = {
    { "erf", ds.erf, { { 0x00000000, 0x40800000 }, { 0x80000000, 0xc0800000 } } },   -- |x| <= 4
    { "gelu", F.gelu, { { 0x00000000, 0x41700000 }, { 0x80000000, 0xc1700000 } } },  -- |x| <= 15
  }
  for _, u in ipairs(useful) do
    it(u[1] .. ": at most 2 ulp over every 4099th f32 of its useful range", function()
      local worst, at = 0, 0
      for _, r in ipairs(u[3]) do
        local xs = sweep.bit_range(r[1], r[2], 4099)
        local px, py, pr = xs:totable(), u[2](xs):totable(), u[2](xs:astype("f64")):totable()
        for i = 1, #px do
          local err = ulp_error(py[i], pr[i])
          if err > worst then worst, at = err, px[i] end
        end
      end
      print(string.format("mathfn_spec: %s over its useful range: max %.3f ulp (x = %.9g)", u[1], worst, at))
      assert(worst <= 2, string.format("%s: %.3f ulp at x = %.9g", u[1], worst, at))
    end)
  end

  it("keeps the tails: sigmoid, silu, gelu of large negative x are not flushed to 0", function()
    local t = ds.tensor({ -30, -60, -90 })
    for _, v in ipairs(ds.sigmoid(t):totable()) do assert.is_true(v > 0) end
    local g = ds.nn.functional.gelu(ds.tensor({ -8, -12 })):totable()
    assert.is_true(g[1] < 0 and g[2] < 0)
  end)

  it("exact where the value is exact: exp(0), log(1), tanh(+-0), erf(+-0), +-inf limits, NaN in NaN out", function()
    local inf = math.huge
    local t = ds.tensor({ 0, -0.0, inf, -inf, 0 / 0 })
    local function same(a, b) return (a ~= a and b ~= b) or (a == b and 1 / a == 1 / b) or (a == b and a ~= 0) end
    local want = {
      exp = { 1, 1, inf, 0, 0 / 0 }, tanh = { 0, -0.0, 1, -1, 0 / 0 }, erf = { 0, -0.0, 1, -1, 0 / 0 },
      sigmoid = { 0.5, 0.5, 1, 0, 0 / 0 }, gelu = { 0, -0.0, inf, 0 / 0, 0 / 0 },
    }
    local fns = { exp = ds.exp, tanh = ds.tanh, erf = ds.erf, sigmoid = ds.sigmoid, gelu = F.gelu }
    for name, w in pairs(want) do
      local got = fns[name](t):totable()
      for i = 1, #w do assert(same(got[i], w[i]), string.format("%s(%g) = %g, want %g", name, t:totable()[i], got[i], w[i])) end
    end
    assert.equal(0, ds.log(ds.tensor({ 1 })):totable()[1])
  end)
end)
