-- nn/functional_fold.lua: ds.F.unfold (im2col: the sliding blocks of an image as columns) and ds.F.fold (col2im:
-- the blocks summed back into an image), PyTorch's layout: channel c, kernel offset (i, j) is row
-- c * KH * KW + i * KW + j; block l is output position l in row-major order. Both are one index_select /
-- index_add over the zero-padded image flattened per channel, with constant indices, so values are exact copies
-- (fold: sums), and they differentiate (each is the other's gradient), trace and compile.
local ops = require("ds.ops")
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local constructor_args = require("ds.nn.constructor_args")
local spatial = require("ds.nn.functional_spatial")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local SPEC = { dilation = "any", padding = "any", stride = "any" }
local PARAMS = { "dilation", "padding", "stride" }

-- a number or a pair of positive (padding: non-negative) integers as a pair
local function pair(v, opname, what, min)
  if type(v) == "number" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 then
    raise("%s: %s must be an integer or a pair, got %s", opname, what, tostring(v))
  end
  for i = 1, 2 do
    if type(v[i]) ~= "number" or v[i] ~= math.floor(v[i]) or v[i] < min then
      raise("%s: %s must be integers >= %d, got %s", opname, what, min, tostring(v[i]))
    end
  end
  return v
end

-- kernel_size and the dilation, padding, stride options (PyTorch's positional order or an options table)
local function geometry(opname, kernel_size, ...)
  local o = constructor_args.merge(opname, PARAMS, SPEC, {}, ...)
  return pair(kernel_size, opname, "kernel_size", 1), pair(o.dilation or 1, opname, "dilation", 1),
    pair(o.padding or 0, opname, "padding", 0), pair(o.stride or 1, opname, "stride", 1)
end

-- the blocks' per-dim count and the flat (1-based) positions in the padded (Hp, Wp) image, kernel offsets
-- major, blocks minor: K * L entries
local function block_index(Hp, Wp, k, d, s, opname)
  local oh = math.floor((Hp - d[1] * (k[1] - 1) - 1) / s[1]) + 1
  local ow = math.floor((Wp - d[2] * (k[2] - 1) - 1) / s[2]) + 1
  if oh < 1 or ow < 1 then
    raise("%s: the kernel %dx%d (dilation %d, %d) does not fit the padded size %dx%d", opname, k[1], k[2], d[1], d[2],
      Hp, Wp)
  end
  local idx = {}
  for i = 0, k[1] - 1 do
    for j = 0, k[2] - 1 do
      for a = 0, oh - 1 do
        for b = 0, ow - 1 do idx[#idx + 1] = (a * s[1] + i * d[1]) * Wp + b * s[2] + j * d[2] + 1 end
      end
    end
  end
  return ops.tensor(idx, { dtype = "i64" }), oh * ow
end

-- the dims from `first` on must have known sizes (first = 2 for a batched input: the batch may be symbolic)
local function known(x, opname, first)
  for i = first, #x._shape do
    local n = x._shape[i]
    if type(n) ~= "number" then raise("%s: dim %d of %s must have a known size", opname, i, S.str(x._shape)) end
  end
end

-- x: (N, C, H, W) or (C, H, W) -> (N, C * KH * KW, L) or (C * KH * KW, L), L the number of blocks;
-- unfold(x, kernel_size, dilation (1), padding (0), stride (1)) positionally or with an options table
function M.unfold(x, kernel_size, ...)
  if not Tensor.is_tensor(x) then raise("unfold: input must be a tensor, got %s", type(x)) end
  local k, d, p, s = geometry("unfold", kernel_size, ...)
  local batched = #x._shape == 4
  if not batched and #x._shape ~= 3 then raise("unfold: input must be (N, C, H, W) or (C, H, W), got %s",
    S.str(x._shape)) end
  if not batched then x = x:unsqueeze(1) end
  known(x, "unfold", 2)
  local N, C = x._shape[1], x._shape[2]
  local Hp, Wp = x._shape[3] + 2 * p[1], x._shape[4] + 2 * p[2]
  local idx, L = block_index(Hp, Wp, k, d, s, "unfold")
  local flat = spatial.pad(x, { p[2], p[2], p[1], p[1] }):reshape(N, C, Hp * Wp)
  local y = ops.index_select(flat, 3, idx):reshape(N, C * k[1] * k[2], L)
  return batched and y or y:squeeze(1)
end

-- x: (N, C * KH * KW, L) or (C * KH * KW, L) -> (N, C, H, W) or (C, H, W), overlapping blocks summed;
-- fold(x, output_size, kernel_size, dilation (1), padding (0), stride (1)) positionally or with an options table
function M.fold(x, output_size, kernel_size, ...)
  if not Tensor.is_tensor(x) then raise("fold: input must be a tensor, got %s", type(x)) end
  local k, d, p, s = geometry("fold", kernel_size, ...)
  local out = pair(output_size, "fold", "output_size", 1)
  local batched = #x._shape == 3
  if not batched and #x._shape ~= 2 then raise("fold: input must be (N, C * KH * KW, L) or (C * KH * KW, L), got %s",
    S.str(x._shape)) end
  if not batched then x = x:unsqueeze(1) end
  known(x, "fold", 2)
  local N, CK, nl = x._shape[1], x._shape[2], x._shape[3]
  local K = k[1] * k[2]
  if CK % K ~= 0 then raise("fold: dim %d of %s must be divisible by the kernel's %d positions",
    batched and 2 or 1, S.str(x._shape), K) end
  local Hp, Wp = out[1] + 2 * p[1], out[2] + 2 * p[2]
  local idx, L = block_index(Hp, Wp, k, d, s, "fold")
  if nl ~= L then raise("fold: input %s has %d blocks, output_size %dx%d with these options gives %d",
    S.str(x._shape), nl, out[1], out[2], L) end
  local C = CK / K
  local y = ops.zeros({ N, C, Hp * Wp }, { dtype = x.dtype }):index_add(3, idx, x:reshape(N, C, K * L))
  y = y:reshape(N, C, Hp, Wp):narrow(3, p[1] + 1, out[1]):narrow(4, p[2] + 1, out[2])
  return batched and y or y:squeeze(1)
end

return M
