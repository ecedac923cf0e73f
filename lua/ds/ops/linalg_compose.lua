-- ops/linalg_compose.lua: matrix functions composed of table ops (index_select, matmul, sum, permute), so
-- they differentiate, trace and compile: diagonal, x:trace(), movedim, baddbmm, addbmm, addmv, tensordot, cdist,
-- kron. Dims are 1-based.
local C = require("ds.ops.common")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local Tensor = require("ds.tensor")
local F = C.functions

local is_tensor = C.is_tensor

local function need_rank(name, x, what, n)
  if not is_tensor(x) then errors.raise(string.format("%s: %s must be a tensor, got %s", name, what, type(x))) end
  if n and #x._shape ~= n then
    errors.raise(string.format("%s: %s must be %d-D, got %s", name, what, n, S.str(x._shape)))
  end
  return x
end

-- diagonal(x, offset = 0, dim1 = 1, dim2 = 2): the diagonal offset of the (dim1, dim2) planes as the last dim
C.export("diagonal", function(x, offset, dim1, dim2)
  if type(offset) == "table" then
    local o = options.check(offset, "diagonal", { offset = "integer", dim1 = "integer", dim2 = "integer" })
    offset, dim1, dim2 = o.offset, o.dim1, o.dim2
  end
  need_rank("diagonal", x, "input")
  local nd, where = #x._shape, "diagonal of " .. S.str(x._shape)
  if nd < 2 then errors.raise(where .. ": expects at least 2 dims") end
  offset = offset or 0
  if type(offset) ~= "number" or offset ~= math.floor(offset) then errors.raise(where .. ": offset must be an integer") end
  local d1, d2 = S.dim(dim1 or 1, nd, where), S.dim(dim2 or 2, nd, where)
  if d1 == d2 then errors.raise(where .. ": dim1 and dim2 are both " .. d1) end
  local perm = {}
  for i = 1, nd do if i ~= d1 and i ~= d2 then perm[#perm + 1] = i end end
  perm[#perm + 1] = d1; perm[#perm + 1] = d2
  local r, c = x._shape[d1], x._shape[d2]
  local r0, c0 = math.max(-offset, 0), math.max(offset, 0) -- 0-based row and column where the diagonal starts
  local pos = {}
  for i = 0, math.min(r - r0, c - c0) - 1 do pos[i + 1] = (i + r0) * c + i + c0 + 1 end
  local lead = {}
  for i = 1, nd - 2 do lead[i] = x._shape[perm[i]] end
  lead[#lead + 1] = S.mul(r, c)
  local flat = x:permute(perm):reshape(lead)
  if #pos == 0 then return flat:narrow(-1, 1, 0) end
  return F.index_select(flat, nd - 1, F.tensor(pos, { dtype = "i64" }))
end)

-- x:trace(): the sum of a matrix's main diagonal (integers give i64); a method only, ds.trace is the tracer
Tensor._define("ds.ops.linalg_compose", {
  trace = function(x) return F.diagonal(need_rank("trace", x, "input", 2)):sum() end,
})

-- movedim(x, source, destination): dims (numbers or lists) moved to the given positions, the others in order
local function movedim(x, source, destination)
  need_rank("movedim", x, "input")
  local nd, where = #x._shape, "movedim of " .. S.str(x._shape)
  local src = type(source) == "table" and source or { source }
  local dst = type(destination) == "table" and destination or { destination }
  if #src ~= #dst then errors.raise(string.format("%s: %d source dims, %d destinations", where, #src, #dst)) end
  local perm, used = {}, {}
  for i = 1, #src do
    local s, d = S.dim(src[i], nd, where), S.dim(dst[i], nd, where)
    if perm[d] or used[s] then errors.raise(where .. ": repeated dim") end
    perm[d], used[s] = s, true
  end
  local rest = 1
  for i = 1, nd do
    if not perm[i] then
      while used[rest] do rest = rest + 1 end
      perm[i], used[rest] = rest, true
    end
  end
  return x:permute(perm)
end
C.export("movedim", movedim)
C.export("moveaxis", movedim)

-- beta * input + alpha * product, as addmm: beta = 0 ignores input's values (NaN included)
local function scaled_sum(name, input, product, opts)
  need_rank(name, input, "input")
  opts = options.check(opts, name, { beta = "number", alpha = "number" })
  local beta, alpha = opts.beta or 1, opts.alpha or 1
  if alpha ~= 1 then product = product * alpha end
  local shape = S.broadcast(input._shape, product._shape, name)
  if not S.equal(shape, product._shape) then
    errors.raise(string.format("%s: input %s does not broadcast to the product's %s", name, S.str(input._shape),
      S.str(product._shape)))
  end
  if beta == 0 then return product end
  return (beta == 1 and input or input * beta) + product
end

-- baddbmm(input, b1 (B,N,M), b2 (B,M,P), {beta = 1, alpha = 1}) -> (B,N,P)
C.export("baddbmm", function(input, b1, b2, opts)
  need_rank("baddbmm", b1, "batch1", 3); need_rank("baddbmm", b2, "batch2", 3)
  return scaled_sum("baddbmm", input, F.bmm(b1, b2), opts)
end)
-- addbmm(input, b1 (B,N,M), b2 (B,M,P), {beta = 1, alpha = 1}) -> (N,P): the products summed over the batch
C.export("addbmm", function(input, b1, b2, opts)
  need_rank("addbmm", b1, "batch1", 3); need_rank("addbmm", b2, "batch2", 3)
  return scaled_sum("addbmm", input, F.bmm(b1, b2):sum(1), opts)
end)
-- addmv(input, mat (N,M), vec (M), {beta = 1, alpha = 1}) -> (N)
C.export("addmv", function(input, mat, vec, opts)
  need_rank("addmv", mat, "mat", 2); need_rank("addmv", vec, "vec", 1)
  return scaled_sum("addmv", input, F.matmul(mat, vec), opts)
end)

-- tensordot(a, b, dims = 2): a's last dims contracted with b's first (dims a number), or the dims listed
-- ({{dims of a}, {dims of b}}, 1-based)
C.export("tensordot", function(a, b, dims)
  need_rank("tensordot", a, "a"); need_rank("tensordot", b, "b")
  local da, db = {}, {}
  dims = dims == nil and 2 or dims
  if type(dims) == "number" then
    if dims < 0 or dims ~= math.floor(dims) or dims > #a._shape or dims > #b._shape then
      errors.raise("tensordot: dims must be an integer in 0..min(a:dim(), b:dim()), got " .. tostring(dims))
    end
    for i = 1, dims do da[i] = #a._shape - dims + i; db[i] = i end
  elseif type(dims) == "table" and type(dims[1]) == "table" and type(dims[2]) == "table" and #dims[1] == #dims[2] then
    for i = 1, #dims[1] do
      da[i] = S.dim(dims[1][i], #a._shape, "tensordot of a " .. S.str(a._shape))
      db[i] = S.dim(dims[2][i], #b._shape, "tensordot of b " .. S.str(b._shape))
    end
  else
    errors.raise("tensordot: dims must be a number or {{dims of a}, {dims of b}} of equal lengths")
  end
  local function split(x, contracted, first)
    local is_c, free, perm, nfree, nc = {}, {}, {}, 1, 1
    for _, d in ipairs(contracted) do is_c[d] = true; nc = S.mul(nc, x._shape[d]) end
    for i = 1, #x._shape do if not is_c[i] then free[#free + 1] = i; nfree = S.mul(nfree, x._shape[i]) end end
    local order = first and { free, contracted } or { contracted, free }
    for _, l in ipairs(order) do for _, d in ipairs(l) do perm[#perm + 1] = d end end
    local shape = {}
    for i, d in ipairs(free) do shape[i] = x._shape[d] end
    local m = x:permute(perm)
    return first and m:reshape(nfree, nc) or m:reshape(nc, nfree), shape
  end
  for i = 1, #da do
    if not S.same(a._shape[da[i]], b._shape[db[i]]) then
      errors.raise(string.format("tensordot: contracted sizes differ (%s of a %s, %s of b %s)", tostring(a._shape[da[i]]),
        S.str(a._shape), tostring(b._shape[db[i]]), S.str(b._shape)))
    end
  end
  local ma, sa = split(a, da, true)
  local mb, sb = split(b, db, false)
  for _, s in ipairs(sb) do sa[#sa + 1] = s end
  return F.matmul(ma, mb):reshape(sa)
end, { method = false })

-- cdist(x1 (..., P, M), x2 (..., R, M), p = 2) -> (..., P, R): the p-norm distance of every pair of rows
-- (p = 0: the number of differing elements, math.huge: the largest difference); a zero distance has gradient 0
C.export("cdist", function(x1, x2, p, opts)
  if type(p) == "table" then opts, p = p, nil end
  opts = options.check(opts, "cdist", { p = { "number", min = 0 }, compute_mode = {
    "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist" } })
  p = p or opts.p or 2
  need_rank("cdist", x1, "x1"); need_rank("cdist", x2, "x2")
  if #x1._shape < 2 or #x2._shape < 2 then errors.raise("cdist: x1 and x2 must have at least 2 dims") end
  if type(p) ~= "number" or p < 0 then errors.raise("cdist: p must be a non-negative number, got " .. tostring(p)) end
  local diff = F.abs(x1:unsqueeze(-2) - x2:unsqueeze(-3)) -- (..., P, R, M)
  if p == 0 then return diff:ne(0):astype(diff.dtype):sum(-1) end
  if p == math.huge then return diff:amax(-1) end
  local s = p == 1 and diff or (p == 2 and diff * diff or diff ^ p)
  s = s:sum(-1)
  if p == 1 then return s end
  local positive = s:gt(0)
  local root = F.where(positive, s, F.ones({}, { dtype = s.dtype }))
  root = p == 2 and F.sqrt(root) or root ^ (1 / p)
  return F.where(positive, root, F.zeros({}, { dtype = s.dtype }))
end, { method = false })

-- kron(a, b): the Kronecker product; the shorter shape gets leading 1s
C.export("kron", function(a, b)
  need_rank("kron", a, "a"); need_rank("kron", b, "b")
  local n = math.max(#a._shape, #b._shape)
  local sa, sb, wa, wb, out = {}, {}, {}, {}, {}
  for i = 1, n do
    sa[i] = a._shape[i - (n - #a._shape)] or 1
    sb[i] = b._shape[i - (n - #b._shape)] or 1
    wa[2 * i - 1], wa[2 * i] = sa[i], 1
    wb[2 * i - 1], wb[2 * i] = 1, sb[i]
    out[i] = S.mul(sa[i], sb[i])
  end
  return (a:reshape(wa) * b:reshape(wb)):reshape(out)
end)
