-- onnx/handlers/shape.lua: ONNX import handlers of shape and movement ops (Shape, Reshape, Slice, Concat, Pad,
-- ...), folded on consts so shape computations keep symbolic dims.
local F = require("ds.ops")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")
local NF = require("ds.nn.functional")

local OPS, def = common.family()
local REQUIRED, T, is_const = common.REQUIRED, V.tensor, V.is_const
local dim, rank, axis0, refuse, all_const = common.dim, common.rank, common.axis0, common.refuse, common.all_const

-- Pad: pads = {x1_begin, x2_begin, ..., x1_end, x2_end} over all axes (or over `axes`, opset 18); an
-- attribute before opset 11; negative pads crop. Modes: constant, reflect, edge (ds's replicate), wrap
-- (circular) through F.pad, which takes PyTorch's order (last dim first, {left, right} each).
local PAD_MODE = { constant = "constant", reflect = "reflect", edge = "replicate", wrap = "circular" }
def("Pad", { mode = "constant", pads = false, value = false }, function(ins, at)
  local mode = PAD_MODE[at.mode] or refuse("Pad: mode " .. tostring(at.mode) .. " is not supported")
  local x = T(ins[1])
  local r = rank(x)
  local p = ins[2] and V.ints(ins[2], "Pad's pads") or at.pads or refuse("Pad needs pads")
  local value = at.value or 0
  if ins[3] then value = V.data(ins[3], "Pad's constant_value")[1] or 0 end
  local axes = {}
  if ins[4] then
    for i, a in ipairs(V.ints(ins[4], "Pad's axes")) do axes[i] = axis0(a, r, "Pad") end
  else
    for i = 1, r do axes[i] = i - 1 end
  end
  if #p ~= 2 * #axes then refuse(string.format("Pad: %d pads for %d axes (2 per axis)", #p, #axes)) end
  local before, after = {}, {}
  for i, a in ipairs(axes) do before[a + 1], after[a + 1] = p[i], p[i + #axes] end
  for d = 1, r do -- negative pads crop first (ONNX slices, then pads)
    local b, e = before[d] or 0, after[d] or 0
    if b < 0 or e < 0 then
      local n = x.shape[d]
      local from, to = math.max(-b, 0), sym.sub(n, math.max(-e, 0))
      x = x:narrow(d, from + 1, sym.sub(to, from))
      before[d], after[d] = math.max(b, 0), math.max(e, 0)
    end
  end
  local torch_pads = {}
  for d = r, 1, -1 do
    torch_pads[#torch_pads + 1] = before[d] or 0
    torch_pads[#torch_pads + 1] = after[d] or 0
  end
  return NF.pad(x, torch_pads, mode, mode == "constant" and value or nil)
end)
-- ---- shapes ----
def("Shape", { start = 0, ["end"] = false }, function(ins, at)
  local s = V.shape(ins[1])
  local r = #s
  -- start and end are clamped to [0, r] (negative from the end), as ONNX says
  local function clamp(a) if a < 0 then a = a + r end; return math.min(math.max(a, 0), r) end
  local from = clamp(at.start)
  local to = at["end"] and clamp(at["end"]) or r
  local out = {}
  for i = math.max(from, 0) + 1, math.min(to, r) do out[#out + 1] = s[i] end
  return V.const("i64", { #out }, out)
end)
def("Size", {}, function(ins)
  local n = 1
  for _, d in ipairs(V.shape(ins[1])) do n = sym.mul(n, d) end
  return V.const("i64", {}, { n })
end)
def("Constant", { value = false, value_float = false, value_floats = false, value_int = false, value_ints = false,
  sparse_value = false, value_string = false, value_strings = false }, function(_, at)
  if at.value then return V.tensor_of(at.value, "Constant's value") end
  if at.value_float then return V.const("f32", {}, { at.value_float }) end
  if at.value_int then return V.const("i64", {}, { at.value_int }) end
  if at.value_floats then return V.const("f32", { #at.value_floats }, at.value_floats) end
  if at.value_ints then return V.const("i64", { #at.value_ints }, at.value_ints) end
  refuse("Constant: only tensor, float(s) and int(s) values are supported")
end)
def("ConstantOfShape", { value = false }, function(ins, at)
  local shape = V.data(ins[1], "ConstantOfShape's shape")
  local c = at.value and V.tensor_of(at.value, "ConstantOfShape's value")
    or V.const("f32", { 1 }, { 0 })
  local v = V.data(c)[1]
  local n, static = 1, true
  for _, d in ipairs(shape) do if type(d) == "number" then n = n * d else static = false end end
  if static and n <= V.FOLD_LIMIT then
    local data = {}
    for i = 1, n do data[i] = v end
    return V.const(c.dtype, shape, data)
  end
  return F.full(shape, v, { dtype = c.dtype })
end)
def("Reshape", { allowzero = 0 }, function(ins, at)
  local x = ins[1]
  local target = V.data(ins[2], "Reshape's shape")
  local s = V.shape(x)
  local shape = {}
  for i, d in ipairs(target) do
    if d == 0 and at.allowzero == 0 then shape[i] = s[i] else shape[i] = d end
  end
  if is_const(x) and x.data then
    local n, known = 1, {}
    for i, d in ipairs(shape) do if d ~= -1 then n = sym.mul(n, d) end; known[i] = d end
    for i, d in ipairs(known) do if d == -1 then known[i] = #x.data / n end end
    return V.const(x.dtype, known, x.data)
  end
  return T(x):reshape(shape)
end)
def("Flatten", { axis = 1 }, function(ins, at)
  local x = T(ins[1])
  local r = rank(x)
  local a = at.axis == r and r or axis0(at.axis, r, "Flatten") -- axis in [-r, r]
  if a == 0 then return x:reshape(1, -1) end
  if a == r then return x:reshape(-1, 1) end
  local lead = 1
  for d = 1, a do lead = sym.mul(lead, x.shape[d]) end
  return x:reshape(lead, -1)
end)
def("Transpose", { perm = false }, function(ins, at)
  local x = T(ins[1])
  local perm = {}
  local r = rank(x)
  if at.perm and #at.perm > 0 then for i, p in ipairs(at.perm) do perm[i] = p + 1 end
  else for i = 1, r do perm[i] = r - i + 1 end end
  return x:permute(unpack(perm))
end)
local function axes_input(ins, at, op)
  if ins[2] ~= nil then return V.ints(ins[2], op .. "'s axes") end
  return at.axes
end
def("Unsqueeze", { axes = false }, function(ins, at)
  local x = ins[1]
  local axes = axes_input(ins, at, "Unsqueeze") or refuse("Unsqueeze needs axes")
  local r = #V.shape(x) + #axes
  local sorted = {}
  for i, a in ipairs(axes) do sorted[i] = axis0(a, r) end
  table.sort(sorted)
  if is_const(x) and x.data then
    local s = {}
    for i, d in ipairs(x.shape) do s[i] = d end
    for _, a in ipairs(sorted) do table.insert(s, a + 1, 1) end
    return V.const(x.dtype, s, x.data)
  end
  local t = T(x)
  for _, a in ipairs(sorted) do t = t:unsqueeze(a + 1) end
  return t
end)
def("Squeeze", { axes = false }, function(ins, at)
  local x = ins[1]
  local s = V.shape(x)
  local axes = axes_input(ins, at, "Squeeze")
  local drop = {}
  if axes then for _, a in ipairs(axes) do drop[axis0(a, #s) + 1] = true end
  else for i, d in ipairs(s) do if d == 1 then drop[i] = true end end end
  local shape = {}
  for i, d in ipairs(s) do
    if drop[i] then if d ~= 1 then refuse("Squeeze: dim " .. i .. " has size " .. tostring(d) .. ", not 1") end
    else shape[#shape + 1] = d end
  end
  if is_const(x) and x.data then return V.const(x.dtype, shape, x.data) end
  return T(x):reshape(shape)
end)
def("Concat", { axis = REQUIRED }, function(ins, at)
  local list = {}
  for k = 1, table.maxn(ins) do if ins[k] ~= nil then list[#list + 1] = ins[k] end end
  axis0(at.axis, #V.shape(list[1]), "Concat")
  if all_const(list) and #V.shape(list[1]) == 1 then
    local out = {}
    for _, c in ipairs(list) do for _, v in ipairs(c.data) do out[#out + 1] = v end end
    return V.const(list[1].dtype, { #out }, out)
  end
  local ts = {}
  for i, v in ipairs(list) do ts[i] = T(v) end
  return F.cat(ts, dim(at.axis))
end)
def("Expand", {}, function(ins)
  local x = T(ins[1])
  local target = V.data(ins[2], "Expand's shape")
  local s = x.shape
  local r = math.max(#s, #target)
  local out = {}
  for i = 1, r do
    local a = s[i - (r - #s)] or 1
    local b = target[i - (r - #target)] or 1
    out[i] = b == 1 and a or b
  end
  if #s < r then
    local view = {}
    for i = 1, r - #s do view[i] = 1 end
    for i = 1, #s do view[#view + 1] = s[i] end
    x = x:reshape(view)
  end
  return x:expand(out)
end)
def("Range", {}, function(ins)
  local start, limit, delta = V.data(ins[1], "Range's start")[1], V.data(ins[2], "Range's limit")[1],
    V.data(ins[3], "Range's delta")[1]
  local dt = ins[1].dtype
  if not sym.is(limit) then return F.arange(start, limit, delta, { dtype = dt }) end
  -- a dynamic length: start + i * delta as a running sum of delta (exact for integers)
  if dtype.is_float[dt] or type(start) ~= "number" or type(delta) ~= "number" then
    refuse("Range: a dynamic limit is supported for integer ranges only")
  end
  local count = sym.div(sym.sub(limit, start), delta, "Range")
  return F.full({ count }, delta, { dtype = dt }):cumsum(1) + (start - delta)
end)

-- Slice: consts fold; tensors narrow each axis (step 1, symbolic bounds allowed) or gather the positions
-- start, start + step, ... (other steps, static dims). ONNX clamps: negative bounds count from the end, then
-- starts and ends clamp to [0, n] (step > 0) or start to [0, n - 1] and end to [-1, n - 1] (step < 0).
local function from_end(i, n)
  if type(i) == "number" and i < 0 then return type(n) == "number" and i + n or sym.add(n, i) end
  return i
end
local function clamp(i, lo, hi)
  if type(i) ~= "number" then return i end
  if type(hi) == "number" and i > hi then i = hi end
  return math.max(i, lo)
end
def("Slice", { starts = false, ends = false, axes = false }, function(ins, at)
  local x = ins[1]
  local starts = ins[2] and V.data(ins[2], "Slice's starts") or at.starts or refuse("Slice needs starts")
  local ends = ins[3] and V.data(ins[3], "Slice's ends") or at.ends or refuse("Slice needs ends")
  local axes = ins[4] and V.ints(ins[4], "Slice's axes") or at.axes
  local steps = ins[5] and V.ints(ins[5], "Slice's steps") or {}
  local s = V.shape(x)
  if not axes or #axes == 0 then axes = {}; for i = 1, #starts do axes[i] = i - 1 end end
  if #starts ~= #axes or #ends ~= #axes or (#steps > 0 and #steps ~= #axes) then
    refuse("Slice: starts, ends, axes and steps must have the same length")
  end
  local t = (is_const(x) and x.data and #s == 1) and x or T(x)
  for i, a in ipairs(axes) do
    local d = axis0(a, #s, "Slice") + 1
    local n, step = s[d], steps[i] or 1
    if step == 0 then refuse("Slice: step 0 on axis " .. a) end
    local b, e = from_end(starts[i], n), from_end(ends[i], n)
    if step > 0 then
      b, e = clamp(b, 0, n), clamp(e, 0, n)
    else
      b, e = clamp(b, 0, type(n) == "number" and n - 1 or n), clamp(e, -1, type(n) == "number" and n - 1 or n)
    end
    if step == 1 and not is_const(t) then
      if type(b) == "number" and type(e) == "number" and e < b then e = b end
      t = t:narrow(d, sym.add(b, 1), sym.sub(e, b))
    else
      if type(b) ~= "number" or type(e) ~= "number" then
        refuse("Slice: step " .. step .. " over the dynamic dim " .. tostring(n) .. " is not supported")
      end
      local idx = {}
      for k = b, e + (step > 0 and -1 or 1), step do idx[#idx + 1] = k end
      if is_const(t) then
        local out = {}
        for k, j in ipairs(idx) do out[k] = t.data[j + 1] end
        t = V.const(t.dtype, { #out }, out)
      elseif #idx == 0 then
        t = t:narrow(d, 1, 0)
      else
        for k, j in ipairs(idx) do idx[k] = j + 1 end
        t = F.index_select(t, d, F.tensor(idx, { dtype = "i64" }))
      end
    end
  end
  return t
end)
def("Split", { axis = 0, split = false, num_outputs = false }, function(ins, at, node)
  local x = T(ins[1])
  local d = axis0(at.axis, rank(x)) + 1
  local sizes = ins[2] and V.ints(ins[2], "Split's split") or (at.split and #at.split > 0 and at.split)
  local nout = #node.output
  if not sizes then
    local n = x.shape[d]
    if type(n) ~= "number" or n % nout ~= 0 then
      refuse("Split: dim " .. tostring(n) .. " does not split evenly in " .. nout)
    end
    sizes = {}
    for i = 1, nout do sizes[i] = n / nout end
  end
  local outs, at_ = {}, 1
  for i, n in ipairs(sizes) do outs[i] = x:narrow(d, at_, n); at_ = at_ + n end
  return unpack(outs)
end)

return OPS
