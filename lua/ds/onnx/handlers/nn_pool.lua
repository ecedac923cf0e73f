-- onnx/handlers/nn_pool.lua: ONNX import handlers of pooling: MaxPool (with its Indices output), AveragePool,
-- LpPool, their Global forms and MaxUnpool, in 1-D, 2-D and N-D, any dtype the op allows.
--[[ 1-D and 2-D float pools without dilation run ds's max_pool2d / avg_pool2d kernels (1-D on (L, 1) planes),
  on an explicitly padded input when the pads are asymmetric, wider than half the kernel or hang over the end
  (ceil_mode). Other pools (N-D, dilations, integer dtypes) are separable: per spatial dim, the max or sum of
  the kernel's taps gathered with index_select. Averages divide by a divisor computed at import: the window's
  taps inside the input (count_include_pad = 0) or inside the padded input (1). ]]
local F = require("ds.ops")
local NF = require("ds.nn.functional")
local dtype = require("ds.dtype")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")
local G = require("ds.onnx.handlers.nn_geometry")

local OPS, def = common.family()
local REQUIRED, T, refuse, rank = common.REQUIRED, V.tensor, common.refuse, common.rank

local LOWEST = { f32 = -math.huge, f64 = -math.huge, u8 = 0, i32 = -2 ^ 31, i64 = -2 ^ 63 }

local function index(list) return F.tensor(list, { dtype = "i64" }) end
local function ones_of(g, v)
  for i = 1, #g.n do if g.d[i] ~= v then return false end end
  return true
end

-- separable pool of x padded for g: per spatial dim, combine(acc, tap) over the kernel's taps
local function separable(x, g, combine)
  for i = 1, #g.n do
    if type(g.out[i]) ~= "number" then
      refuse("this pool (N-D, dilated or integer) needs known spatial sizes")
    end
    local acc
    for j = 0, g.k[i] - 1 do
      local idx = {}
      for o = 0, g.out[i] - 1 do idx[o + 1] = o * g.s[i] + j * g.d[i] + 1 end
      local tap = F.index_select(x, i + 2, index(idx))
      acc = acc and combine(acc, tap) or tap
    end
    x = acc
  end
  return x
end

-- true when ds's 2-D kernels can run the pool (1-D or 2-D, float, no dilation)
local function kernel_pool(x, g) return #g.n <= 2 and dtype.is_float[x.dtype] and ones_of(g, 1) end
-- x as the 2-D kernels' (N, C, H, W) and the 2-D lists of g (1-D: W = 1), and the function undoing it
local function as_2d(x, g)
  if #g.n == 2 then return x, g.k, g.s, function(y) return y end end
  return x:unsqueeze(-1), { g.k[1], 1 }, { g.s[1], 1 }, function(y) return y:squeeze(-1) end
end
-- the kernels' own padding when it is symmetric and at most half the kernel, else nil
local function kernel_padding(g)
  if not G.symmetric(g) then return nil end
  local p = {}
  for i = 1, #g.n do
    if 2 * g.pb[i] > g.k[i] then return nil end
    p[i] = g.pb[i]
  end
  return #p == 1 and { p[1], 0 } or p
end

-- the sum (or max) of each window of x: kind "max" or "sum"
local function window_reduce(x, g, kind)
  if kernel_pool(x, g) then
    local padding = kernel_padding(g)
    if not padding then x, padding = G.pad(x, g, kind == "max" and -math.huge or 0), { 0, 0 } end
    local x2, k, s, back = as_2d(x, g)
    if kind == "max" then return back(F.max_pool2d(x2, k, { stride = s, padding = padding })) end
    local n = k[1] * k[2]
    return back(F.avg_pool2d(x2, k, { stride = s, padding = padding, count_include_pad = true }) * n)
  end
  x = G.pad(x, g, kind == "max" and LOWEST[x.dtype] or 0)
  return separable(x, g, kind == "max" and F.maximum or F.add)
end

