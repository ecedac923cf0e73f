-- passes/layout.lua: contiguous strides and element counts of buffer layouts (shared by lower and memplan).
local M = {}

function M.contiguous_strides(shape)
  local st, s = {}, 1
  for i = #shape, 1, -1 do st[i] = s; s = s * shape[i] end
  return st
end

function M.numel(shape)
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  return n
end

function M.is_contiguous(shape, strides)
  local s = 1
  for i = #shape, 1, -1 do
    if shape[i] ~= 1 and strides[i] ~= s then return false end
    s = s * shape[i]
  end
  return true
end

return M
