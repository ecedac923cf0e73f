-- nn/conv_padding.lua: the explicit padding of a convolution module's padding_mode other than "zeros" (PyTorch
-- pads with F.pad in that mode, then convolves with no padding); "same" splits each dim's total d (k - 1) as
-- PyTorch does, the odd one on the right; and the output_padding a transposed convolution module's forward(x,
-- output_size) needs for that size.
local spatial = require("ds.nn.functional_spatial")
local errors = require("ds.errors")
local S = require("ds.shape")

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

-- the output_padding (a list of n) that makes a transposed convolution of x give output_size (its last n
-- entries: PyTorch also takes (N, C, ...) sizes); kernel, stride, padding, dilation: lists of n
function M.output_padding(name, x, output_size, kernel, stride, padding, dilation, n)
  if type(output_size) ~= "table" or (#output_size ~= n and #output_size ~= n + 1 and #output_size ~= n + 2) then
    errors.raise(string.format("%s: output_size must be a list of %d sizes (or with the batch and channel dims)",
      name, n))
  end
  local out = {}
  for i = 1, n do
    local want = output_size[#output_size - n + i]
    local size = x._shape[#x._shape - n + i]
    if type(size) ~= "number" then
      errors.raise(string.format("%s: dim %d of %s must have a known size", name, #x._shape - n + i, S.str(x._shape)))
    end
    local min = (size - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + 1
    if type(want) ~= "number" or want < min or want > min + stride[i] - 1 then
      errors.raise(string.format("%s: output_size %s is not reachable: dim %d takes %d to %d", name,
        tostring(want), i, min, min + stride[i] - 1))
    end
    out[i] = want - min
  end
  return out
end

return M