-- the number of taps each window counts, as a tensor (out1, ..., outk) of x's dtype, or a number when equal
local function divisor(g, include_pad, dt)
  for i = 1, #g.n do
    if type(g.n[i]) ~= "number" then refuse("AveragePool: these pads need known spatial sizes") end
  end
  local per, all_same, total = {}, true, 1
  for i = 1, #g.n do
    per[i] = {}
    for o = 0, g.out[i] - 1 do
      local c = 0
      for j = 0, g.k[i] - 1 do
        local p = o * g.s[i] + j * g.d[i] - g.pb[i]
        local lo, hi = 0, g.n[i]
        if include_pad then lo, hi = -g.pb[i], g.n[i] + g.pe[i] end
        if p >= lo and p < hi then c = c + 1 end
      end
      per[i][o + 1] = c
      if c ~= per[i][1] then all_same = false end
    end
    total = total * per[i][1]
  end
  if all_same then return total end
  local div
  for i = 1, #g.n do
    local shape = {}
    for j = 1, #g.n do shape[j] = j == i and g.out[i] or 1 end
    local t = F.tensor(per[i], { dtype = dt }):reshape(shape)
    div = div and div * t or t
  end
  return div
end

local POOL_ATTRS = { auto_pad = "NOTSET", ceil_mode = 0, dilations = false, kernel_shape = REQUIRED, pads = false,
  strides = false }
