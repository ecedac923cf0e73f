-- onnx/handlers/nn_grid_sample.lua: ONNX import handler of GridSample (opsets 16 and 20, 2-D): X sampled at
-- the runtime grid's positions, as PyTorch's grid_sample (which ONNX's expected values come from).
--[[ X (N, C, H, W), grid (N, Ho, Wo, 2) of (x, y) in [-1, 1] -> (N, C, Ho, Wo). The grid is unnormalized to
  pixel coordinates (align_corners: -1 and 1 are the corner pixels' centers, else their outer edges); for
  bilinear and nearest the coordinate is then clamped (border) or reflected (reflection); bicubic clamps or
  reflects each of its 16 taps instead. A tap outside the image reads 0. Every tap is a gather from X
  flattened to (N, C, H W) with the tap's flat index, times its weight. ]]
local F = require("ds.ops")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, refuse, rank = V.tensor, common.refuse, common.rank

local MODES = { bilinear = "linear", linear = "linear", nearest = "nearest", bicubic = "cubic", cubic = "cubic" }
local A = -0.75 -- PyTorch's bicubic coefficient

-- coordinate c (a tensor) of an axis of `size` pixels reflected into range (PyTorch's reflect_coordinates)
local function reflect(c, size, align_corners)
  local low, high = -0.5, size - 0.5
  if align_corners then low, high = 0, size - 1 end
  if high <= low then return c * 0 end
  local span = high - low
  local d = F.abs(c - low)
  local extra = F.fmod(d, span)
  local flips = F.floor(d / span)
  local even = F.eq(F.remainder(flips, 2), 0)
  return F.where(even, extra + low, span - extra + low)
end
local function fix_coordinate(c, size, padding_mode, align_corners)
  if padding_mode == "border" then return F.clamp(c, 0, size - 1) end
  if padding_mode == "reflection" then return F.clamp(reflect(c, size, align_corners), 0, size - 1) end
  return c
end

-- the (N, C, Ho*Wo) values of X flat (N, C, H*W) at integer-valued pixel coordinates xi, yi (N, Ho*Wo),
-- times weight (N, Ho*Wo); 0 outside the image
local function tap(flat, xi, yi, weight, h, w)
  local inside = F.logical_and(F.logical_and(F.ge(xi, 0), F.le(xi, w - 1)),
    F.logical_and(F.ge(yi, 0), F.le(yi, h - 1)))
  local index = (F.clamp(yi, 0, h - 1) * w + F.clamp(xi, 0, w - 1)):astype("i64") + 1
  local s = flat.shape
  local values = F.gather(flat, 3, index:unsqueeze(2):expand(s[1], s[2], index.shape[2]))
  return values * F.where(inside, weight, 0):unsqueeze(2)
end

local function cubic_weights(t)
  local function near(x) return ((x * (A + 2)) - (A + 3)) * x * x + 1 end
  local function far(x) return ((x * A - 5 * A) * x + 8 * A) * x - 4 * A end
  return { far(t + 1), near(t), near(1 - t), far(2 - t) }
end

def("GridSample", { align_corners = 0, mode = "bilinear", padding_mode = "zeros" }, function(ins, at)
  local x, grid = T(ins[1]), T(ins[2])
  if rank(x) ~= 4 or rank(grid) ~= 4 then refuse("GridSample: only 2-D sampling ((N, C, H, W) input) is supported") end
  local mode = MODES[at.mode] or refuse("GridSample: mode " .. tostring(at.mode) .. " is not supported")
  local pm = at.padding_mode
  if pm ~= "zeros" and pm ~= "border" and pm ~= "reflection" then
    refuse("GridSample: padding_mode " .. tostring(pm) .. " is not supported")
  end
  local align = at.align_corners ~= 0
  local n, c, h, w = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  if type(h) ~= "number" or type(w) ~= "number" then refuse("GridSample: the input's H and W must be known") end
  local ho, wo = grid.shape[2], grid.shape[3]
  local flat = x:reshape(n, c, h * w)
  local g = grid:reshape(grid.shape[1], -1, 2)
  local function unnormalize(v, size)
    if align then return (v + 1) * ((size - 1) / 2) end
    return ((v + 1) * size - 1) / 2
  end
  local ix, iy = unnormalize(g:select(3, 1), w), unnormalize(g:select(3, 2), h)
  local y
  local function add(part) y = y and y + part or part end
  if mode == "cubic" then
    local x0, y0 = F.floor(ix), F.floor(iy)
    local wx, wy = cubic_weights(ix - x0), cubic_weights(iy - y0)
    for j = 1, 4 do
      local yj = F.floor(fix_coordinate(y0 + (j - 2), h, pm, align))
      for i = 1, 4 do
        add(tap(flat, F.floor(fix_coordinate(x0 + (i - 2), w, pm, align)), yj, wx[i] * wy[j], h, w))
      end
    end
  else
    ix, iy = fix_coordinate(ix, w, pm, align), fix_coordinate(iy, h, pm, align)
    if mode == "nearest" then
      add(tap(flat, F.round(ix), F.round(iy), F.ones_like(ix), h, w))
    else
      local x0, y0 = F.floor(ix), F.floor(iy)
      local tx, ty = ix - x0, iy - y0
      add(tap(flat, x0, y0, (1 - tx) * (1 - ty), h, w))
      add(tap(flat, x0 + 1, y0, tx * (1 - ty), h, w))
      add(tap(flat, x0, y0 + 1, (1 - tx) * ty, h, w))
      add(tap(flat, x0 + 1, y0 + 1, tx * ty, h, w))
    end
  end
  return y:reshape(n, c, ho, wo)
end)

return OPS
