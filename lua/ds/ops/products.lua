-- ops/products.lua: products and statistics of vectors and matrices composed of matmul, sum and the norms: addr,
-- inner, multi_dot/chain_matmul, vecdot, dist, cov, corrcoef, vander.
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local N = require("ds.ops.linalg_norm")
local F = C.functions

local is_tensor = C.is_tensor

local M = {}

local function need_tensor(name, x, what)
  if not is_tensor(x) then errors.raise(string.format("%s: %s must be a tensor, got %s", name, what, type(x))) end
  return x
end

-- addr(input, vec1 (n), vec2 (m), {beta = 1, alpha = 1}) = beta * input + alpha * outer(vec1, vec2); beta = 0
-- ignores input (NaN included)
C.export("addr", function(input, v1, v2, opts)
  need_tensor("addr", input, "input")
  local o = options.check(opts, "addr", { beta = "number", alpha = "number" })
  local vecs = { v1, v2 }
  for i = 1, 2 do
    local v = need_tensor("addr", vecs[i], "vec" .. i)
    if #v._shape ~= 1 then errors.raise("addr: vec1 and vec2 must be 1-D, got " .. S.str(v._shape)) end
  end
  local p = v1:reshape(-1, 1) * v2:reshape(1, -1)
  if (o.alpha or 1) ~= 1 then p = p * o.alpha end
  local shape = S.broadcast(input._shape, p._shape, "addr")
  if not S.equal(shape, p._shape) then
    errors.raise(string.format("addr: input %s does not broadcast to the product's %s", S.str(input._shape),
      S.str(p._shape)))
  end
  local beta = o.beta or 1
  if beta == 0 then return p end
  return (beta == 1 and input or input * beta) + p
end)