local function pool_geometry(x, at, op, dynamic)
  local n = G.spatial_sizes(x, op, dynamic)
  if #at.kernel_shape ~= #n then
    refuse(string.format("%s: kernel_shape has %d dims, the input %d spatial dims", op, #at.kernel_shape, #n))
  end
  return G.geometry(at, n, at.kernel_shape, op)
end

local function with(base, extra)
  local t = {}
  for k, v in pairs(base) do t[k] = v end
  for k, v in pairs(extra) do t[k] = v end
  return t
end

--[[ MaxPool's Indices: ONNX's flat index into the whole input (N, C, H, W), row-major (storage_order 0) or
  with H and W swapped (1), from the 1-based per-plane index ds's kernel gives in the (padded) plane ]]
local function onnx_indices(plane_idx, x, g, padded, storage_order)
  local s = x.shape
  if type(s[1]) ~= "number" then refuse("MaxPool: the Indices output needs a static batch size") end
  local h, w = g.n[1], g.n[2] or 1
  local hp, wp = h, w
  if padded then hp, wp = h + g.pb[1] + g.pe[1] + g.extra[1], #g.n == 2 and w + g.pb[2] + g.pe[2] + g.extra[2] or 1 end
  local i = plane_idx - 1
  local r, c = F.floor_divide(i, wp), F.remainder(i, wp)
  if padded then r, c = r - g.pb[1], c - (#g.n == 2 and g.pb[2] or 0) end
  local flat = storage_order == 0 and r * w + c or c * h + r
  local planes = F.arange(s[1] * s[2], { dtype = "i64" }):reshape(s[1], s[2], 1, 1) * (h * w)
  return flat + planes
end

def("MaxPool", with(POOL_ATTRS, { storage_order = 0 }), function(ins, at, node)
  local x = T(ins[1])
  local want_indices = (node.output[2] or "") ~= ""
  local g = pool_geometry(x, at, "MaxPool", not want_indices)
  if not want_indices then return window_reduce(x, g, "max") end
  if not kernel_pool(x, g) then
    refuse("MaxPool: the Indices output is supported for 1-D and 2-D float pools without dilation")
  end
  if at.storage_order ~= 0 and #g.n ~= 2 then refuse("MaxPool: storage_order 1 needs a 2-D pool") end
  local padding = kernel_padding(g)
  local xp = x
  if not padding then xp, padding = G.pad(x, g, -math.huge), { 0, 0 } end
  local x2, k, s, back = as_2d(xp, g)
  local y, idx = F.max_pool2d(x2, k, { stride = s, padding = padding, return_indices = true })
  return back(y), back(onnx_indices(idx, x, g, xp ~= x, at.storage_order))
end)

def("AveragePool", with(POOL_ATTRS, { count_include_pad = 0 }), function(ins, at)
  local x = T(ins[1])
  if not dtype.is_float[x.dtype] then refuse("AveragePool: the input must be a float tensor") end
  local g = pool_geometry(x, at, "AveragePool", true)
  local include = at.count_include_pad ~= 0
  local padding = kernel_pool(x, g) and kernel_padding(g)
  if padding then
    local x2, k, s, back = as_2d(x, g)
    return back(F.avg_pool2d(x2, k, { stride = s, padding = padding, count_include_pad = include }))
  end
  return window_reduce(x, g, "sum") / divisor(g, include, x.dtype)
end)

-- |x|^p for an integer p >= 1, and its inverse
local function abs_pow(x, p)
  if p == 1 then return F.abs(x) end
  if p == 2 then return x * x end
  return F.pow(F.abs(x), p)
end
local function root(y, p)
  if p == 1 then return y end
  if p == 2 then return F.sqrt(y) end
  return F.pow(y, 1 / p)
end
def("LpPool", with(POOL_ATTRS, { p = 2 }), function(ins, at)
  local x = T(ins[1])
  if not dtype.is_float[x.dtype] then refuse("LpPool: the input must be a float tensor") end
  local g = pool_geometry(x, at, "LpPool")
  return root(window_reduce(abs_pow(x, at.p), g, "sum"), at.p)
end)

local function spatial_dims(x)
  local dims = {}
  for d = 3, rank(x) do dims[#dims + 1] = d end
  return dims
end
def("GlobalAveragePool", {}, function(ins)
  local x = T(ins[1])
  return x:mean(spatial_dims(x), true)
end)
def("GlobalMaxPool", {}, function(ins)
  local x = T(ins[1])
  return x:amax(spatial_dims(x), true)
end)
def("GlobalLpPool", { p = 2 }, function(ins, at)
  local x = T(ins[1])
  return root(abs_pow(x, at.p):sum(spatial_dims(x), true), at.p)
end)

--[[ MaxUnpool: x (N, C, S...) scattered into zeros of the unpooled shape ((S - 1) stride + kernel - pads) at
  the flat indices I (MaxPool's); a larger output_shape pads that with zeros at the end of each dim (ONNX's
  reference) ]]
def("MaxUnpool", { kernel_shape = REQUIRED, pads = false, strides = false }, function(ins, at)
  local x, idx = T(ins[1]), T(ins[2])
  local n = G.spatial_sizes(x, "MaxUnpool")
  local g = G.geometry({ pads = at.pads, strides = at.strides }, n, at.kernel_shape, "MaxUnpool")
  local shape, total = { x.shape[1], x.shape[2] }, x.shape[1] * x.shape[2]
  if type(total) ~= "number" then refuse("MaxUnpool: the batch and channel sizes must be static") end
  for i = 1, #n do
    shape[i + 2] = (n[i] - 1) * g.s[i] + at.kernel_shape[i] - g.pb[i] - g.pe[i]
    total = total * shape[i + 2]
  end
  local y = F.scatter_add(F.zeros({ total }, { dtype = x.dtype }), 1, idx:reshape(-1) + 1, x:reshape(-1)):reshape(shape)
  if not ins[3] then return y end
  local want = V.ints(ins[3], "MaxUnpool's output_shape")
  if #want ~= #shape then refuse("MaxUnpool: output_shape must have " .. #shape .. " dims") end
  local pad = {}
  for i = #n, 1, -1 do
    if want[i + 2] < shape[i + 2] then refuse("MaxUnpool: output_shape is smaller than the unpooled shape") end
    pad[#pad + 1], pad[#pad + 2] = 0, want[i + 2] - shape[i + 2]
  end
  return NF.pad(y, pad, "constant", 0)
end)

return OPS
