-- tensor.lua: the Tensor type: a Lua table around a C ds_tensor (or an abstract one while tracing).
local dsffi = require("ds.ffi")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local S = require("ds.shape")
local ffi, C = dsffi.ffi, dsffi.C

-- The class is closed: a method is declared either below or, when it needs a module above this one, by that module
-- through Tensor._define as it loads; ds/init.lua freezes the class once every module is loaded.
local Tensor = {}          -- methods
local mt = { __metatable = "ds.Tensor" }
Tensor._mt = mt
-- Abstract tensors (shape and dtype, no storage: the tracer's, trace.lua) have a metatable of their own: the same class
-- and the same metamethods (a metamethod declared through Tensor._define goes into both), except < and <=, which say
-- the values exist only when the graph runs (below). Tracing swaps nothing in the class or in either metatable.
local abstract_mt = { __metatable = "ds.Tensor" }
Tensor._abstract_mt = abstract_mt

local shape_buf = ffi.new("int64_t[8]")
local stride_buf = ffi.new("int64_t[8]")
local free = C.ds_tensor_free

-- C memory is invisible to the Lua GC, so ds collects by C bytes: once live bytes pass 64 MiB, a collection runs
-- whenever the bytes allocated since the last one reach 64 MiB or half of what it left live (dead tensors then hold
-- at most that much); autograd reports the bytes of the graphs it drops (Tensor._graph_dropped), collected at 32 MiB.
local MIN_LIVE, GRAPH_BYTES = 64 * 2 ^ 20, 32 * 2 ^ 20
local allocated, dropped, allowance = 0, 0, MIN_LIVE
local function collect()
  collectgarbage("collect")
  allocated, dropped = 0, 0
  allowance = math.max(MIN_LIVE, tonumber(C.ds_mem_live_bytes()) / 2)
end
local function memory_pressure(bytes)
  allocated = allocated + bytes
  if allocated >= allowance and tonumber(C.ds_mem_live_bytes()) >= MIN_LIVE then collect() end
end
function Tensor._graph_dropped(bytes)
  dropped = dropped + bytes
  if dropped >= GRAPH_BYTES then collect() end
end
-- the bytes of C storage x holds alone (0 for views and small tensors, which are Lua GC memory)
function Tensor._c_bytes(x)
  if rawget(x, "_h") or rawget(x, "_base") or not rawget(x, "_c") then return 0 end
  return S.numel(x._shape) * dtype.size[x.dtype]
end

-- Small tensors live wholly in Lua GC memory (struct + storage + data in one allocation), so they
-- need no finalizer (ffi.gc costs ~0.4 us per object); large ones use the C caching allocator.
-- DS_ALLOC=c forces C allocation for all (AddressSanitizer only sees C memory).
local SMALL_BYTES = os.getenv("DS_ALLOC") == "c" and -1 or 65536
ffi.cdef [[ typedef struct { ds_tensor t; ds_storage s; double d[?]; } ds_small_tensor; ]]
local small_ct = ffi.typeof("ds_small_tensor")
local tensor_ptr = ffi.typeof("ds_tensor*")
local view_ct = ffi.typeof("ds_tensor")

local function wrap(c, shape, dt)
  local t = setmetatable({ _c = ffi.gc(c, free), _shape = shape, dtype = dt }, mt)
  return t -- not a tail call: LuaJIT counts tail calls against a trace's unroll limit (15)
end
Tensor._wrap = wrap

-- check size i of shape, store it in shape_buf; returns numel * size
local function put_dim(shape, i, numel, opname)
  local d = shape[i]
  if type(d) ~= "number" or d < 0 or d ~= math.floor(d) then
    errors.raise(string.format("%s: invalid size %s in dim %d", opname or "empty", tostring(d), i))
  end
  shape_buf[i - 1] = d
  return numel * d
end

-- A new contiguous tensor; shape is a Lua array of non-negative integers (kept, not copied).
-- small_bytes (optional): keep it in Lua GC memory only up to this many bytes (below the default; compile.lua's
-- outputs).
local function empty(dt, shape, opname, small_bytes)
  local n, numel = #shape, 1
  if n > S.MAXDIM then S.check(shape, opname or "empty") end
  -- unrolled: LuaJIT unrolls at most 15 inner-loop entries per trace, and a chain of ops is one trace
  if n >= 1 then numel = put_dim(shape, 1, numel, opname)
  if n >= 2 then numel = put_dim(shape, 2, numel, opname)
  if n >= 3 then numel = put_dim(shape, 3, numel, opname)
  if n >= 4 then numel = put_dim(shape, 4, numel, opname)
  if n >= 5 then numel = put_dim(shape, 5, numel, opname)
  if n >= 6 then numel = put_dim(shape, 6, numel, opname)
  if n >= 7 then numel = put_dim(shape, 7, numel, opname)
  if n >= 8 then numel = put_dim(shape, 8, numel, opname) end end end end end end end end
  if numel == 0 or numel > S.MAX_EXTENT then S.check(shape, opname or "empty") end -- strides must not overflow
  local bytes = numel * dtype.size[dt]
  if bytes <= SMALL_BYTES and (not small_bytes or bytes <= small_bytes) then
    local h = small_ct(bytes / 8 + 1)
    if C.ds_tensor_init(h.t, h.s, h.d, bytes, dtype.code[dt], n, shape_buf) ~= 0 then dsffi.fail(opname or "empty") end
    local t = setmetatable({ _c = ffi.cast(tensor_ptr, h), _h = h, _shape = shape, dtype = dt }, mt)
    return t
  end
  local c = C.ds_tensor_new(dtype.code[dt], n, shape_buf)
  if c == nil then
    dsffi.fail(string.format("%s: cannot allocate %s tensor of shape %s", opname or "empty", dt, S.str(shape)))
  end
  memory_pressure(bytes)
  local t = wrap(c, shape, dt)
  return t
end
Tensor._empty = empty

-- A view sharing x's storage (shape/strides Lua arrays, offset in elements from the storage start).
-- The view's struct is GC memory; _base keeps the tensor that owns the storage alive.
function Tensor._view(x, shape, strides, offset, opname)
  S.check(shape, opname or "view")
  local n = #shape
  if #strides ~= n then errors.raise(string.format("%s: %d strides for %d dims", opname or "view", #strides, n)) end
  for i = 1, n do shape_buf[i - 1] = shape[i]; stride_buf[i - 1] = strides[i] end
  if x._c == nil then   -- an abstract (traced) tensor: views of it are ops (view, narrow, ...), not storage views
    errors.raise(string.format("%s: a storage view of a traced tensor (it has no storage)", opname or "view"))
  end
  local v = view_ct()
  dsffi.check(C.ds_tensor_view_fill(v, x._c, n, shape_buf, stride_buf, offset), opname or "view")
  local t = setmetatable({ _c = ffi.cast(tensor_ptr, v), _h = v, _base = rawget(x, "_base") or x, _shape = shape,
    dtype = x.dtype }, mt)
  return t
end

function Tensor.is_tensor(x) return getmetatable(x) == "ds.Tensor" end

local getters = {}
function getters.shape(x) local s = {}; for i = 1, #x._shape do s[i] = x._shape[i] end; return s end
function getters.requires_grad() return false end
function getters.ndim(x) return #x._shape end
function getters.is_leaf(x) return rawget(x, "_grad_fn") == nil end
function getters.grad_fn(x) return rawget(x, "_grad_fn") end
-- x._version: the in-place writes into x's storage so far, shared by its views (PyTorch's version counter; the
-- storage owner keeps it in its _version field once written)
function getters._version(x) return rawget(rawget(x, "_base") or x, "_version") or 0 end
function getters.T(x) return x:t() end
-- x.mT: the last two dims swapped (batches of matrices)
function getters.mT(x)
  if #x._shape < 2 then errors.raise("x.mT: expects at least 2 dims, got " .. S.str(x._shape)) end
  return x:transpose(-2, -1)
