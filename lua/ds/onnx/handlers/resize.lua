-- onnx/handlers/resize.lua: ONNX import handlers of Resize (opsets 10 to 19+) and Upsample (opsets 7 to 9):
-- separable N-D interpolation whose source indices and weights are computed at import from the static shapes.
--[[ Per resized axis, every output position j reads n taps of the input (n = 2 for nearest and linear, 4 for
  cubic, more with antialias) at indices clamped to the input (ONNX's edge padding) with weights, exactly as
  ONNX's reference (onnx/backend/test/case/node/resize.py) computes them: the source coordinate x_ori of the
  coordinate_transformation_mode, ratio = x_ori - floor(x_ori) (1 when x_ori is whole), the mode's
  coefficients of that ratio, exclude_outside's renormalization. The graph gets, per axis, one index_select
  per tap and their weighted sum (nearest: one index_select, so integer inputs stay exact). Axes are resized
  from the last to the first, so tf_crop_and_resize's extrapolation_value replaces what the inner axes
  computed, as the reference's recursion does. ]]
local F = require("ds.ops")
local dtype = require("ds.dtype")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, refuse, rank, axis0 = V.tensor, common.refuse, common.rank, common.axis0

-- ---- coefficients of a ratio in (0, 1]: offsets (relative to floor-ish base) and weights ----
local function cubic_kernel(x, a)
  x = math.abs(x)
  if x <= 1 then return ((a + 2) * x - (a + 3)) * x * x + 1 end
  if x < 2 then return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a end
  return 0
end
local NEAREST = {
  round_prefer_floor = function(r) return r <= 0.5 and 0 or 1 end,
  round_prefer_ceil = function(r) return r < 0.5 and 0 or 1 end,
  floor = function() return 0 end,
  ceil = function() return 1 end,
}
-- offsets, weights of output positions whose source is base + ratio; scale < 1 widens antialiased filters
local function coefficients(o, ratio, scale)
  if o.mode == "nearest" then
    local pick = ratio == 1 and 1 or NEAREST[o.nearest_mode](ratio)
    return { 0, 1 }, { pick == 0 and 1 or 0, pick == 1 and 1 or 0 }
  end
  local support = o.mode == "linear" and 1 or 2
  local s = (o.antialias and scale < 1) and scale or 1
  local start = math.floor(-support / s) + 1
  local offsets, weights, total = {}, {}, 0
  for i = start, 1 - start do
    local x = (i - ratio) * s
    offsets[#offsets + 1] = i
    weights[#weights + 1] = o.mode == "linear" and math.max(1 - math.abs(x), 0) or cubic_kernel(x, o.cubic_coeff_a)
    total = total + weights[#weights]
  end
  if o.antialias then for k = 1, #weights do weights[k] = weights[k] / total end end
  return offsets, weights
end

-- the source coordinate of output position x (0-based) of an axis of n_in -> n_out positions at scale
local function source_coordinate(o, x, n_in, n_out, scale, roi_start, roi_end)
  local width = scale * n_in -- ONNX's output_width: a float when scales are given
  local mode = o.coordinate_transformation_mode
  if mode == "half_pixel" then return (x + 0.5) / scale - 0.5
  elseif mode == "half_pixel_symmetric" then
    local offset = n_in / 2 * (1 - n_out / width)
    return offset + (x + 0.5) / scale - 0.5
  elseif mode == "pytorch_half_pixel" then return width == 1 and -0.5 or (x + 0.5) / scale - 0.5
  elseif mode == "align_corners" then return width == 1 and 0 or x * (n_in - 1) / (width - 1)
  elseif mode == "asymmetric" then return x / scale
  elseif mode == "tf_crop_and_resize" then
    local span = (roi_end - roi_start) * (n_in - 1)
    return (width == 1 and span / 2 or x * span / (width - 1)) + roi_start * (n_in - 1)
  end
  refuse("Resize: coordinate_transformation_mode " .. tostring(mode) .. " is not supported")
end

--[[ the plan of one axis: taps[t] = {idx = 1-based indices (n_out), w = weights (n_out)}, outside[j] true where
  tf_crop_and_resize's source lies outside the input (the output is extrapolation_value there) ]]
local function axis_plan(o, n_in, n_out, scale, roi_start, roi_end)
  local taps, outside = {}, {}
  for j = 0, n_out - 1 do
    local x = source_coordinate(o, j, n_in, n_out, scale, roi_start, roi_end)
    outside[j + 1] = o.coordinate_transformation_mode == "tf_crop_and_resize" and (x < 0 or x > n_in - 1) or nil
    local base = math.floor(x)
    local ratio = x - base
    if ratio == 0 then base, ratio = base - 1, 1 end
    local offsets, weights = coefficients(o, ratio, scale)
    if o.exclude_outside ~= 0 then
      local total = 0
      for k, off in ipairs(offsets) do
        local i = base + off
        if i < 0 or i >= n_in then weights[k] = 0 end
        total = total + weights[k]
      end
      for k = 1, #weights do weights[k] = weights[k] / total end
    end
    for k, off in ipairs(offsets) do
      taps[k] = taps[k] or { idx = {}, w = {} }
      taps[k].idx[j + 1] = math.min(math.max(base + off, 0), n_in - 1) + 1
      taps[k].w[j + 1] = weights[k]
    end
  end
  return taps, outside
end

local function index(list) return F.tensor(list, { dtype = "i64" }) end
-- a list of n_out values as a tensor broadcasting along dim d of a rank-r tensor
local function along(list, d, r, dt)
  local shape = {}
  for i = 1, r do shape[i] = i == d and #list or 1 end
  return F.tensor(list, { dtype = dt }):reshape(shape)
end

-- x resized along dim d (1-based) by the plan
local function resize_axis(x, d, taps, outside, o)
  -- one source per output position with weight 1 (nearest, whole coordinates): a plain gather
  local single = {}
  for j = 1, #taps[1].idx do
    for _, tap in ipairs(taps) do
      if tap.w[j] ~= 0 then
        if single[j] or tap.w[j] ~= 1 then single = nil; break end
        single[j] = tap.idx[j]
      end
    end
    if not single or not single[j] then single = nil; break end
  end
  local y
  if single then
    y = F.index_select(x, d, index(single))
  else
    if not dtype.is_float[x.dtype] then
      refuse("Resize: mode " .. o.mode .. " of a " .. x.dtype .. " input is not supported (float inputs only)")
    end
    for _, tap in ipairs(taps) do
      local part = F.index_select(x, d, index(tap.idx)) * along(tap.w, d, rank(x), x.dtype)
      y = y and y + part or part
    end
  end
  if next(outside) then
    local mask = {}
    for j = 1, #taps[1].idx do mask[j] = outside[j] == true end
    y = F.where(along(mask, d, rank(x), "bool"), F.full({}, o.extrapolation_value, { dtype = x.dtype }), y)
  end
  return y
end

-- a list of numbers from an optional input (nil when absent or empty)
local function optional_list(v, what)
  if v == nil then return nil end
  local d = V.data(v, what)
  if #d == 0 then return nil end
  return d
end

--[[ x resized: o holds the attributes; scales / sizes / roi are lists over `axes` (0-based, all dims when nil);
  sizes entries may be the input's own symbolic dims (unchanged axes) ]]
local function resize(x, o, scales, sizes, roi, axes)
  local r = rank(x)
  local list = {}
  if axes then
    for i, a in ipairs(axes) do list[i] = axis0(a, r, "Resize") + 1 end
  else
    for i = 1, r do list[i] = i end
  end
  local given = sizes or scales
  if not given then refuse("Resize: one of scales and sizes must be given") end
  if #given ~= #list then refuse("Resize: scales or sizes has " .. #given .. " values for " .. #list .. " axes") end
  if roi and #roi ~= 2 * #list then refuse("Resize: roi must have 2 values per resized axis") end
  local n_in, scale, n_out = {}, {}, {}
  for k, d in ipairs(list) do n_in[k] = x.shape[d] end
  -- keep_aspect_ratio_policy: one scale for all axes from the sizes
  local policy = o.keep_aspect_ratio_policy
  local common_scale
  if sizes and policy ~= "stretch" then
    for k = 1, #list do
      if type(sizes[k]) ~= "number" or type(n_in[k]) ~= "number" then
        refuse("Resize: keep_aspect_ratio_policy needs static sizes")
      end
      local s = sizes[k] / n_in[k]
      if policy == "not_larger" then common_scale = math.min(common_scale or s, s)
      elseif policy == "not_smaller" then common_scale = math.max(common_scale or s, s)
      else refuse("Resize: keep_aspect_ratio_policy " .. tostring(policy) .. " is not supported") end
    end
  end
  for k = 1, #list do
    local crop = roi and (roi[k + #list] - roi[k]) or 1
    if common_scale then
      scale[k], n_out[k] = common_scale, math.floor(common_scale * n_in[k] + 0.5)
    elseif sizes then
      n_out[k] = sizes[k]
      scale[k] = (n_out[k] == n_in[k]) and 1 or nil
      if not scale[k] then
        if type(n_out[k]) ~= "number" or type(n_in[k]) ~= "number" then
          refuse("Resize: resized dims must have known sizes")
        end
        scale[k] = n_out[k] / n_in[k]
      end
    else
      scale[k] = scales[k]
      if scale[k] <= 0 then refuse("Resize: scales must be positive") end
      if scale[k] == 1 and (o.coordinate_transformation_mode ~= "tf_crop_and_resize" or crop == 1) then
        n_out[k] = n_in[k]
      else
        if type(n_in[k]) ~= "number" then refuse("Resize: resized dims must have known sizes") end
        local m = o.coordinate_transformation_mode == "tf_crop_and_resize" and crop or 1
        n_out[k] = math.floor(n_in[k] * m * scale[k])
      end
    end
  end
  local numel = 1
  for k = 1, #list do
    numel = numel * (type(n_out[k]) == "number" and n_out[k] or 1)
    if n_out[k] ~= n_out[k] or numel > 2 ^ 31 then -- its plan is built element by element in Lua
      refuse(string.format("Resize: output size %s of axis %d is out of range (the resized axes hold at most 2^31 " ..
        "elements)", tostring(n_out[k]), list[k] - 1))
    end
  end
  for k = #list, 1, -1 do -- the last axis first (see the header)
    local roi_start, roi_end = roi and roi[k] or 0, roi and roi[k + #list] or 1
    local same = scale[k] == 1 and n_in[k] == n_out[k] and
      (o.coordinate_transformation_mode ~= "tf_crop_and_resize" or (roi_start == 0 and roi_end == 1))
    if not same then
      if type(n_in[k]) ~= "number" then refuse("Resize: resized dims must have known sizes") end
      if n_out[k] < 1 then refuse("Resize: the output size of axis " .. list[k] - 1 .. " would be empty") end
      local taps, outside = axis_plan(o, n_in[k], n_out[k], scale[k], roi_start, roi_end)
      x = resize_axis(x, list[k], taps, outside, o)
    end
  end
  return x
end

local MODES = { nearest = true, linear = true, cubic = true }
local function check_mode(o, op)
  if o.mode == "bilinear" then o.mode = "linear" end -- Upsample-1's name
  if not MODES[o.mode] then refuse(op .. ": mode " .. tostring(o.mode) .. " is not nearest, linear or cubic") end
  if o.mode == "nearest" and not NEAREST[o.nearest_mode] then
    refuse(op .. ": nearest_mode " .. tostring(o.nearest_mode) .. " is not supported")
  end
end

-- Resize: opset 10 (X, scales; asymmetric, nearest rounds down), 11+ (X, roi, scales, sizes), 18+ (axes,
-- antialias, keep_aspect_ratio_policy)
def("Resize", { mode = "nearest", coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -0.75,
  exclude_outside = 0, extrapolation_value = 0.0, nearest_mode = "round_prefer_floor", antialias = 0, axes = false,
  keep_aspect_ratio_policy = "stretch" }, function(ins, at, _, opset)
  local x = T(ins[1])
  local o = {}
  for k, v in pairs(at) do o[k] = v end
  o.antialias = at.antialias ~= 0
  local scales, sizes, roi
  if opset < 11 then
    o.coordinate_transformation_mode, o.nearest_mode = "asymmetric", "floor"
    scales = optional_list(ins[2], "Resize's scales")
  else
    roi = optional_list(ins[2], "Resize's roi")
    scales = optional_list(ins[3], "Resize's scales")
    sizes = optional_list(ins[4], "Resize's sizes")
    if scales and sizes then refuse("Resize: only one of scales and sizes may be given") end
  end
  if o.coordinate_transformation_mode ~= "tf_crop_and_resize" then roi = nil end
  if o.antialias and o.mode == "nearest" then o.antialias = false end -- ONNX: antialias applies to linear, cubic
  check_mode(o, "Resize")
  return resize(x, o, scales, sizes, roi, at.axes and #at.axes > 0 and at.axes or nil)
end)

-- Upsample (opsets 7 to 9): scales as an attribute (7) or input (9); asymmetric coordinates, nearest rounds down
def("Upsample", { mode = "nearest", scales = false, height_scale = false, width_scale = false }, function(ins, at)
  if at.height_scale or at.width_scale then
    refuse("Upsample: the opset-1 height_scale/width_scale form is not supported")
  end
  local o = { mode = at.mode, coordinate_transformation_mode = "asymmetric", nearest_mode = "floor",
    exclude_outside = 0, cubic_coeff_a = -0.75, extrapolation_value = 0 }
  check_mode(o, "Upsample")
  if o.mode == "cubic" then refuse("Upsample: mode cubic is not an Upsample mode") end
  local scales = ins[2] and optional_list(ins[2], "Upsample's scales") or at.scales
  return resize(T(ins[1]), o, scales, nil, nil, nil)
end)

return OPS
