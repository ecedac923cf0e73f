-- onnx/handlers/nn_roi_align.lua: ONNX import handler of RoiAlign (opsets 10 and 16; mode avg, a fixed
-- sampling_ratio): each region of interest's bins averaged over bilinear samples, as ONNX Runtime computes.
--[[ X (N, C, H, W), rois (R, 4) of (x1, y1, x2, y2), batch_indices (R) -> (R, C, OH, OW). A region starts at
  roi * spatial_scale (- 0.5 with half_pixel) and spans at least 1 pixel in the legacy output_half_pixel mode;
  bin (ph, pw) averages sampling_ratio^2 samples at its sub-cell centers. A sample outside [-1, H] x [-1, W]
  counts 0; others are clamped at 0 and at the last pixel and interpolated bilinearly. The samples' rows and
  columns are computed per region (R, OH sr) and (R, OW sr) and read with one gather per corner. ]]
local F = require("ds.ops")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, refuse, rank = V.tensor, common.refuse, common.rank

--[[ along one axis of `size` pixels: sample coordinates (R, out * sr) of regions [start, start + length)
  -> low and high pixel (float, whole), weights of each, and 1 where the sample counts ]]
local function axis_samples(start, length, out, sr, size)
  local offsets = {}
  for p = 0, out - 1 do
    for i = 0, sr - 1 do offsets[#offsets + 1] = p + (i + 0.5) / sr end
  end
  local pos = start:unsqueeze(2) + F.tensor(offsets, { dtype = start.dtype }):unsqueeze(1) *
    (length / out):unsqueeze(2)
  local counts = F.logical_and(F.ge(pos, -1), F.le(pos, size)):astype(pos.dtype)
  pos = F.clamp(pos, 0)
  local low = F.floor(pos)
  local at_end = F.ge(low, size - 1)
  low = F.where(at_end, size - 1, low)
  local high = F.where(at_end, size - 1, low + 1)
  pos = F.where(at_end, low, pos)
  local frac = pos - low
  return low, high, 1 - frac, frac, counts
end

def("RoiAlign", { coordinate_transformation_mode = "half_pixel", mode = "avg", output_height = 1,
  output_width = 1, sampling_ratio = 0, spatial_scale = 1.0 }, function(ins, at, _, opset)
  local x, rois, batch = T(ins[1]), T(ins[2]), T(ins[3])
  if rank(x) ~= 4 then refuse("RoiAlign: the input must be (N, C, H, W)") end
  if at.mode ~= "avg" then refuse("RoiAlign: mode " .. tostring(at.mode) .. " is not supported (avg only)") end
  local sr = at.sampling_ratio
  if sr < 1 then refuse("RoiAlign: sampling_ratio 0 (adaptive to each region's runtime size) is not supported") end
  local ctm = opset < 16 and "output_half_pixel" or at.coordinate_transformation_mode
  if ctm ~= "half_pixel" and ctm ~= "output_half_pixel" then
    refuse("RoiAlign: coordinate_transformation_mode " .. tostring(ctm) .. " is not supported")
  end
  local c, h, w = x.shape[2], x.shape[3], x.shape[4]
  if type(h) ~= "number" or type(w) ~= "number" or type(c) ~= "number" then
    refuse("RoiAlign: the input's C, H and W must be known")
  end
  local oh, ow = at.output_height, at.output_width
  local shift = ctm == "half_pixel" and 0.5 or 0
  local box = rois * at.spatial_scale - shift
  local x1, y1, x2, y2 = box:select(2, 1), box:select(2, 2), box:select(2, 3), box:select(2, 4)
  local rw, rh = x2 - x1, y2 - y1
  if ctm == "output_half_pixel" then rw, rh = F.clamp(rw, 1), F.clamp(rh, 1) end
  local ylo, yhi, wylo, wyhi, cy = axis_samples(y1, rh, oh, sr, h)
  local xlo, xhi, wxlo, wxhi, cx = axis_samples(x1, rw, ow, sr, w)
  -- X as (C, N H W); a sample of region r at row a, column b reads flat index batch[r] H W + row W + column
  local flat = x:permute(2, 1, 3, 4):reshape(c, -1)
  local base = (batch:astype("i64") * (h * w) + 1):reshape(-1, 1, 1)
  local r = rois.shape[1]
  local sum
  for _, yc in ipairs { { ylo, wylo }, { yhi, wyhi } } do
    for _, xc in ipairs { { xlo, wxlo }, { xhi, wxhi } } do
      -- (R, OH sr, OW sr)
      local index = base + (yc[1]:astype("i64") * w):unsqueeze(3) + xc[1]:astype("i64"):unsqueeze(2)
      local values = F.index_select(flat, 2, index:reshape(-1)):reshape(c, r, oh * sr, ow * sr)
      local part = values * (yc[2] * cy):unsqueeze(3) * (xc[2] * cx):unsqueeze(2)
      sum = sum and sum + part or part
    end
  end
  return sum:reshape(c, r, oh, sr, ow, sr):mean({ 4, 6 }):permute(2, 1, 3, 4)
end)

return OPS
