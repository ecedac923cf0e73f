-- nn/conv_padding.lua: the explicit padding of a convolution module's padding_mode other than "zeros" (PyTorch
-- pads with F.pad in that mode, then convolves with no padding); "same" splits each dim's total d (k - 1) as
-- PyTorch does, the odd one on the right.
local spatial = require("ds.nn.functional_spatial")

local M = {}

M.MODES = { "zeros", "reflect", "replicate", "circular" }

-- x: (..., spatial n dims); padding: "same", "valid", a number or a list of n; kernel, dilation: lists of n
function M.pad(x, mode, padding, kernel, dilation, n)
  local pad = {}
  for i = n, 1, -1 do
    local l, r
    if padding == "same" then
      local total = dilation[i] * (kernel[i] - 1)
      l = math.floor(total / 2); r = total - l
    elseif padding == "valid" then l, r = 0, 0
    else
      l = type(padding) == "table" and padding[i] or padding
      r = l
    end
    pad[#pad + 1] = l; pad[#pad + 1] = r
  end
  return spatial.pad(x, pad, mode)
end

return M