end

mt.__index = function(x, k)
  local m = Tensor[k]
  if m ~= nil then return m end
  if type(k) == "number" then return x:select(1, k) end
  if type(k) == "table" then return Tensor._getitem(x, k) end -- x[t], x[{i, j}] (ops/indexing.lua)
  local g = getters[k]
  if g then return g(x) end
  return nil
end

-- x[k] = v for number and table keys (ops/indexing.lua); string keys are fields
mt.__newindex = function(x, k, v)
  if type(k) == "number" or type(k) == "table" then return Tensor._setitem(x, k, v) end
  if type(k) ~= "string" then
    errors.raise(string.format("x[key] = v: a key must be a number, a tensor or a list of them, got %s", type(k)))
  end
  if k == "grad" and v ~= nil and not Tensor.is_tensor(v) then
    errors.raise("grad must be a tensor or nil")
  end
  rawset(x, k, v)
end
abstract_mt.__index, abstract_mt.__newindex = mt.__index, mt.__newindex

local function abstract_read(x, what)
  errors.raise(string.format("%s: cannot read the value of an abstract tensor while tracing (%s); "
    .. "use ds.cond / ds.while_loop for data-dependent control flow", what, errors.user_site()))
end
Tensor._abstract_read = abstract_read

-- Lua's < and <= must give booleans; an abstract tensor has no values to compare (a concrete one's message is in
-- ops/init.lua). Comparing an abstract tensor with a concrete one is Lua's own "attempt to compare two table values",
-- which the tracer's error handler explains the same way (trace.lua, run_traced).
local function abstract_compare(what)
  return function()
    errors.raise(string.format("%s: a comparison that must give a Lua boolean cannot read abstract tensors while "
      .. "tracing (%s); compare with x:lt(y) / x:le(y) (bool tensors) and branch with ds.cond / ds.while_loop",
      what, errors.user_site()))
  end
