-- onnx/handlers/index.lua: ONNX import handlers of indexing ops (Gather*, Scatter*, OneHot, Trilu, EyeLike,
-- ReverseSequence, Tile, Einsum), with ONNX's 0-based indices (negative from the end) made 1-based.
local F = require("ds.ops")
local sym = require("ds.sym")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local REQUIRED, T, is_const = common.REQUIRED, V.tensor, V.is_const
local dim, rank, axis0, refuse = common.dim, common.rank, common.axis0, common.refuse

-- runtime 0-based indices (negative from the end) into a dim of size n -> 1-based i64
local function one_based(ix, n)
  if ix.dtype ~= "i64" then ix = ix:astype("i64") end
  return F.where(ix:lt(0), ix + sym.add(n, 1), ix + 1)
end

-- the product of a list of dims (numbers or symbolic)
local function numel(dims, from, to)
  local n = 1
  for i = from, to do n = sym.mul(n, dims[i]) end
  return n
end

-- Gather: x (a..., n, b...), indices (i...) -> (a..., i..., b...)
def("Gather", { axis = 0 }, function(ins, at)
  local x, ix = ins[1], ins[2]
  local s = V.shape(x)
  local a = axis0(at.axis, #s) + 1
  if is_const(x) and x.data and #s == 1 and is_const(ix) and ix.data then
    local out = {}
    for i, k in ipairs(ix.data) do
      if type(k) ~= "number" then refuse("Gather: a dynamic index") end
      local j = k < 0 and k + #x.data or k
      if j < 0 or j >= #x.data then refuse("Gather: index " .. k .. " out of range for " .. #x.data .. " values") end
      out[i] = x.data[j + 1]
    end
    return V.const(x.dtype, ix.shape, out)
  end
  local t = T(x)
  if is_const(ix) and ix.data and #ix.shape == 0 then
    local k = ix.data[1]
    return t:select(a, k < 0 and k or k + 1)
  end
  local it = T(ix)
  local g = F.index_select(t, a, one_based(it:reshape(-1), s[a]))
  local shape = {}
  for i = 1, a - 1 do shape[#shape + 1] = s[i] end
  for _, d in ipairs(it.shape) do shape[#shape + 1] = d end
  for i = a + 1, #s do shape[#shape + 1] = s[i] end
  return g:reshape(shape)
end)

-- GatherElements: out[i][j] = x[indices[i][j]][j] (axis 0); out has the indices' shape
def("GatherElements", { axis = 0 }, function(ins, at)
  local x, ix = T(ins[1]), T(ins[2])
  local a = axis0(at.axis, rank(x), "GatherElements") + 1
  return F.gather(x, a, one_based(ix, x.shape[a]))
end)

-- the row-major positions (B, M) of indices (b..., m..., k) in the k dims of data after its b batch dims
local function linear_positions(data_shape, ix, b, op)
  local k = ix.shape[#ix.shape]
  if type(k) ~= "number" then refuse(op .. ": the last dim of the indices must be static") end
  if b + k > #data_shape then
    refuse(string.format("%s: indices address %d dims after %d batch dims of a rank-%d input", op, k, b, #data_shape))
  end
  if ix.dtype ~= "i64" then ix = ix:astype("i64") end
  local pos = F.zeros({}, { dtype = "i64" })
  for j = 1, k do
    local n = data_shape[b + j]
    local i = ix:select(-1, j)
    pos = pos * n + F.where(i:lt(0), i + n, i)
  end
  return pos:reshape(numel(ix.shape, 1, b), -1), k
end

-- GatherND: data (b..., k dims, r...), indices (b..., m..., k) -> (b..., m..., r...)
def("GatherND", { batch_dims = 0 }, function(ins, at)
  local x, ix = T(ins[1]), T(ins[2])
  local b, s = at.batch_dims, x.shape
  if b < 0 or b >= math.min(#s, #ix.shape) then refuse("GatherND: batch_dims " .. b .. " is out of range") end
  local pos, k = linear_positions(s, ix, b, "GatherND")
  local nb, rest = numel(s, 1, b), numel(s, b + k + 1, #s)
  local rows = x:reshape(nb, numel(s, b + 1, b + k), rest)
  local m = pos.shape[2]
  local out = F.gather(rows, 2, (pos + 1):unsqueeze(3):expand(nb, m, rest))
  local shape = {}
  for i = 1, #ix.shape - 1 do shape[#shape + 1] = ix.shape[i] end
  for i = b + k + 1, #s do shape[#shape + 1] = s[i] end
  return out:reshape(shape)
end)

-- ONNX's reductions -> scatter_reduce's (none: a plain write)
local REDUCE = { add = "sum", mul = "prod", max = "amax", min = "amin" }
local function check_reduction(op, r)
  if r ~= "none" and not REDUCE[r] then
    refuse(op .. ": reduction '" .. tostring(r) .. "' is not one of none, add, mul, max, min")
  end
end

-- ScatterElements / Scatter: data with updates[i][j] written or combined at row indices[i][j] (axis 0)
local function scatter_elements(op)
  return function(ins, at)
    local reduction = at.reduction or "none"
    check_reduction(op, reduction)
    local x, ix, src = T(ins[1]), T(ins[2]), T(ins[3])
    local a = axis0(at.axis, rank(x), op) + 1
    ix = one_based(ix, x.shape[a])
    if reduction ~= "none" then return F.scatter_reduce(x, a, ix, src, REDUCE[reduction]) end
    return F.scatter(x, a, ix, src)
  end
end
def("ScatterElements", { axis = 0, reduction = "none" }, scatter_elements("ScatterElements"))
def("Scatter", { axis = 0 }, scatter_elements("Scatter"))

-- ScatterND: data (k dims, r...) with updates (m..., r...) written or combined at indices (m..., k)
def("ScatterND", { reduction = "none" }, function(ins, at)
  check_reduction("ScatterND", at.reduction)
  local x, ix, src = T(ins[1]), T(ins[2]), T(ins[3])
  local s = x.shape
  local pos, k = linear_positions(s, ix, 0, "ScatterND")
  local rows = x:reshape(numel(s, 1, k), -1) -- (K, R)
  local m, r = pos.shape[2], rows.shape[2]
  local at_rows = (pos:reshape(m, 1) + 1):expand(m, r) -- (M, R): the row each update row goes to
  local upd = src:reshape(m, r)
  if at.reduction ~= "none" then return F.scatter_reduce(rows, 1, at_rows, upd, REDUCE[at.reduction]):reshape(s) end
  return F.scatter(rows, 1, at_rows, upd):reshape(s)
end)

-- OneHot: indices (...), depth, values {off, on} -> values' dtype with a new dim of size depth at axis
def("OneHot", { axis = -1 }, function(ins, at)
  local ix = T(ins[1])
  local depth = V.data(ins[2], "OneHot's depth")[1]
  if type(depth) ~= "number" then refuse("OneHot: depth must be a number, not the dynamic dim " .. tostring(depth)) end
  depth = math.floor(depth)
  local values = T(ins[3])
  local a = axis0(at.axis, rank(ix) + 1, "OneHot") + 1
  local classes_shape = {}
  for i = 1, rank(ix) + 1 do classes_shape[i] = i == a and depth or 1 end
  local classes = F.arange(0, depth, { dtype = "i64" }):reshape(classes_shape)
  if ix.dtype ~= "i64" then ix = ix:astype("i64") end
  local hit = F.where(ix:lt(0), ix + depth, ix):unsqueeze(a):eq(classes)
  return F.where(hit, values:select(1, 2), values:select(1, 1))
end)

-- Trilu: the upper (or lower) triangle of the last two dims from diagonal k (a const or a runtime 0-d value)
def("Trilu", { upper = 1 }, function(ins, at)
  local x = T(ins[1])
  local k = 0
  if ins[2] then
    k = is_const(ins[2]) and ins[2].data and V.ints(ins[2], "Trilu's k")[1] or T(ins[2]):reshape({})
  end
  if at.upper ~= 0 then return F.triu(x, k) end
  return F.tril(x, k)
end)

-- EyeLike: ones on diagonal k of a 2-D shape, zeros elsewhere, in dtype (default: the input's)
def("EyeLike", { dtype = false, k = 0 }, function(ins, at)
  local x = T(ins[1])
  if rank(x) ~= 2 then refuse("EyeLike: the input must be 2-D, got rank " .. rank(x)) end
  local dt = x.dtype
  if at.dtype then
    dt = types.DS[at.dtype]
    if not dt then refuse("EyeLike: dtype " .. tostring(types.NAME[at.dtype] or at.dtype) .. " is not supported") end
  end
  local ones = F.ones(x.shape, { dtype = dt })
  return F.tril(F.triu(ones, at.k), at.k)
end)

-- ReverseSequence: the first sequence_lens[b] steps along time_axis of each batch entry b reversed
def("ReverseSequence", { batch_axis = 1, time_axis = 0 }, function(ins, at)
  local x, lens = T(ins[1]), T(ins[2])
  local ta, ba = at.time_axis + 1, at.batch_axis + 1
  if rank(x) < 2 or ta == ba or math.min(ta, ba) ~= 1 or math.max(ta, ba) ~= 2 then
    refuse("ReverseSequence: time_axis and batch_axis must be 0 and 1 (either order) of an input of rank >= 2")
  end
  local steps, batch = x.shape[ta], x.shape[ba]
  local t = F.arange(0, steps, { dtype = "i64" }):reshape(steps, 1) -- (T, 1)
  local len = lens:astype("i64"):reshape(1, batch) -- (1, B)
  local src = F.where(t:lt(len), len - 1 - t, t) + 1 -- (T, B): the 1-based step each output step reads
  if ta == 2 then src = src:t() end
  local shape = {}
  for i = 1, rank(x) do shape[i] = i <= 2 and x.shape[i] or 1 end
  return F.gather(x, ta, F.contiguous(src:reshape(shape):expand(x.shape)))
end)

-- Tile: x repeated repeats[d] times along each dim d
def("Tile", {}, function(ins)
  local reps = V.ints(ins[2], "Tile's repeats")
  local x = T(ins[1])
  if #reps ~= rank(x) then refuse("Tile: " .. #reps .. " repeats for a rank-" .. rank(x) .. " input") end
  return F.tile(x, reps)
end)

-- ---- Einsum: '...' expanded to letters ds's einsum does not use; a repeated letter in a term takes the
-- diagonal first ("ii->i") ----
local function free_letters(equation)
  local free = {}
  for c in ("ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"):gmatch(".") do
    if not equation:find(c, 1, true) then free[#free + 1] = c end
  end
  return free
end

-- x with its term's repeated letters reduced to one dim (the diagonal); returns x, the term without repeats
local function take_diagonals(x, term)
  while true do
    local first, second
    for i = 1, #term do
      local j = term:find(term:sub(i, i), i + 1, true)
      if j then first, second = i, j; break end
    end
    if not first then return x, term end
    local n = x.shape[first]
    local shape = {}
    for d = 1, #term do shape[d] = (d == first or d == second) and n or 1 end
    local eye = F.tril(F.triu(F.ones({ n, n }, { dtype = x.dtype }), 0), 0):reshape(shape)
    x = (x * eye):sum(second)
    term = term:sub(1, second - 1) .. term:sub(second + 1)
  end
end

def("Einsum", { equation = REQUIRED }, function(ins, at)
  local eq = at.equation:gsub("%s", "")
  local lhs, rhs = eq:match("^(.-)%->(.*)$")
  lhs = lhs or eq
  local terms, xs, ell_dims = {}, {}, {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  if #terms ~= #ins then refuse("Einsum: '" .. at.equation .. "' names " .. #terms .. " operands, got " .. #ins) end
  local widest -- the most dims an ellipsis stands for; the letters of '...' align at the right
  for i, term in ipairs(terms) do
    if term:find("...", 1, true) then
      ell_dims[i] = rank(ins[i]) - (#term - 3)
      if ell_dims[i] < 0 then refuse("Einsum: term '" .. term .. "' has more letters than operand " .. i .. "'s dims") end
      widest = math.max(widest or 0, ell_dims[i])
    end
  end
  local ell = widest and table.concat(free_letters(eq), "", 1, widest)
  for i, term in ipairs(terms) do
    if ell_dims[i] then term = term:gsub("%.%.%.", ell:sub(#ell - ell_dims[i] + 1)) end
    xs[i], terms[i] = take_diagonals(T(ins[i]), term)
  end
  if rhs then
    if rhs:find("...", 1, true) then rhs = rhs:gsub("%.%.%.", ell or "") end
  else -- implicit output: the ellipsis dims, then the letters used once, in alphabetical order
    local count = {}
    for _, term in ipairs(terms) do for c in term:gmatch(".") do count[c] = (count[c] or 0) + 1 end end
    local once = {}
    for c, n in pairs(count) do if n == 1 and not (ell and ell:find(c, 1, true)) then once[#once + 1] = c end end
    table.sort(once)
    rhs = (ell or "") .. table.concat(once)
  end
  return F.einsum(table.concat(terms, ",") .. "->" .. rhs, xs)
end)

return OPS
