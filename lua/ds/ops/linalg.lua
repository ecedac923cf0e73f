-- ops/linalg.lua: products and norms written with table ops: dot, outer, mv, addmm, einsum (lowered to
-- sum/permute/reshape/matmul, so it traces and compiles), norm, isclose, allclose.
local C = require("ds.ops.common")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local N = require("ds.ops.linalg_norm")
local F = C.functions

local is_tensor = C.is_tensor

local function check_rank(name, x, ranks, what)
  if not is_tensor(x) then errors.raise(name .. ": " .. what .. " must be a tensor, got " .. type(x)) end
  if not ranks[#x._shape] then
    errors.raise(string.format("%s: %s must be %s, got %s", name, what, ranks.text, S.str(x._shape)))
  end
end
local VECTOR, MATRIX = { [1] = true, text = "1-D" }, { [2] = true, text = "2-D" }

C.export("dot", function(a, b)
  check_rank("dot", a, VECTOR, "first operand"); check_rank("dot", b, VECTOR, "second operand")
  return F.matmul(a, b)
end)
C.export("outer", function(a, b)
  check_rank("outer", a, VECTOR, "first operand"); check_rank("outer", b, VECTOR, "second operand")
  return a:reshape(-1, 1) * b:reshape(1, -1)
end)
C.export("mv", function(m, v)
  check_rank("mv", m, MATRIX, "matrix"); check_rank("mv", v, VECTOR, "vector")
  return F.matmul(m, v)
end)
-- addmm(input, m1, m2[, {beta = 1, alpha = 1}]) = beta * input + alpha * (m1 @ m2); beta = 0 ignores input
C.export("addmm", function(input, m1, m2, opts)
  check_rank("addmm", m1, MATRIX, "m1"); check_rank("addmm", m2, MATRIX, "m2")
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "beta" and k ~= "alpha" then errors.raise("addmm: unknown option '" .. tostring(k) .. "'") end
  end
  local beta, alpha = opts.beta or 1, opts.alpha or 1
  local p = F.matmul(m1, m2)
  if alpha ~= 1 then p = p * alpha end
  if beta == 0 then return p + F.zeros_like(input) * 0 end
  return (beta == 1 and input or input * beta) + p
end, { args = { "tensor", "tensor", "tensor", "table?" } })

-- ---- einsum ----
local function letters(term, eq)
  local out = {}
  for ch in term:gmatch(".") do
    if not ch:match("%a") then
      errors.raise("einsum: bad character '" .. ch .. "' in '" .. eq .. "' (letters, '...', ',' and '->' only)")
    end
    out[#out + 1] = ch
  end
  return out
end
local function has(list, ch) for _, c in ipairs(list) do if c == ch then return true end end return false end
local function positions(idx, wanted)
  local pos = {}
  for _, ch in ipairs(wanted) do for i, c in ipairs(idx) do if c == ch then pos[#pos + 1] = i end end end
  return pos
end

-- sum out the letters of op not in keep
local function sum_out(op, keep)
  local dims, rest = {}, {}
  for i, ch in ipairs(op.idx) do if has(keep, ch) then rest[#rest + 1] = ch else dims[#dims + 1] = i end end
  if #dims == 0 then return op end
  return { t = op.t:sum(dims), idx = rest }
end

-- a (batch, M, K) @ (batch, K, N) contraction of two operands over their shared letters not in keep
local function contract(a, b, keep, size)
  local batch, contr, aonly, bonly = {}, {}, {}, {}
  for _, ch in ipairs(a.idx) do
    if has(b.idx, ch) then
      if has(keep, ch) then batch[#batch + 1] = ch else contr[#contr + 1] = ch end
    else aonly[#aonly + 1] = ch end
  end
  for _, ch in ipairs(b.idx) do if not has(a.idx, ch) then bonly[#bonly + 1] = ch end end
  local function numel(list) local n = 1; for _, ch in ipairs(list) do n = S.mul(n, size[ch]) end; return n end
  local order_a, order_b = {}, {}
  for _, l in ipairs { batch, aonly, contr } do for _, ch in ipairs(l) do order_a[#order_a + 1] = ch end end
  for _, l in ipairs { batch, contr, bonly } do for _, ch in ipairs(l) do order_b[#order_b + 1] = ch end end
  local ta = a.t:permute(positions(a.idx, order_a)):reshape(numel(batch), numel(aonly), numel(contr))
  local tb = b.t:permute(positions(b.idx, order_b)):reshape(numel(batch), numel(contr), numel(bonly))
  local idx, shape = {}, {}
  for _, l in ipairs { batch, aonly, bonly } do
    for _, ch in ipairs(l) do idx[#idx + 1] = ch; shape[#shape + 1] = size[ch] end
  end
  return { t = F.matmul(ta, tb):reshape(shape), idx = idx }
end

-- letters the equation does not use, for the dims of '...'
local function free_letters(eq, n)
  local free = {}
  for c in ("ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"):gmatch(".") do
    if #free < n and not eq:find(c, 1, true) then free[#free + 1] = c end
  end
  return free
end

-- op {t, idx} with each letter repeated in its term reduced to the diagonal of those dims (last, as one letter)
local function take_diagonals(op)
  while true do
    local first, second
    for i = 1, #op.idx do
      for j = i + 1, #op.idx do if op.idx[i] == op.idx[j] and not first then first, second = i, j end end
    end
    if not first then return op end
    local ch, idx = op.idx[first], {}
    for d, c in ipairs(op.idx) do if d ~= first and d ~= second then idx[#idx + 1] = c end end
    idx[#idx + 1] = ch
    op = { t = F.diagonal(op.t, 0, first, second), idx = idx }
  end
end

-- einsum("ij,jk->ik", a, b, ...): up to 4 operands (or a list of them); '...' stands for the dims no letter
-- names (aligned at the right, broadcast between operands); a letter repeated in a term takes the diagonal
-- ("ii->i", "ii" the trace); size-1 dims broadcast against the other operands' sizes
C.export("einsum", function(eq, ...)
  local operands = { ... }
  if type(operands[1]) == "table" and not is_tensor(operands[1]) then operands = operands[1] end
  if type(eq) ~= "string" then errors.raise("einsum: the first argument must be the equation string") end
  if #operands < 1 or #operands > 4 then errors.raise("einsum: expects 1 to 4 operands, got " .. #operands) end
  local spec = eq:gsub("%s", "")
  local lhs, rhs = spec:match("^(.-)%->(.*)$")
  lhs = lhs or spec
  local raw = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do raw[#raw + 1] = term end
  if #raw ~= #operands then
    errors.raise(string.format("einsum: '%s' names %d operands, got %d", eq, #raw, #operands))
  end
  -- '...': the widest operand's unnamed dims become letters the equation does not use
  local ell_dims, widest = {}, nil
  for i, term in ipairs(raw) do
    if not is_tensor(operands[i]) then errors.raise("einsum: operand " .. i .. " is not a tensor") end
    local _, dots = term:gsub("%.%.%.", "")
    if dots > 1 then errors.raise("einsum: '...' appears twice in term '" .. term .. "'") end
    if dots == 1 then
      ell_dims[i] = #operands[i]._shape - (#term - 3)
      if ell_dims[i] < 0 then
        errors.raise(string.format("einsum: term '%s' names more dims than operand %d's %s", term, i,
          S.str(operands[i]._shape)))
      end
      widest = math.max(widest or 0, ell_dims[i])
    end
  end
  local ell = widest and table.concat(free_letters(spec, widest)) or ""
  local terms = {}
  for i, term in ipairs(raw) do
    if ell_dims[i] then term = term:gsub("%.%.%.", ell:sub(#ell - ell_dims[i] + 1)) end
    terms[i] = letters(term, eq)
  end
  local size, count, ops = {}, {}, {}
  for i, idx in ipairs(terms) do
    local x = operands[i]
    if #idx ~= #x._shape then
      errors.raise(string.format("einsum: term '%s' has %d letters, operand %d is %s", table.concat(idx), #idx, i,
        S.str(x._shape)))
    end
    for d, ch in ipairs(idx) do
      count[ch] = (count[ch] or 0) + 1
      local s = x._shape[d]
      if size[ch] == nil or size[ch] == 1 then size[ch] = s
      elseif s ~= 1 and not S.same(size[ch], s) then
        errors.raise(string.format("einsum: letter '%s' has size %s and %s", ch, tostring(size[ch]), tostring(s)))
      end
    end
  end
  for i, idx in ipairs(terms) do
    local x, want, grow = operands[i], {}, false
    for d, ch in ipairs(idx) do
      want[d] = size[ch]
      if not S.same(x._shape[d], size[ch]) then grow = true end
    end
    ops[i] = take_diagonals({ t = grow and x:expand(want) or x, idx = idx })
  end
  local out
  if rhs then
    local _, dots = rhs:gsub("%.%.%.", "")
    if dots > 1 then errors.raise("einsum: '...' appears twice in the output '" .. rhs .. "'") end
    if dots == 1 and not widest then errors.raise("einsum: '...' in the output of '" .. eq .. "' but in no operand") end
    out = letters((rhs:gsub("%.%.%.", ell)), eq)
    local seen = {}
    for _, ch in ipairs(out) do
      if not size[ch] then errors.raise("einsum: output letter '" .. ch .. "' is in no operand") end
      if seen[ch] then errors.raise("einsum: output letter '" .. ch .. "' appears twice") end
      seen[ch] = true
    end
  else -- implicit output: the '...' dims, then the letters used once, in alphabetical order (as torch)
    out = {}
    for ch, n in pairs(count) do if n == 1 and not ell:find(ch, 1, true) then out[#out + 1] = ch end end
    table.sort(out)
    for k = #ell, 1, -1 do table.insert(out, 1, ell:sub(k, k)) end
  end
  -- letters still needed after operand i: the output's and those of the operands after it
  local function needed_after(i)
    local keep = {}
    for _, ch in ipairs(out) do keep[#keep + 1] = ch end
    for j = i + 1, #ops do for _, ch in ipairs(ops[j].idx) do keep[#keep + 1] = ch end end
    return keep
  end
  local acc = ops[1]
  for i = 2, #ops do
    local keep = needed_after(i)
    local with_b = {}
    for _, ch in ipairs(keep) do with_b[#with_b + 1] = ch end
    for _, ch in ipairs(ops[i].idx) do with_b[#with_b + 1] = ch end
    local with_a = {}
    for _, ch in ipairs(keep) do with_a[#with_a + 1] = ch end
    for _, ch in ipairs(acc.idx) do with_a[#with_a + 1] = ch end
    acc = contract(sum_out(acc, with_b), sum_out(ops[i], with_a), keep, size)
  end
  acc = sum_out(acc, out)
  local perm = positions(acc.idx, out)
  local y = acc.t
  if #perm > 1 then y = y:permute(perm) end
  return y
end, { method = false })

-- ---- norms and closeness ----
-- norm(x, p = 2, dim = all, keepdim = false[, {dtype =}]) or norm(x, {p =, dim =, keepdim =, dtype =}) (torch.norm):
-- p a number, math.huge, -math.huge or 'fro' (2 over the dims); a zero norm has gradient 0
C.export("norm", function(x, p, dim, keepdim, opts)
  if type(p) == "table" and not is_tensor(p) then opts, p = p, nil
  elseif type(keepdim) == "table" then opts, keepdim = keepdim, nil end
  local o = options.check(opts, "norm", { p = "any", dim = "any", keepdim = "boolean", dtype = "dtype" })
  if p == nil then p = o.p end
  if dim == nil then dim = o.dim end
  if keepdim == nil then keepdim = o.keepdim end
  if not is_tensor(x) then errors.raise("norm: expects a tensor, got " .. type(x)) end
  if o.dtype then x = x:astype(o.dtype) end
  if x.dtype ~= "f32" and x.dtype ~= "f64" then errors.raise("norm: needs a floating point tensor, got " .. x.dtype) end
  p = p or 2
  if p == "fro" then p = 2 end
  if type(p) ~= "number" or p ~= p then
    errors.raise("norm: p = '" .. tostring(p) .. "' is not implemented (a number, math.huge or 'fro'; 'nuc' needs an SVD)")
  end
  return N.pnorm(x, p, N.dims_list("norm", x, dim), keepdim or false)
end)

-- isclose(a, b, rtol = 1e-5, atol = 1e-8, equal_nan = false): a == b or |a - b| <= atol + rtol * |b|
local function isclose(a, b, rtol, atol, equal_nan)
  if type(rtol) == "table" then rtol, atol, equal_nan = rtol.rtol, rtol.atol, rtol.equal_nan end
  rtol, atol = rtol or 1e-5, atol or 1e-8
  if not (is_tensor(a) or is_tensor(b)) then errors.raise("isclose: expects tensors") end
  local r = F.eq(a, b)
  local dt = is_tensor(a) and a.dtype or b.dtype
  if dt ~= "bool" then r = F.logical_or(r, F.sub(a, b):abs():le(F.abs(b) * rtol + atol)) end
  if equal_nan then r = F.logical_or(r, F.logical_and(F.ne(a, a), F.ne(b, b))) end
  return r
end
C.export("isclose", isclose)
C.export("allclose", function(a, b, rtol, atol, equal_nan) return isclose(a, b, rtol, atol, equal_nan):all():item() end)