end
abstract_mt.__lt = abstract_compare("tensor < tensor")
abstract_mt.__le = abstract_compare("tensor <= tensor")
local ABSTRACT_OWN = { __lt = true, __le = true } -- the metamethods abstract tensors do not share
-- the C tensor of x; an abstract tensor (while tracing) has none
local function concrete(x, what)
  local c = rawget(x, "_c")
  if c == nil then abstract_read(x, what) end
  return c
end

-- ---- basic queries ----
function Tensor.strides(x)
  local s = {}
  local c = concrete(x, "strides")
  for i = 1, #x._shape do s[i] = tonumber(c.strides[i - 1]) end
  return s
end
function Tensor.stride(x, d)
  if d == nil then return x:strides() end   -- all strides, as PyTorch's x.stride()
  return x:strides()[S.dim(d, #x._shape, "stride")]
end
function Tensor.storage_offset(x) return tonumber(concrete(x, "storage_offset").offset) end
function Tensor.dim(x) return #x._shape end
function Tensor.nDimension(x) return #x._shape end
function Tensor.size(x, d)
  if d == nil then return x.shape end
  return x._shape[S.dim(d, #x._shape, "size")]
end
function Tensor.numel(x)
  local n = 1
  for i = 1, #x._shape do n = n * x._shape[i] end
  return n
end
function Tensor.nelement(x) return x:numel() end
function Tensor.is_contiguous(x) return C.ds_tensor_is_contiguous(concrete(x, "is_contiguous")) ~= 0 end
function Tensor.data_ptr(x) return concrete(x, "data_ptr").data end
function Tensor.element_size(x) return dtype.size[x.dtype] end
function Tensor.is_floating_point(x) return dtype.is_float[x.dtype] == true end

-- ---- memory overlap (PyTorch's rules for writes) ----
-- some element is stored at the same place as another (a stride 0 over a size > 1: an expand)
function Tensor._self_overlapping(x)
  local c, shape = rawget(x, "_c"), x._shape
  if c == nil then return false end
  for i = 1, #shape do
    if shape[i] > 1 and c.strides[i - 1] == 0 then return true end
  end
  return false
end

-- a permutation of a contiguous layout (no gaps, no shared elements)
local function dense(x)
  local c, shape, dims = x._c, x._shape, {}
  for i = 1, #shape do if shape[i] ~= 1 then dims[#dims + 1] = i end end
  table.sort(dims, function(a, b) return c.strides[a - 1] < c.strides[b - 1] end)
  local expected = 1
  for _, d in ipairs(dims) do
    if c.strides[d - 1] ~= expected then return false end
    expected = expected * shape[d]
  end
  return true
end

-- a and b share memory without being the same view (PyTorch's partial overlap; layouts it cannot
-- decide, that are not dense, count as no overlap as there)
function Tensor._partial_overlap(a, b)
  local ca, cb = rawget(a, "_c"), rawget(b, "_c")
  if ca == nil or cb == nil or ca.storage ~= cb.storage or a:numel() == 0 or b:numel() == 0 then return false end
  if not dense(a) or not dense(b) then return false end
  local a0, b0 = ffi.cast("char*", ca.data), ffi.cast("char*", cb.data)
  local a1, b1 = a0 + a:numel() * dtype.size[a.dtype], b0 + b:numel() * dtype.size[b.dtype]
  if a0 == b0 and a1 == b1 then
    for i = 1, #a._shape do if ca.strides[i - 1] ~= cb.strides[i - 1] then return true end end
    return #a._shape ~= #b._shape
  end
  return a0 < b1 and b0 < a1
end

-- all values as a flat Lua array (f64-exact; i64 beyond 2^53 rounds)
function Tensor._flat(x)
  local n = x:numel()
  local buf = ffi.new("double[?]", n > 0 and n or 1)
  C.ds_read_flat(concrete(x, "_flat"), buf)
  local out = {}
  for i = 1, n do out[i] = buf[i - 1] end
  return out
end


-- the single value of a one-element tensor, as a Lua number (booleans for bool tensors)
function Tensor.item(x)
  if not x._c then abstract_read(x, "item") end
  if x:numel() ~= 1 then
    errors.raise(string.format("item: tensor of shape %s has %d elements, item needs exactly 1",
      S.str(x._shape), x:numel()))
  end
  if x.dtype == "i64" then
    local b = ffi.new("int64_t[1]"); C.ds_read_flat_i64(x._c, b); return tonumber(b[0])
  end
  local b = ffi.new("double[1]"); C.ds_read_flat(x._c, b)
  if x.dtype == "bool" then return b[0] ~= 0 end
  return b[0]
end

-- nested Lua tables of numbers (a number for a 0-d tensor)
function Tensor.totable(x)
  if not x._c then abstract_read(x, "totable") end
  local flat = x:_flat()
  if x.dtype == "bool" then for i = 1, #flat do flat[i] = flat[i] ~= 0 end end
  local shape = x._shape
  if #shape == 0 then return flat[1] end
  local pos = 0
  local function build(d)
    local t = {}
    for i = 1, shape[d] do
      if d == #shape then pos = pos + 1; t[i] = flat[pos] else t[i] = build(d + 1) end
    end
    return t
  end
  return build(1)
end

-- ---- declaring methods (docs/INTERNALS.md, "The Tensor class") ----
-- Tensor._define(module, methods [, replace]): module (its require name) declares methods, a table name -> function;
-- names starting with "__" are metamethods of tensors (operators, __tostring). A name declared twice is an error
-- naming both modules, unless replace is true: then every name must exist already (a faster twin of the same method).
-- Tensor._owner[name] is the module that declared name last. Tensor._freeze() (ds/init.lua, once) closes the class:
-- after it, declaring a method or writing a new key into Tensor or the tensors' metatable is an error naming the key.
local owner, frozen = {}, false
Tensor._owner = owner
local function closed(where)
  return function(_, k)
    errors.raise(string.format("Tensor: the class is closed: cannot add '%s' to %s after require(\"ds\") "
      .. "(methods are declared in lua/ds/tensor.lua or through Tensor._define while ds loads; docs/INTERNALS.md)",
      tostring(k), where))
  end
end
function Tensor._define(module, methods, replace)
  if frozen then closed("the Tensor class")(Tensor, next(methods)) end
  for name, f in pairs(methods) do
    if type(name) ~= "string" or type(f) ~= "function" then
      errors.raise(string.format("Tensor._define: %s: a method is a name and a function, got %s = %s", module,
        tostring(name), type(f)))
    end
    local into = name:sub(1, 2) == "__" and mt or Tensor
    local had = rawget(into, name) ~= nil
    if had and not replace then
      errors.raise(string.format("Tensor._define: %s declares '%s', already declared by %s", module, name, owner[name]))
    elseif replace and not had then
      errors.raise(string.format("Tensor._define: %s replaces '%s', which no module declared", module, name))
    end
    owner[name] = module
    rawset(into, name, f)
    if into == mt and not ABSTRACT_OWN[name] then rawset(abstract_mt, name, f) end
  end
end
function Tensor._freeze()
  frozen = true
  setmetatable(Tensor, { __newindex = closed("the Tensor class") })
  setmetatable(mt, { __newindex = closed("the tensors' metatable") })
  setmetatable(abstract_mt, { __newindex = closed("the abstract tensors' metatable") })
end

-- Every method needs a tensor as self (x:m() or Tensor.m(x)): ds.Tensor.is_contiguous({}) is an error
-- naming the method, not a NULL dereference in C. Wraps each method not yet wrapped and not in skip (a
-- set of functions that check their operands themselves); returns { [old function] = wrapped }.
local wrapped = setmetatable({}, { __mode = "k" })
function Tensor._require_self(skip)
  local map = {}
  for name, f in pairs(Tensor) do
    if type(f) == "function" and name:sub(1, 1) ~= "_" and name ~= "is_tensor" and not wrapped[f] and
      not (skip and skip[f]) then
      local g = function(x, ...)
        if getmetatable(x) ~= "ds.Tensor" then
          errors.raise(string.format("%s: expects a tensor as self (x:%s(...)), got %s", name, name, type(x)))
        end
        return f(x, ...)
      end
      wrapped[g] = true
      map[f] = g
      Tensor[name] = g
    end
  end
  return map
end
Tensor._require_self()
for name in pairs(Tensor) do owner[name] = "ds.tensor" end
for name in pairs(mt) do owner[name] = "ds.tensor" end

return Tensor
