-- ops/indexing.lua: PyTorch's x[key] and x[key] = v, and index_put(_): a key is a number, an index tensor (1-based,
-- negative from the end), a bool mask, or a Lua list of them (x[{i, j}] is PyTorch's x[i-1, j-1]).
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local Tensor = require("ds.tensor")
local tape = require("ds.tape")
local creation = require("ds.ops.creation") -- the full / arange defs
local F = C.functions

local is_tensor = C.is_tensor

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

local function concat(a, b)
  local out = {}
  for i = 1, #a do out[i] = a[i] end
  for i = 1, #b do out[#out + 1] = b[i] end
  return out
end

local function ones(n) local s = {}; for i = 1, n do s[i] = 1 end; return s end
local function range_list(n) local s = {}; for i = 1, n do s[i] = i end; return s end

-- i64 values 1..n (n may be a symbolic size while tracing)
local function range(n) return D.call(creation.arange, {}, { start = 1, step = 1, length = n, dtype = "i64" }) end

-- the key as a list of entries (numbers and tensors) and its length
local function entries(key, opname)
  if type(key) == "number" or is_tensor(key) then return { key }, 1 end
  if type(key) ~= "table" or getmetatable(key) ~= nil then
    raise("%s: a key must be a number, a tensor or a list of them, got %s", opname, type(key))
  end
  local n = table.maxn(key)
  for k in pairs(key) do
    if type(k) ~= "number" or k ~= math.floor(k) or k < 1 then
      raise("%s: a key table must be a list (x[{i, j}]), got key '%s'", opname, tostring(k))
    end
  end
  for i = 1, n do
    local e = key[i]
    if type(e) == "table" and not is_tensor(e) then
      raise("%s: entry %d of the key is a table; ds has no range keys: use x:narrow(dim, start, length) for a "
        .. "range, or an i64 tensor (ds.tensor({...}, {dtype = 'i64'})) for a list of indices", opname, i)
    elseif type(e) == "number" then
      if e ~= math.floor(e) or e ~= e then raise("%s: entry %d of the key must be an integer, got %s", opname, i, e) end
    elseif not is_tensor(e) then
      raise("%s: entry %d of the key must be a number or a tensor, got %s", opname, i, type(e))
    end
  end
  return key, n
end

-- dims of x a key entry consumes: a mask its own dims, anything else one
local function width(e) return is_tensor(e) and e.dtype == "bool" and #e._shape or 1 end

-- mask e covers dims d.. of y exactly (PyTorch's rule)
local function check_mask(e, y, d, opname)
  if #e._shape == 0 then raise("%s: a 0-d bool key is not supported", opname) end
  for j = 1, #e._shape do
    if not S.same(e._shape[j], y._shape[d + j - 1]) then
      raise("%s: the mask's shape %s does not match the indexed tensor's %s at dim %d", opname, S.str(e._shape),
        S.str(y._shape), d + j - 1)
    end
  end
end

-- y = x with the numbers of the key applied (a view) and adv = { {dim =, index =} } for its tensor entries
local function parse(x, key, opname)
  local list, n = entries(key, opname)
  local y, d, adv = x, 1, {}
  for i = 1, n do
    local e = list[i]
    if d + width(e) - 1 > #y._shape then
      raise("%s: too many indices for a tensor of %d dims %s", opname, #x._shape, S.str(x._shape))
    end
    if type(e) == "number" then
      y = y:select(d, e)
    elseif e.dtype == "bool" then
      check_mask(e, y, d, opname)
      local nz = e:nonzero() -- (nnz, m) 1-based; eager only, as a mask's count is a value
      for j = 1, #e._shape do adv[#adv + 1] = { dim = d + j - 1, index = nz:select(2, j) } end
      d = d + #e._shape
    elseif dtype.is_int[e.dtype] then
      adv[#adv + 1] = { dim = d, index = e.dtype == "i64" and e or e:astype("i64") }
      d = d + 1
    else
      raise("%s: an index tensor must be an integer (i64) or bool tensor, got %s %s", opname, e.dtype, S.str(e._shape))
    end
  end
  return y, adv
end

-- index tensors broadcast together: the expanded list and the common shape
local function broadcast_all(idx, opname)
  local b = {}
  for _, t in ipairs(idx) do b = S.broadcast(b, t._shape, opname) end
  local out = {}
  for j, t in ipairs(idx) do out[j] = t:expand(b) end
  return out, b
end

-- flat 1-based positions over dims of the given sizes from per-dim indices (negative count from the end); an
-- index outside its dim is an error eagerly, and while tracing makes the position 0, which the kernels refuse
local function linear(idx, sizes, dims, opname)
  local flat, valid
  for j, t in ipairs(idx) do
    local n = sizes[j]
    local i = F.where(t:lt(0), t + (n + 1), t)
    local ok = F.logical_and(i:ge(1), i:le(n))
    if rawget(ok, "_c") and not ok:all():item() then
      raise("%s: index %d is out of range for dim %d of size %d (indices are 1-based, negative from the end)", opname,
        t:masked_select(ok:logical_not())[1]:item(), dims[j], n)
    end
    valid = valid and F.logical_and(valid, ok) or ok
    flat = flat and (flat - 1) * n + i or i
  end
  return F.where(valid, flat, 0)
end

-- y indexed by the tensors of adv (PyTorch's advanced indexing): their broadcast shape B replaces the indexed
-- dims (adjacent: a key has no slices, and its numbers were applied first, as PyTorch applies them)
local function take(y, adv, opname)
  local idx = {}
  for j, a in ipairs(adv) do idx[j] = a.index end
  local b
  idx, b = broadcast_all(idx, opname)
  local first, m = adv[1].dim, #adv
  local ys = y._shape
  local before, sizes, after = {}, {}, {}
  for d = 1, #ys do
    local into = d < first and before or d < first + m and sizes or after
    into[#into + 1] = ys[d]
  end
  local dims = {}
  for j, a in ipairs(adv) do dims[j] = a.dim end
  local flat = linear(idx, sizes, dims, opname):reshape({ S.numel(b) })
  local rows = y:reshape(concat(concat(before, { S.numel(sizes) }), after)):index_select(first, flat)
  return rows:reshape(concat(concat(before, b), after))
end

-- x[key] (reads: numbers give views, tensors copies); opname: the caller for errors
local function getitem(x, key, opname)
  opname = opname or "x[key]"
  local y, adv = parse(x, key, opname)
  if #adv == 0 then return y end
  return take(y, adv, opname)
end

-- x with v written (or added: accumulate) at the positions idx gives over x's first #idx dims: idx broadcast
-- together to B, v to (B..., x's remaining dims); the last of repeated positions wins (x:index_put)
local function put(x, idx, v, accumulate, opname)
  local b
  idx, b = broadcast_all(idx, opname)
  local xs, sizes, rest = x._shape, {}, {}
  for d = 1, #xs do
    local into = d <= #idx and sizes or rest
    into[#into + 1] = xs[d]
  end
  local region = concat(b, rest)
  if not S.equal(S.broadcast(region, v._shape, opname), region) then
    raise("%s: a value of shape %s does not broadcast to the indexed shape %s", opname, S.str(v._shape),
      S.str(region))
  end
  local m, n = S.numel(b), S.numel(sizes)
  local flat = linear(idx, sizes, range_list(#idx), opname):reshape({ m })
  local rows = x:reshape(concat({ n }, rest))           -- (n, rest...)
  local vals = v:expand(region):reshape(concat({ m }, rest)) -- (m, rest...)
  local r
  if accumulate then
    r = rows:index_add(1, flat, vals)
  elseif m == 0 then
    r = rows
  else
    -- for each row, the last write to it (0: none)
    local last = F.scatter_reduce(F.zeros({ n }, { dtype = "i64" }), 1, flat, range(m), "amax")
    local hit = last:gt(0):reshape(concat({ n }, ones(#rest)))
    r = F.where(hit, vals:index_select(1, last:clamp(1)), rows)
  end
  return r:reshape(xs)
end

-- the key is one bool mask (alone or as the only entry of a list): the mask, else nil
local function single_mask(key)
  local e = key
  if type(key) == "table" and not is_tensor(key) and table.maxn(key) == 1 then e = key[1] end
  if is_tensor(e) and e.dtype == "bool" then return e end
end

-- v (of x's dtype) broadcasts to the dims of x after a mask of m dims without the mask's own dim: its shape
-- without leading 1s, else nil
local function fits_rest(v, x, m)
  local s, lead = v._shape, 1
  while lead <= #s and s[lead] == 1 do lead = lead + 1 end
  local core = {}
  for i = lead, #s do core[#core + 1] = s[i] end
  local rest = {}
  for d = m + 1, #x._shape do rest[#rest + 1] = x._shape[d] end
  if #core > #rest then return nil end
  local ok, b = pcall(S.broadcast, rest, core, "x[mask] = v")
  if ok and S.equal(b, rest) then return core end
end

-- x with v (of x's dtype) written (or added) at key, as a new tensor
local function assigned(x, key, v, accumulate, opname)
  local mask = not accumulate and single_mask(key)
  if mask then -- where(mask, v, x): no count of the mask's elements, so it traces
    check_mask(mask, x, 1, opname)
    local core = fits_rest(v, x, #mask._shape)
    if core then
      local m = mask:reshape(concat(mask._shape, ones(#x._shape - #mask._shape)))
      return F.where(m, v:reshape(core), x)
    end
  end
  local list, n = entries(key, opname)
  local k = 0
  for i = 1, n do k = k + width(list[i]) end
  if k > #x._shape then raise("%s: too many indices for a tensor of %d dims %s", opname, #x._shape, S.str(x._shape)) end
  if k == 0 then return F.where(D.cast(true, "bool"), v, x) end
  -- the positions key selects, as one index tensor per dim it consumes (read through the key from grids)
  local sizes, coords = {}, {}
  for d = 1, k do sizes[d] = x._shape[d] end
  for d = 1, k do
    local shape = ones(k)
    shape[d] = sizes[d]
    coords[d] = getitem(range(sizes[d]):reshape(shape):expand(sizes), key, opname)
  end
  return put(x, coords, v, accumulate, opname)
end

-- x takes the values (and, with grad, the history) of new(src), src standing for x's value before the write
-- (PyTorch's in-place semantics: views of x see the write; x's earlier users keep the old value's history)
local function write(x, new, v, opname)
  local grad = state.grad_enabled and (tape.requires(x) or tape.requires(v))
  local src = x
  if grad then
    if tape.requires(x) and rawget(x, "_grad_fn") == nil then
      raise("%s: a leaf tensor that requires grad cannot be written in place; wrap the write in ds.no_grad", opname)
    end
    if rawget(x, "_base") then -- a view: copy_ writes it into its base's history (autograd.lua's in-place rule)
      return Tensor.copy_(x, new(x))
    end
    -- the value before the write, holding x's place in the history (the producer's output)
    src = state.trace and x:detach() or x:detach():clone()
    tape.rebase(x, src)
  end
  local r = new(src)
  local prev = state.grad_enabled
  state.grad_enabled = false
  local ok, err = pcall(Tensor.copy_, x, r)
  state.grad_enabled = prev
  if not ok then error(err, 0) end
  if grad then tape.adopt(x, r) end
  return x
end

-- a value for x[key] = v or index_put: a tensor (cast to x's dtype) or a number
local function value_of(x, v, opname)
  if is_tensor(v) then return v.dtype == x.dtype and v or v:astype(x.dtype) end
  if type(v) == "number" or type(v) == "boolean" then return D.cast(v, x.dtype) end
  raise("%s: the value must be a tensor, a number or a boolean, got %s", opname, type(v))
end

-- x[key] = v
local function setitem(x, key, v)
  local opname = "x[key] = v"
  v = value_of(x, v, opname)
  local numbers = type(key) == "number" or type(key) == "table" and not is_tensor(key)
  for i = 1, numbers and type(key) == "table" and table.maxn(key) or 0 do
    numbers = numbers and type(key[i]) == "number"
  end
  if numbers and not state.trace and not (state.grad_enabled and (tape.requires(x) or tape.requires(v))) then
    parse(x, key, opname):copy_(v) -- numbers only: write through the view (copy_ bumps the version)
    return
  end
  write(x, function(src) return assigned(src, key, v, false, opname) end, v, opname)
end

-- the accumulate option of index_put(_), after checking its arguments
local function index_put_args(x, indices, values, opts, opname)
  opts = options.check(opts, opname, { accumulate = "boolean" })
  if type(indices) ~= "table" or is_tensor(indices) then
    raise("%s: indices must be a list of tensors, got %s", opname, is_tensor(indices) and "a tensor" or type(indices))
  end
  for i = 1, table.maxn(indices) do
    if not is_tensor(indices[i]) then raise("%s: index %d must be a tensor, got %s", opname, i, type(indices[i])) end
  end
  if values.dtype ~= x.dtype then
    raise("%s: values of dtype %s cannot be put into a %s tensor (convert them with :astype)", opname, values.dtype,
      x.dtype)
  end
  return opts.accumulate == true
end
-- index_put(x, indices, values, {accumulate = false}): x with values written (or added) where the list of index
-- tensors or masks for x's leading dims points (torch.index_put; the last of repeated indices wins)
C.export("index_put", function(x, indices, values, opts)
  local acc = index_put_args(x, indices, values, opts, "index_put")
  return assigned(x, indices, values, acc, "index_put")
end, { args = { "tensor", "table", "tensor", "table?" } })
-- index_put_(x, indices, values, {accumulate = false}): index_put written into x (views of x see it)
C.export("index_put_", function(x, indices, values, opts)
  local acc = index_put_args(x, indices, values, opts, "index_put_")
  return write(x, function(src) return assigned(src, indices, values, acc, "index_put_") end, values, "index_put_")
end, { args = { "tensor", "table", "tensor", "table?" } })

-- x[k] and x[k] = v for number and table keys (tensor.lua's metatable calls them)
Tensor._define("ds.ops.indexing", { _getitem = getitem, _setitem = setitem })
