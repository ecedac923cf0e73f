-- print.lua: tostring(tensor) in PyTorch's style (values, shape, dtype, requires_grad; truncated).
local Tensor = require("ds.tensor")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local options = require("ds.options")

local M = { threshold = 1000, edgeitems = 3, precision = 4, linewidth = 80 }

local function fmt_float(v, prec, sci)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  if sci then return string.format("%." .. prec .. "e", v) end
  return string.format("%." .. prec .. "f", v)
end

-- format every value with one common style (like torch: fixed unless the range is wide)
local function formatter(x, flat)
  local dt = x.dtype
  if dt == "bool" then return function(v) return v ~= 0 and "True" or "False" end end
  if not dtype.is_float[dt] then return function(v) return string.format("%d", v) end end
  local maxa, mina, all_int = 0, math.huge, true
  for _, v in ipairs(flat) do
    if v == v and v ~= math.huge and v ~= -math.huge then
      local a = math.abs(v)
      if a > maxa then maxa = a end
      if a > 0 and a < mina then mina = a end
      if v ~= math.floor(v) then all_int = false end
    end
  end
  local sci = maxa >= 1e8 or (mina < 1e-4 and mina > 0) or (mina ~= math.huge and maxa / mina > 1e8 and mina < 1)
  if all_int and not sci then return function(v) if v ~= v or v == math.huge or v == -math.huge then
    return fmt_float(v) end return string.format("%.0f.", v) end end
  return function(v) return fmt_float(v, M.precision, sci) end
end

-- collect the (possibly summarized) values row-major with "..." markers
local function render(x, fmt, summarize)
  local shape = x._shape
  local nd = #shape
  if nd == 0 then return fmt(x:item()) end
  local flat = x:contiguous():_flat()
  local strides = S.contiguous_strides(shape)
  local function walk(dim, base)
    local n = shape[dim]
    local idx = {}
    if summarize and n > 2 * M.edgeitems then
      for i = 1, M.edgeitems do idx[#idx + 1] = i end
      idx[#idx + 1] = false
      for i = n - M.edgeitems + 1, n do idx[#idx + 1] = i end
    else
      for i = 1, n do idx[i] = i end
    end
    if dim == nd then
      local parts = {}
      for _, i in ipairs(idx) do parts[#parts + 1] = i and fmt(flat[base + i]) or "..." end
      return parts
    end
    local rows = {}
    for _, i in ipairs(idx) do
      rows[#rows + 1] = i and walk(dim + 1, base + (i - 1) * strides[dim]) or "..."
    end
    return rows
  end
  local tree = walk(1, 0)
  local width = 0
  local function measure(t) for _, v in ipairs(t) do if type(v) == "table" then measure(v) else width =
    math.max(width, #v) end end end
  measure(tree)
  local function emit(t, dim, indent)
    if dim == nd then
      local parts = {}
      for _, v in ipairs(t) do parts[#parts + 1] = string.rep(" ", width - #v) .. v end
      return "[" .. table.concat(parts, ", ") .. "]"
    end
    local lines = {}
    for _, v in ipairs(t) do
      lines[#lines + 1] = type(v) == "table" and emit(v, dim + 1, indent .. " ") or "..."
    end
    local sep = "," .. string.rep("\n", nd - dim) .. indent .. " "
    return "[" .. table.concat(lines, sep) .. "]"
  end
  return emit(tree, 1, string.rep(" ", #"tensor("))
end

function M.tostring(x)
  if not x._c then
    return string.format("tensor(<abstract %s%s, dtype=%s>)", rawget(x, "_name") and (x._name .. " ") or "",
      S.str(x._shape), x.dtype)
  end
  local n = x:numel()
  local body
  if n == 0 then body = "[]"
  else
    local summarize = n > M.threshold
    local sample = summarize and x:reshape(-1):narrow(1, 1, math.min(n, 2000)):_flat() or x:_flat()
    body = render(x, formatter(x, sample), summarize)
  end
  local extras = {}
  if #x._shape ~= 1 or n == 0 or n > M.threshold then
    if not (#x._shape == 0) then extras[#extras + 1] = "shape=" .. S.str(x._shape) end
  end
  if x.dtype ~= "f32" then extras[#extras + 1] = "dtype=" .. x.dtype end
  if rawget(x, "_grad_fn") then extras[#extras + 1] = "grad_fn=<" .. x._grad_fn.def.name .. "Backward>"
  elseif rawget(x, "requires_grad") then extras[#extras + 1] = "requires_grad=true" end
  local s = "tensor(" .. body
  if #extras > 0 then s = s .. ", " .. table.concat(extras, ", ") end
  return s .. ")"
end

-- every option an integer in its range, all checked before any is set
local PRINT_OPTIONS = { threshold = { "integer", min = 0 }, edgeitems = { "integer", min = 1, max = 1000 },
                        precision = { "integer", min = 0, max = 30 }, linewidth = { "integer", min = 1 } }
function M.set_printoptions(opts)
  for k, v in pairs(options.check(opts, "set_printoptions", PRINT_OPTIONS)) do M[k] = v end
end

Tensor._define("ds.print", { __tostring = M.tostring })
return M
