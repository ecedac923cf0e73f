-- onnx/handlers/nn_geometry.lua: the spatial geometry of ONNX's convolutions and pools (kernel, strides,
-- dilations, begin/end pads from pads or auto_pad, output sizes with ceil_mode) and explicit padding.
--[[ A geometry g describes the k spatial dims of an (N, C, S1..Sk) input, each list 1..k:
  g.k kernel, g.s strides, g.d dilations, g.pb / g.pe pads before / after, g.n input sizes, g.out output sizes,
  g.extra the end padding a ceil_mode window hangs over (beyond pe). A dynamic input size (a symbolic dim)
  is allowed where the pads do not depend on it (dynamic_dim); its output size may then be unknown (nil). ]]
local NF = require("ds.nn.functional")
local V = require("ds.onnx.import_values")
local sym = require("ds.sym")
local common = require("ds.onnx.handlers.common")

local refuse = common.refuse
local M = {}

-- attrs[name] as a list of k positive integers (default all `default`); refuses a wrong length
local function per_dim(list, k, default, what, op)
  if not list or #list == 0 then
    local t = {}
    for i = 1, k do t[i] = default end
    return t
  end
  if #list ~= k then refuse(string.format("%s: %s has %d values for %d spatial dims", op, what, #list, k)) end
  return list
end
M.per_dim = per_dim

-- the spatial sizes of x (N, C, S1..Sk); dynamic ones (symbolic dims) only where `dynamic` allows them
function M.spatial_sizes(x, op, dynamic)
  local s, n = V.shape(x), {}
  if #s < 3 then refuse(op .. ": input must be (N, C, spatial...), got rank " .. #s) end
  for i = 3, #s do
    if type(s[i]) ~= "number" and not dynamic then
      refuse(op .. ": spatial dim " .. (i - 2) .. " must have a known size")
    end
    n[i - 2] = s[i]
  end
  return n
end

-- the dilated extent of kernel dim i
function M.extent(g, i) return (g.k[i] - 1) * g.d[i] + 1 end

-- dim i of g over a dynamic input size n (a symbolic dim): pads that do not depend on n (explicit pads, VALID,
-- SAME at stride 1), no ceil_mode; the output size is symbolic (a floor symbol at strides > 1)
local function dynamic_dim(g, i, e, auto_pad, pads, ceil, op)
  local function unsupported(why)
    refuse(op .. ": spatial dim " .. i .. " is dynamic (" .. tostring(g.n[i]) .. "): " .. why)
  end
  if ceil then unsupported("ceil_mode needs a known size") end
  if auto_pad == "SAME_UPPER" or auto_pad == "SAME_LOWER" then
    if g.s[i] ~= 1 then unsupported("SAME padding at stride > 1 needs a known size") end
    local total = e - 1
    g.pb[i] = auto_pad == "SAME_UPPER" and math.floor(total / 2) or total - math.floor(total / 2)
    g.pe[i] = total - g.pb[i]
  elseif auto_pad == "VALID" or auto_pad == "NOTSET" then
    g.pb[i] = auto_pad == "NOTSET" and pads and pads[i] or 0
    g.pe[i] = auto_pad == "NOTSET" and pads and pads[i + #g.n] or 0
    if g.pb[i] < 0 or g.pe[i] < 0 then refuse(op .. ": negative pads are not supported") end
  else
    refuse(op .. ": auto_pad " .. tostring(auto_pad) .. " is not an ONNX auto_pad")
  end
  g.extra[i] = 0
  g.out[i] = sym.add(sym.floordiv(sym.add(g.n[i], g.pb[i] + g.pe[i] - e), g.s[i]), 1)
end

--[[ at: the node's attributes (auto_pad, pads, strides, dilations, ceil_mode); n: input sizes; kernel: list;
  -> geometry. Conv (ceil false) and pools share ONNX's rules: SAME_UPPER / SAME_LOWER give out = ceil(n / s)
  with the odd pad after / before; VALID no pads; NOTSET the pads attribute. With ceil_mode the last window
  may hang over the end, but must start inside the input or its begin pad (PyTorch's and ONNX's later rule). ]]
function M.geometry(at, n, kernel, op)
  local k = #n
  local g = { n = n, k = kernel, s = per_dim(at.strides, k, 1, "strides", op),
    d = per_dim(at.dilations, k, 1, "dilations", op), pb = {}, pe = {}, out = {}, extra = {} }
  for i = 1, k do
    if g.s[i] < 1 or g.d[i] < 1 or g.k[i] < 1 then
      refuse(op .. ": kernel sizes, strides and dilations must be >= 1")
    end
  end
  local auto_pad = at.auto_pad or "NOTSET"
  local ceil = (at.ceil_mode or 0) ~= 0
  local pads = at.pads and #at.pads > 0 and at.pads
  if pads and #pads ~= 2 * k then refuse(string.format("%s: pads has %d values for %d spatial dims", op, #pads, k)) end
  for i = 1, k do
    local e = M.extent(g, i)
    if type(n[i]) ~= "number" then
      dynamic_dim(g, i, e, auto_pad, pads, ceil, op)
    elseif auto_pad == "SAME_UPPER" or auto_pad == "SAME_LOWER" then
      g.out[i] = math.ceil(n[i] / g.s[i])
      local total = math.max((g.out[i] - 1) * g.s[i] + e - n[i], 0)
      local small = math.floor(total / 2)
      g.pb[i] = auto_pad == "SAME_UPPER" and small or total - small
      g.pe[i] = total - g.pb[i]
    elseif auto_pad == "VALID" or auto_pad == "NOTSET" then
      g.pb[i] = auto_pad == "NOTSET" and pads and pads[i] or 0
      g.pe[i] = auto_pad == "NOTSET" and pads and pads[i + k] or 0
      if g.pb[i] < 0 or g.pe[i] < 0 then refuse(op .. ": negative pads are not supported") end
      local span = n[i] + g.pb[i] + g.pe[i] - e
      if span < 0 then
        refuse(string.format("%s: kernel extent %d is larger than the padded input %d", op, e,
          n[i] + g.pb[i] + g.pe[i]))
      end
      g.out[i] = (ceil and math.ceil(span / g.s[i]) or math.floor(span / g.s[i])) + 1
      if ceil and (g.out[i] - 1) * g.s[i] >= n[i] + g.pb[i] then g.out[i] = g.out[i] - 1 end
    else
      refuse(op .. ": auto_pad " .. tostring(auto_pad) .. " is not an ONNX auto_pad")
    end
    if type(n[i]) == "number" then
      g.extra[i] = math.max((g.out[i] - 1) * g.s[i] + e - (n[i] + g.pb[i] + g.pe[i]), 0)
    end
  end
  return g
end

-- true when every dim has pb == pe and no ceil overhang
function M.symmetric(g)
  for i = 1, #g.n do
    if g.pb[i] ~= g.pe[i] or g.extra[i] ~= 0 then return false end
  end
  return true
end

-- x (N, C, S1..Sk) padded with value: pb before and pe + extra after each spatial dim
function M.pad(x, g, value)
  local p, any = {}, false
  for i = #g.n, 1, -1 do -- ds.nn.functional.pad takes the last dim first
    local after = g.pe[i] + (g.extra[i] or 0)
    p[#p + 1], p[#p + 2] = g.pb[i], after
    if g.pb[i] ~= 0 or after ~= 0 then any = true end
  end
  if not any then return x end
  return NF.pad(x, p, "constant", value)
end

return M