-- inner(a, b): the sum over the last dims of a and b ((..., k) x (..., k) -> (a's leading..., b's leading...));
-- a 0-d operand multiplies
C.export("inner", function(a, b)
  need_tensor("inner", a, "a"); need_tensor("inner", b, "b")
  if #a._shape == 0 or #b._shape == 0 then return a * b end
  if a.dtype == "bool" or b.dtype == "bool" then errors.raise("inner: bool tensors are not supported") end
  if not S.same(a._shape[#a._shape], b._shape[#b._shape]) then
    errors.raise(string.format("inner: the last dims of a %s and b %s differ", S.str(a._shape), S.str(b._shape)))
  end
  return F.tensordot(a, b, { { -1 }, { -1 } })
end)

-- multi_dot({A, B, ...}): the product left to right; a 1-D first operand is a row, a 1-D last one a column (and
-- those dims are dropped from the result)
function M.multi_dot(list, name)
  name = name or "linalg.multi_dot"
  if type(list) ~= "table" or is_tensor(list) or #list < 2 then
    errors.raise(name .. ": expects a list of at least 2 tensors")
  end
  local n, mats = table.maxn(list), {}
  for i = 1, n do
    local t = list[i]
    need_tensor(name, t, "operand " .. i)
    local nd = #t._shape
    local vector_ok = (i == 1 or i == n) and nd == 1
    if nd ~= 2 and not vector_ok then
      errors.raise(string.format("%s: operand %d must be 2-D (the first and last may be 1-D), got %s", name, i,
        S.str(t._shape)))
    end
    mats[i] = nd == 1 and (i == 1 and t:reshape(1, -1) or t:reshape(-1, 1)) or t
    if i > 1 and not S.same(mats[i - 1]._shape[2], mats[i]._shape[1]) then
      errors.raise(string.format("%s: operands %d %s and %d %s do not multiply", name, i - 1,
        S.str(list[i - 1]._shape), i, S.str(t._shape)))
    end
    if t.dtype == "bool" then errors.raise(name .. ": bool tensors are not supported") end
  end
  local r = mats[1]
  for i = 2, n do r = F.matmul(r, mats[i]) end
  if #list[1]._shape == 1 and #list[n]._shape == 1 then return r:reshape({}) end
  if #list[1]._shape == 1 then return r:squeeze(1) end
  if #list[n]._shape == 1 then return r:squeeze(2) end
  return r
end
-- chain_matmul(A, B, ...): the product of 2-D matrices left to right
C.export("chain_matmul", function(...)
  local list = { ... }
  if select("#", ...) == 1 then return need_tensor("chain_matmul", list[1], "operand 1") end
  for i = 1, select("#", ...) do
    local t = list[i]
    if #need_tensor("chain_matmul", t, "operand " .. i)._shape ~= 2 then
      errors.raise("chain_matmul: operands must be 2-D, got " .. S.str(t._shape))
    end
  end
  return M.multi_dot(list, "chain_matmul")
end, { method = false })

-- vecdot(x, y, dim = -1) or vecdot(x, y, {dim =}): sum(x * y) along dim (broadcast)
function M.vecdot(x, y, dim)
  if type(dim) == "table" then dim = options.check(dim, "linalg.vecdot", { dim = "integer" }).dim end
  need_tensor("linalg.vecdot", x, "x"); need_tensor("linalg.vecdot", y, "y")
  return (x * y):sum(dim or -1)
end

-- dist(a, b, p = 2): the p-norm of a - b (broadcast, flattened); a zero distance has gradient 0
C.export("dist", function(a, b, p)
  need_tensor("dist", a, "a"); need_tensor("dist", b, "b")
  if not dtype.is_float[a.dtype] then errors.raise("dist: expects floating point tensors, got " .. a.dtype) end
  p = p or 2
  if type(p) ~= "number" or p ~= p then errors.raise("dist: p must be a number, got " .. tostring(p)) end
  local shape = S.broadcast(a._shape, b._shape, "dist")
  if S.numel(shape) == 0 and (p == math.huge or p == -math.huge or p < 0) then
    errors.raise("dist: cannot compute the " .. tostring(p) .. " norm of empty tensors")
  end
  return N.pnorm(a - b, p, nil, false)
end)

-- cov(x (vars, obs) or (obs), {correction = 1, fweights =, aweights =}): the covariance matrix of the rows
-- (0-d for one variable), weighted as numpy.cov
local function cov(x, opts, name)
  need_tensor(name, x, "input")
  local o = options.check(opts, name, { correction = "integer", fweights = "tensor", aweights = "tensor" })
  if #x._shape > 2 then errors.raise(name .. ": input must have at most 2 dims, got " .. S.str(x._shape)) end
  local one = #x._shape < 2
  local m = one and x:reshape(1, -1) or x
  if not dtype.is_float[m.dtype] then m = m:astype("f32") end
  local nobs = m._shape[2]
  local correction = o.correction == nil and 1 or o.correction
  local w
  for _, key in ipairs { "fweights", "aweights" } do
    local v = o[key]
    if v then
      if #v._shape ~= 1 or v._shape[1] ~= nobs then
        errors.raise(string.format("%s: %s must be 1-D with %d observations, got %s", name, key, nobs, S.str(v._shape)))
      end
      v = v:astype(m.dtype)
      w = w and w * v or v
    end
  end
  local wsum = w and w:sum() or nobs
  local avg = w and (m * w):sum(2, true) / wsum or m:mean(2, true)
  local norm
  if w == nil then norm = nobs - correction
  elseif correction == 0 then norm = wsum
  elseif o.aweights == nil then norm = wsum - correction
  else norm = wsum - correction * (w * o.aweights:astype(m.dtype)):sum() / wsum end
  local dev = m - avg
  local c = F.matmul(w and dev * w or dev, dev:transpose(1, 2)) / F.clamp_min(F.full({}, 0, { dtype = m.dtype }) + norm, 0)
  return one and c:reshape({}) or c
end
C.export("cov", function(x, opts) return cov(x, opts, "cov") end)
-- corrcoef(x): the Pearson correlation of the rows, clamped to [-1, 1]
C.export("corrcoef", function(x)
  local c = cov(x, nil, "corrcoef")
  if #c._shape == 0 then return c / c end
  local d = F.diagonal(c):sqrt()
  return (c / d:reshape(-1, 1) / d:reshape(1, -1)):clamp(-1, 1)
end)

-- vander(x (n), N = n, increasing = false) -> (n, N): columns x^(N-1), ..., x^0 (increasing: x^0 first)
C.export("vander", function(x, n, increasing)
  if type(n) == "table" then
    local o = options.check(n, "vander", { N = { "integer", min = 0 }, increasing = "boolean" })
    n, increasing = o.N, o.increasing
  end
  need_tensor("vander", x, "x")
  if #x._shape ~= 1 then errors.raise("vander: x must be 1-D, got " .. S.str(x._shape)) end
  n = n or x._shape[1]
  if type(n) ~= "number" or n < 0 or n ~= math.floor(n) then errors.raise("vander: N must be an integer >= 0") end
  local dt = x.dtype == "bool" and "i64" or x.dtype
  if n == 0 then return F.zeros({ x._shape[1], 0 }, { dtype = dt }) end
  local cols = { F.ones_like(x, { dtype = dt }) }
  for k = 2, n do cols[k] = cols[k - 1] * x:astype(dt) end
  if not increasing then
    local r = {}
    for k = 1, n do r[k] = cols[n + 1 - k] end
    cols = r
  end
  return F.stack(cols, 2)
end, { method = false })

return M
