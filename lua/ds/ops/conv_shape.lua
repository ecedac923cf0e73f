-- ops/conv_shape.lua: the output size of a convolution's spatial dim, shared by conv2d (ops/nn.lua) and the int8
-- convolutions (ops/quantized.lua).
local sym = require("ds.sym")
local S = require("ds.shape")
local errors = require("ds.errors")

local M = {}

-- output size of one spatial dim of size n for kernel size k, stride s, padding p, dilation d (n may be a
-- dynamic dim: a floor symbol then, checked when the plan is built); op, xs, ws name the call in the error
function M.conv_out(n, k, s, p, d, op, xs, ws)
  local ek = (k - 1) * d + 1
  if type(n) ~= "number" then return sym.add(sym.floordiv(sym.add(n, 2 * p - ek), s), 1) end
  if ek > n + 2 * p then
    errors.raise(string.format("%s: kernel %s (dilated size %d) is larger than the padded input %s (padding %d)",
      op, S.str(ws), ek, S.str(xs), p))
  end
  return math.floor((n + 2 * p - ek) / s) + 1
end

return M
