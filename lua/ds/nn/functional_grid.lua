-- nn/functional_grid.lua: ds.F.affine_grid and ds.F.grid_sample (2-D, PyTorch 1.13's semantics: modes bilinear and
-- nearest, padding zeros / border / reflection, align_corners), composed from ds ops: the grid's normalized
-- coordinates are unnormalized, clipped or reflected as PyTorch's grid sampler does, and the corners read with one
-- gather each over the image flattened per channel (out-of-range corners read 0), so the result differentiates in the
-- input and the grid, traces and compiles.
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function need_tensor(x, opname, what)
  if not Tensor.is_tensor(x) then raise("%s: %s must be a tensor, got %s", opname, what, type(x)) end
  return x
end

-- the normalized coordinates of n pixels: -1 .. 1 at the corners' centers (align_corners) or edges
local function base_coords(n, align_corners, dt)
  local t = {}
  for i = 0, n - 1 do
    if align_corners then t[i + 1] = n > 1 and -1 + 2 * i / (n - 1) or 0
    else t[i + 1] = (2 * i + 1) / n - 1 end
  end
  return ops.tensor(t, { dtype = dt })
end

-- theta (N, 2, 3), size {N, C, H, W} -> grid (N, H, W, 2): theta applied to each pixel's (x, y, 1)
function M.affine_grid(theta, size, align_corners)
  need_tensor(theta, "affine_grid", "theta")
  if type(size) ~= "table" or #size ~= 4 then raise("affine_grid: size must be {N, C, H, W} (2-D grids only)") end
  local N, H, W = size[1], size[3], size[4]
  if #theta._shape ~= 3 or not S.same(theta._shape[1], N) or theta._shape[2] ~= 2 or theta._shape[3] ~= 3 then
    raise("affine_grid: theta %s must be (N, 2, 3) for size {%s, ...}", S.str(theta._shape), tostring(N))
  end
  local dt = theta.dtype
  local xs = base_coords(W, align_corners == true, dt):reshape(1, W):expand(H, W)
  local ys = base_coords(H, align_corners == true, dt):reshape(H, 1):expand(H, W)
  local base = ops.stack({ xs, ys, ops.ones({ H, W }, { dtype = dt }) }, 3):reshape(1, H * W, 3)
  return ops.matmul(base, theta:transpose(2, 3)):reshape(N, H, W, 2)
end

-- PyTorch's reflect_coordinates: coordinates reflected into [twice_low / 2, twice_high / 2]
local function reflect(c, twice_low, twice_high)
  if twice_low == twice_high then return ops.zeros_like(c) end
  local min, span = twice_low / 2, (twice_high - twice_low) / 2
  local a = ops.abs(c - min)
  local extra = ops.fmod(a, span)
  local flips = ops.floor(a / span)
  local even = ops.eq(ops.remainder(flips, 2), 0)
  return ops.where(even, extra + min, (extra * -1 + span) + min)
end

-- normalized coordinates -> pixel coordinates of a dim of n, with the padding mode's clipping or reflection
local function source(c, n, padding_mode, align_corners)
  local p = align_corners and (c + 1) / 2 * (n - 1) or ((c + 1) * n - 1) / 2
  if padding_mode == "border" then return ops.clamp(p, 0, n - 1) end
  if padding_mode == "reflection" then
    p = align_corners and reflect(p, 0, 2 * (n - 1)) or reflect(p, -1, 2 * n - 1)
    return ops.clamp(p, 0, n - 1)
  end
  return p
end

-- input (N, C, H, W), grid (N, Ho, Wo, 2) of (x, y) in [-1, 1] -> (N, C, Ho, Wo); opts: mode ("bilinear",
-- "nearest"), padding_mode ("zeros", "border", "reflection"), align_corners (false)
function M.grid_sample(input, grid, opts)
  need_tensor(input, "grid_sample", "input"); need_tensor(grid, "grid_sample", "grid")
  opts = options.check(opts, "grid_sample", { mode = { "bilinear", "nearest" },
    padding_mode = { "zeros", "border", "reflection" }, align_corners = "boolean" })
  local xs, gs = input._shape, grid._shape
  if #xs ~= 4 or #gs ~= 4 or gs[4] ~= 2 or not S.same(xs[1], gs[1]) then
    raise("grid_sample: input (N, C, H, W) and grid (N, Ho, Wo, 2) expected (2-D only), got %s and %s", S.str(xs),
      S.str(gs))
  end
  if input.dtype ~= grid.dtype then raise("grid_sample: input %s and grid %s must have one dtype", input.dtype,
    grid.dtype) end
  local N, C, H, W, Ho, Wo = xs[1], xs[2], xs[3], xs[4], gs[2], gs[3]
  for _, v in ipairs { C, H, W, Ho, Wo } do
    if type(v) ~= "number" then raise("grid_sample: sizes other than the batch must be known, got %s and %s",
      S.str(xs), S.str(gs)) end
  end
  local mode, pad, ac = opts.mode or "bilinear", opts.padding_mode or "zeros", opts.align_corners == true
  local ix = source(grid:select(4, 1), W, pad, ac) -- (N, Ho, Wo)
  local iy = source(grid:select(4, 2), H, pad, ac)
  local flat = input:reshape(N, C, H * W)
  -- the image at integer pixel (x, y) (float tensors of (N, Ho, Wo)), 0 outside: (N, C, Ho, Wo)
  local function read(x, y)
    local inside = ops.logical_and(ops.logical_and(ops.ge(x, 0), ops.le(x, W - 1)),
      ops.logical_and(ops.ge(y, 0), ops.le(y, H - 1)))
    local idx = (ops.clamp(y, 0, H - 1) * W + ops.clamp(x, 0, W - 1)):astype("i64") + 1
    local v = ops.gather(flat, 3, idx:reshape(N, 1, Ho * Wo):expand(-1, C, -1):contiguous()):reshape(N, C, Ho, Wo)
    return ops.where(inside:unsqueeze(2), v, ops.zeros_like(v))
  end
  if mode == "nearest" then
    -- the grid's gradient is 0, as PyTorch's (a zero-valued term keeps the grid in the graph)
    local zero = (((ix - ix:detach()) + (iy - iy:detach())) * 0):unsqueeze(2)
    return read(ops.round(ix):detach(), ops.round(iy):detach()) + zero
  end
  local x0, y0 = ops.floor(ix):detach(), ops.floor(iy):detach()
  local tx, ty = (ix - x0):unsqueeze(2), (iy - y0):unsqueeze(2)
  return read(x0, y0) * ((1 - tx) * (1 - ty)) + read(x0 + 1, y0) * (tx * (1 - ty))
    + read(x0, y0 + 1) * ((1 - tx) * ty) + read(x0 + 1, y0 + 1) * (tx * ty)
end

return M
