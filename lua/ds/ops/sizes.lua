-- ops/sizes.lua: the shape arguments of factories and random ops: (sizes..., [opts]) or ({sizes}, [opts]).
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local sym = require("ds.sym")

local M = {}

-- sizes_and_opts(opname, ...) -> the checked shape, the options table ({} when none is given)
function M.sizes_and_opts(opname, ...)
  local n = select("#", ...)
  local last = n > 0 and select(n, ...) or nil
  local opts = {}
  if type(last) == "table" and not Tensor.is_tensor(last) and not sym.is(last) and last[1] == nil
    and next(last) ~= nil then
    opts = last; n = n - 1
  end
  local first = ...
  local shape
  if n >= 1 and type(first) == "table" and not sym.is(first) then
    shape = {}
    for i, d in ipairs(first) do shape[i] = d end
  else
    shape = {}
    for i = 1, n do shape[i] = (select(i, ...)) end
  end
  return S.check(shape, opname), opts
end

return M
