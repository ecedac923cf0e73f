-- tests/mathfn_sweep.lua: the f32 math functions (mathfn.h, through their ops) and a sweep of f32 inputs over
-- every exponent, for tests/mathfn_spec.lua (error against f64) and tests/isa_cases.lua (same bits per ISA path).
local ds = require("ds")
local ffi = require("ffi")
local F = ds.nn.functional
local M = {}

-- { name, f }: each f maps an f32 tensor to f32 and an f64 tensor to f64 (libm, the reference)
M.functions = {
  { "exp", ds.exp }, { "log", ds.log }, { "log1p", ds.log1p }, { "expm1", ds.expm1 }, { "log2", ds.log2 },
  { "sqrt", ds.sqrt }, { "rsqrt", ds.rsqrt }, { "sin", ds.sin }, { "cos", ds.cos }, { "tanh", ds.tanh },
  { "erf", ds.erf }, { "sigmoid", ds.sigmoid }, { "silu", F.silu }, { "gelu", F.gelu },
  { "gelu_tanh", function(x) return F.gelu(x, { approximate = "tanh" }) end },
  { "softplus", F.softplus },
  { "softplus beta 0.5", function(x) return F.softplus(x, 0.5, 10) end },
}

-- per_exponent values for each of the 256 exponent fields and both signs (field 0: +-0 and denormals, 255:
-- +-inf and NaNs), mantissas spread over the field with varied low bits; then 7 more values, so the length
-- is no multiple of a vector's lanes and the loops' tails run too. An f32 tensor.
function M.inputs(per_exponent)
  local n = 2 * 256 * per_exponent + 7
  local t = ds.zeros(n)
  local p = ffi.cast("uint32_t *", t:data_ptr())
  local k = 0
  for sign = 0, 1 do
    for e = 0, 255 do
      for j = 0, per_exponent - 1 do
        local mant = j == 0 and 0 or (j * math.floor(8388608 / per_exponent) + (j * 7919) % 4096) % 8388608
        p[k] = sign * 2147483648 + e * 8388608 + mant
        k = k + 1
      end
    end
  end
  for _, v in ipairs { 1, -1, 0.5, 1e-3, -20.5, 88.7, -103.9 } do
    ffi.cast("float *", p)[k] = v
    k = k + 1
  end
  return t
end

-- every stride-th f32 from bit pattern lo up to hi (same sign), as an f32 tensor: a sample of a function's useful
-- range dense enough to meet its worst inputs (tools/mathfn_exhaustive.c goes through all of them)
function M.bit_range(lo, hi, stride)
  local n = math.floor((hi - lo) / stride) + 1
  local t = ds.zeros(n)
  local p = ffi.cast("uint32_t *", t:data_ptr())
  for i = 0, n - 1 do p[i] = lo + i * stride end
  return t
end

return M
