-- serve/util.lua: small helpers the serving modules share: a whole file's bytes, batch and packed sizes.
local M = {}

-- the bytes of the file at path, or nil
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a"); f:close()
  return s
end

-- the smallest power of two >= n (batch sizes: a few shapes, so a few compiled plans)
function M.pow2(n)
  local p = 1
  while p < n do p = p * 2 end
  return p
end

-- the packed row count for n tokens: n rounded up to a step of at least 8 that is at most 1/8 of it (8 steps per
-- doubling: a few compiled plans, at most 12.5% of the rows unused)
function M.token_rows(n)
  local step = 8
  while step * 16 < n do step = step * 2 end
  return math.ceil(n / step) * step
end

return M
