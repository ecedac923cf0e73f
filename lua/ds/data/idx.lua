-- data/idx.lua: IDX files (MNIST's format, gzip or plain) as tensors: u8, i32, f32, f64.
local dsffi = require("ds.ffi")
local Tensor = require("ds.tensor")
local dtype = require("ds.dtype")
local errors = require("ds.errors")

local M = {}

-- read(path) -> a contiguous tensor with the file's shape and element type
function M.read(path)
  if type(path) ~= "string" then errors.raise("read_idx: path must be a string, got " .. type(path)) end
  local c = dsffi.check(dsffi.C.ds_idx_read(path), "read_idx")
  local shape = {}
  for i = 1, c.ndim do shape[i] = tonumber(c.shape[i - 1]) end
  return Tensor._wrap(c, shape, dtype.names[c.dtype + 1])
end

return M
