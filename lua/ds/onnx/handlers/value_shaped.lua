-- onnx/handlers/value_shaped.lua: ONNX import handlers of ops whose output shape depends on input values
-- (NonZero, Compress, Unique, NonMaxSuppression), computed at import time from values known then: constants, or graph inputs the
-- importer specializes the model on (onnx/specialized.lua). A value computed inside the graph is refused: a ds
-- graph's shapes cannot depend on the values it computes.
local F = require("ds.ops")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T = V.tensor
local rank, axis0, refuse = common.rank, common.axis0, common.refuse

-- the Lua data of v, which must be known: its values decide the output's shape
local function values_of(v, op, what)
  return V.ints(v, op .. "'s " .. what .. " (its values decide the output's shape, so they must be known when " ..
    "the graph is built: a constant or a graph input, not a value computed in the graph)")
end

local function index_tensor(list) -- 1-based positions -> a 1-D i64 tensor (possibly empty)
  if #list == 0 then return F.zeros({ 0 }, { dtype = "i64" }) end
  return F.tensor(list, { dtype = "i64" })
end

-- NonZero: x (d1, ..., dr) -> int64 (r, n): the 0-based coordinates of the n non-zero elements, row-major
def("NonZero", {}, function(ins)
  local data, shape = values_of(ins[1], "NonZero", "input"), ins[1].shape
  if #shape == 0 then refuse("NonZero: the input must have at least one dim") end
  local coords = {} -- coords[j] = the j-th coordinate of each non-zero element
  for j = 1, #shape do coords[j] = {} end
  for i, x in ipairs(data) do
    if x ~= 0 then
      local p = i - 1
      for j = #shape, 1, -1 do
        table.insert(coords[j], p % shape[j])
        p = math.floor(p / shape[j])
      end
    end
  end
  local out, n = {}, #coords[1]
  for j = 1, #shape do for k = 1, n do out[#out + 1] = coords[j][k] end end
  return V.const("i64", { #shape, n }, out)
end)

-- Compress: the slices of x along axis (of x flattened without one) where condition (1-D bool) is true
def("Compress", { axis = false }, function(ins, at)
  local cond = values_of(ins[2], "Compress", "condition")
  local x = T(ins[1])
  local d = 1
  if at.axis then d = axis0(at.axis, rank(x), "Compress") + 1 else x = x:reshape(-1) end
  local n = x.shape[d]
  local keep = {}
  for i, c in ipairs(cond) do
    if c ~= 0 then
      if type(n) == "number" and i > n then
        refuse(string.format("Compress: condition selects entry %d of a dim of size %d", i, n))
      end
      keep[#keep + 1] = i
    end
  end
  return F.index_select(x, d, index_tensor(keep))
end)

-- true when the list a sorts before the list b (element by element)
local function before(a, b)
  for i = 1, #a do if a[i] ~= b[i] then return a[i] < b[i] end end
  return false
end

-- Unique: the distinct slices of x along axis (elements of x flattened without one), sorted or in order of first
-- occurrence -> Y, indices (first occurrences), inverse_indices (each slice's entry in Y), counts; int64, 0-based
def("Unique", { axis = false, sorted = 1 }, function(ins, at)
  local data, shape = values_of(ins[1], "Unique", "input"), ins[1].shape
  local x = T(ins[1])
  local d, outer, inner, n = 1, 1, 1, #data
  if at.axis then
    d = axis0(at.axis, #shape, "Unique") + 1
    n = shape[d]
    for i = 1, d - 1 do outer = outer * shape[i] end
    for i = d + 1, #shape do inner = inner * shape[i] end
  else
    x = x:reshape(-1)
  end
  local slices, order = {}, {}
  for p = 1, n do
    local s = {}
    for o = 0, outer - 1 do
      for i = 1, inner do s[#s + 1] = data[(o * n + p - 1) * inner + i] end
    end
    slices[p], order[p] = s, p
  end
  table.sort(order, function(p, q)
    if before(slices[p], slices[q]) then return true end
    return not before(slices[q], slices[p]) and p < q
  end)
  local firsts, group_of = {}, {} -- each distinct slice's first position; each position's group (sorted)
  for k, p in ipairs(order) do
    if k == 1 or before(slices[order[k - 1]], slices[p]) then firsts[#firsts + 1] = p end
    group_of[p] = #firsts
  end
  local rank_of = {} -- group (sorted) -> its place in Y
  for g = 1, #firsts do rank_of[g] = g end
  if at.sorted == 0 then
    local by_first = {}
    for g = 1, #firsts do by_first[g] = g end
    table.sort(by_first, function(g, h) return firsts[g] < firsts[h] end)
    local sorted_firsts = {}
    for r, g in ipairs(by_first) do rank_of[g], sorted_firsts[r] = r, firsts[g] end
    firsts = sorted_firsts
  end
  local indices, inverse, counts = {}, {}, {}
  for r, p in ipairs(firsts) do indices[r], counts[r] = p - 1, 0 end
  for p = 1, n do
    local r = rank_of[group_of[p]]
    inverse[p] = r - 1
    counts[r] = counts[r] + 1
  end
  local y = F.index_select(x, d, index_tensor(firsts))
  return y, V.const("i64", { #indices }, indices), V.const("i64", { n }, inverse), V.const("i64", { #counts }, counts)
end)

-- the intersection over union of boxes a and b ({y1, x1, y2, x2} corners in any order, or {xc, yc, w, h})
local function iou(a, b, center)
  local function corners(box)
    if center then
      return box[2] - box[4] / 2, box[1] - box[3] / 2, box[2] + box[4] / 2, box[1] + box[3] / 2
    end
    return math.min(box[1], box[3]), math.min(box[2], box[4]), math.max(box[1], box[3]), math.max(box[2], box[4])
  end
  local ay1, ax1, ay2, ax2 = corners(a)
  local by1, bx1, by2, bx2 = corners(b)
  local area_a, area_b = (ay2 - ay1) * (ax2 - ax1), (by2 - by1) * (bx2 - bx1)
  if area_a <= 0 or area_b <= 0 then return 0 end
  local h = math.max(0, math.min(ay2, by2) - math.max(ay1, by1))
  local w = math.max(0, math.min(ax2, bx2) - math.max(ax1, bx1))
  local inter = h * w
  return inter / (area_a + area_b - inter)
end

-- NonMaxSuppression: boxes (batches, n, 4), scores (batches, classes, n) -> int64 (selected, 3) of
-- {batch, class, box} (0-based): per batch and class, boxes by decreasing score (lower index first on ties)
-- whose score passes score_threshold, each kept unless its IoU with a kept box exceeds iou_threshold, at most
-- max_output_boxes_per_class of them
def("NonMaxSuppression", { center_point_box = 0 }, function(ins, at)
  local boxes = V.data(ins[1], "NonMaxSuppression's boxes (their values decide the output's shape, so they " ..
    "must be known when the graph is built)")
  local scores = V.data(ins[2], "NonMaxSuppression's scores (their values decide the output's shape)")
  local bs, ss = ins[1].shape, ins[2].shape
  if #bs ~= 3 or bs[3] ~= 4 or #ss ~= 3 or ss[1] ~= bs[1] or ss[3] ~= bs[2] then
    refuse("NonMaxSuppression: boxes must be (batches, n, 4) and scores (batches, classes, n)")
  end
  local limit = ins[3] and values_of(ins[3], "NonMaxSuppression", "max_output_boxes_per_class")[1] or 0
  local iou_threshold = ins[4] and V.data(ins[4], "NonMaxSuppression's iou_threshold")[1] or 0
  local score_threshold = ins[5] and V.data(ins[5], "NonMaxSuppression's score_threshold")[1]
  if at.center_point_box ~= 0 and at.center_point_box ~= 1 then
    refuse("NonMaxSuppression: center_point_box must be 0 or 1")
  end
  local batches, n, classes = bs[1], bs[2], ss[2]
  local out = {}
  for b = 0, batches - 1 do
    for c = 0, classes - 1 do
      local order = {}
      for i = 0, n - 1 do
        local sc = scores[(b * classes + c) * n + i + 1]
        if not score_threshold or sc > score_threshold then order[#order + 1] = i end
      end
      table.sort(order, function(i, j)
        local si, sj = scores[(b * classes + c) * n + i + 1], scores[(b * classes + c) * n + j + 1]
        if si ~= sj then return si > sj end
        return i < j
      end)
      local kept = {}
      for _, i in ipairs(order) do
        if #kept >= limit then break end
        local box = { unpack(boxes, (b * n + i) * 4 + 1, (b * n + i) * 4 + 4) }
        local keep = true
        for _, k in ipairs(kept) do
          if iou(box, k.box, at.center_point_box == 1) > iou_threshold then keep = false; break end
        end
        if keep then
          kept[#kept + 1] = { box = box }
          out[#out + 1], out[#out + 2], out[#out + 3] = b, c, i
        end
      end
    end
  end
  return V.const("i64", { #out / 3, 3 }, out)
end)

return OPS
