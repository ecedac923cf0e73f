-- dispatch.lua: the op registry and the one call path every op takes (eager, autograd, trace).
-- M.call(def, inputs, attrs, out): attrs -> prepare -> promote -> infer -> trace record or kernel -> tape.
-- Its eager shortcuts, M.fast_binary, M.fast_unary and M.fast_matmul (x + y, x:relu() on tensors of one dtype
-- and shape, x @ W; no grad, not tracing), call the same kernel directly and fall back to M.call for everything
-- else.
local dsffi = require("ds.ffi")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local state = require("ds.state")
local Tensor = require("ds.tensor")
local S = require("ds.shape")
local tape = require("ds.tape")
local ffi, C = dsffi.ffi, dsffi.C

local M = { list = {}, by_name = {} }

local attr_buf_size = 256
local attr_buf = ffi.new("double[?]", attr_buf_size)
local tensor_buf = ffi.new("ds_tensor*[16]")
local is_tensor = Tensor.is_tensor

-- ---- definitions ----
local ATTR_TYPES = { int = true, float = true, bool = true, dim = true, dims = true, ints = true,
                     floats = true, enum = true, string = true, dtype = true, any = true }

function M.define(def)
  assert(type(def.name) == "string", "op needs a name")
  assert(not M.by_name[def.name], "op defined twice: " .. def.name)
  assert(def.kind, def.name .. ": op needs a kind")
  def.attrs = def.attrs or {}
  def.attr_index = {}
  for i, a in ipairs(def.attrs) do
    assert(ATTR_TYPES[a[2]], def.name .. ": unknown attr type " .. tostring(a[2]))
    def.attr_index[a[1]] = i
  end
  def.noutputs = def.noutputs or 1
  def._kernels = {}
  M.list[#M.list + 1] = def
  M.by_name[def.name] = def
  return def
end

-- the ops defined from position first of the op list on, by name: an op family takes first = #D.list + 1 after its
-- requires and returns D.defined_since(first), so that a caller requires the family and reads its defs
function M.defined_since(first)
  local out = {}
  for i = first, #M.list do out[M.list[i].name] = M.list[i] end
  return out
end

-- the C kernel name for a dtype, or nil if the op has no kernel
function M.kernel_name(def, dt)
  if not def.kernel then return nil end
  return (def.kernel:gsub("%%s", dt))
end

function M.kernel(def, dt)
  local k = def._kernels[dt]
  if k then return k end
  if not def.dtypes or not def.dtypes[dt] then
    local ok = {}
    for d in pairs(def.dtypes or {}) do ok[#ok + 1] = d end
    table.sort(ok)
    errors.raise(string.format("%s: dtype %s not supported (supported: %s)", def.name, dt, table.concat(ok, ", ")))
  end
  local p = C.ds_kernel_find(M.kernel_name(def, dt))
  if p == nil then errors.raise(def.name .. ": kernel " .. M.kernel_name(def, dt) .. " missing from libds") end
  k = p
  def._kernels[dt] = k
  return k
end

-- ---- attrs ----
local function attr_error(def, name, fmt, ...)
  errors.raise(string.format("%s: option '%s' ", def.name, name) .. string.format(fmt, ...))
end

-- a symbolic size (ds.sym), allowed where numbers are when symbolic: tracing, or a loaded graph
local function is_sym(v, symbolic) return symbolic and getmetatable(v) == "ds.sym" end

-- a number that is an integer, or a symbolic size
local function integer_ok(v, symbolic)
  if type(v) == "number" then return v == math.floor(v) and v > -math.huge and v < math.huge end
  return is_sym(v, symbolic)
end

-- check one attr value against its schema entry { name, type, default, enum values, min =, max = }
local function check_attr(def, a, v, symbolic)
  local name, ty = a[1], a[2]
  local tv = type(v)
  local ok = (ty == "int" or ty == "dim" or ty == "float") and tv == "number"
    or ty == "bool" and tv == "boolean"
    or (ty == "dims" or ty == "ints" or ty == "floats") and tv == "table" and getmetatable(v) == nil
    or (ty == "enum" or ty == "string" or ty == "dtype") and tv == "string"
    or ty == "any"
  if not ok and (ty == "int" or ty == "dim" or ty == "float") and is_sym(v, symbolic) then ok = true end
  if not ok then attr_error(def, name, "must be %s, got %s", ty, tv) end
  if (ty == "int" or ty == "dim") and not integer_ok(v, symbolic) then
    attr_error(def, name, "must be an integer, got %s", tostring(v))
  end
  if ty == "dims" or ty == "ints" or ty == "floats" then
    local n = 0
    for _ in pairs(v) do n = n + 1 end
    if n ~= #v then attr_error(def, name, "must be a list (keys 1..n)") end
    for i = 1, n do
      local e = v[i]
      if ty == "floats" and type(e) ~= "number" or ty ~= "floats" and not integer_ok(e, symbolic) then
        attr_error(def, name, "element %d must be %s, got %s", i, ty == "floats" and "a number" or "an integer",
          tostring(e))
      end
    end
  end
  if ty == "dtype" and not dtype.normalize(v) then attr_error(def, name, "is an unknown dtype '%s'", v) end
  if ty == "enum" then
    local found = false
    for _, e in ipairs(a[4]) do if e == v then found = true end end
    if not found then attr_error(def, name, "must be one of %s, got '%s'", table.concat(a[4], ", "), v) end
  end
  if tv == "number" and (a.min and not (v >= a.min) or a.max and not (v <= a.max)) then
    attr_error(def, name, "must be in [%s, %s], got %s", tostring(a.min or -math.huge), tostring(a.max or math.huge),
      tostring(v))
  end
end
-- Fill defaults and check names/types; returns a fresh table (never the caller's).
-- opts.symbolic: int/dim values may be symbolic dims (ds.sym), as they may while tracing (a graph file's sizes)
local NO_ATTRS = setmetatable({},
  { __newindex = function() error("internal: attrs of an op without attrs are read-only", 2) end })
function M.attrs(def, given, opts)
  if given == nil and #def.attrs == 0 then return NO_ATTRS end
  local out = {}
  if given then
    for k, v in pairs(given) do
      if not def.attr_index[k] then errors.raise(string.format("%s: unknown option '%s'", def.name, tostring(k))) end
      out[k] = v
    end
  end
  for _, a in ipairs(def.attrs) do
    local name, ty, default = a[1], a[2], a[3]
    local v = out[name]
    if v == nil then v = default; out[name] = v end
    if v ~= nil then check_attr(def, a, v, state.trace ~= nil or opts ~= nil and opts.symbolic == true) end
  end
  return out
end

-- Pack attrs into numbers for the C kernel: dims become 0-based, lists are count-prefixed.
-- (put is not a closure inside pack: creating one per call stops LuaJIT from compiling the call path)
local n = 0
local function put(v)
  if n >= attr_buf_size then
    attr_buf_size = attr_buf_size * 2
    local nb = ffi.new("double[?]", attr_buf_size)
    ffi.copy(nb, attr_buf, n * 8)
    attr_buf = nb
  end
  attr_buf[n] = v; n = n + 1
end
function M.pack(def, attrs)
  if attrs == NO_ATTRS then return attr_buf, 0 end
  local vals = def.pack and def.pack(attrs) or nil
  n = 0
  if vals then
    for i = 1, #vals do put(vals[i]) end
    return attr_buf, n
  end
  for _, a in ipairs(def.attrs) do
    local v, ty = attrs[a[1]], a[2]
    if ty == "int" or ty == "float" then put(v or 0)
    elseif ty == "dim" then put((v or 1) - 1)
    elseif ty == "bool" then put(v and 1 or 0)
    elseif ty == "dims" then put(#v); for i = 1, #v do put(v[i] - 1) end
    elseif ty == "ints" or ty == "floats" then put(#v); for i = 1, #v do put(v[i]) end
    elseif ty == "enum" then
      for i, e in ipairs(a[4]) do if e == v then put(i - 1) end end
    end
  end
  return attr_buf, n
end

-- ---- inputs ----
-- A Lua number operand becomes a 0-d constant tensor of the given dtype.
function M.scalar(v, dt)
  -- a symbolic dim (while tracing) is a 0-d node whose value is known when the graph runs
  if type(v) == "table" and state.trace then
    return M.call(M.by_name.full, {}, { shape = {}, value = v, dtype = dt })
  end
  local t = Tensor._empty(dt, {}, "scalar")
  C.ds_write_flat(t._c, ffi.new("double[1]", type(v) == "boolean" and (v and 1 or 0) or v))
  rawset(t, "_const", v)
  return t
end

-- cast a tensor (or number) to dtype dt
function M.cast(x, dt)
  if not is_tensor(x) then return M.scalar(x, dt) end
  if x.dtype == dt then return x end
  return M.call(M.by_name.astype, { x }, { dtype = dt })
end

-- ---- graphs: one node checked by the same schema, without running it ----
-- Validate a node of a graph that was not built through M.call (a loaded file): the op's arity, its
-- attrs against the schema (unknown keys, types, ranges), dim attrs already normalized (1..ndim of
-- input 1), each input a known dtype and a valid shape, then shape inference and the output shapes.
--   def: an op table entry; inputs: array of { dtype = "f32", _shape = {...} }; given: the attrs table.
-- Returns attrs (defaults filled) and metas (array of { shape =, dtype = }); raises "op: message".
-- Control ops (def.run) are checked up to their attrs (and def.check_attrs(attrs, ninputs), for attrs of
-- type "any"): their outputs come from their sub-graphs.
function M.validate(def, inputs, given)
  if type(given) ~= "table" then errors.raise(def.name .. ": attrs must be a table, got " .. type(given)) end
  if not def.variadic and def.ninputs and not def.run and #inputs ~= def.ninputs then
    errors.raise(string.format("%s: %d inputs given, the op takes %d", def.name, #inputs, def.ninputs))
  end
  for i = 1, #inputs do
    local x = inputs[i]
    if type(x) ~= "table" or not dtype.code[x.dtype] then
      errors.raise(string.format("%s: input %d has no known dtype", def.name, i))
    end
    S.check(x._shape, def.name)
  end
  local attrs = M.attrs(def, given, { symbolic = true }) -- a graph's sizes may be symbolic dims
  local ndim = inputs[1] and #inputs[1]._shape
  for _, a in ipairs(def.attrs) do
    local v, ty = attrs[a[1]], a[2]
    local list = ty == "dims" and v or ty == "dim" and { v } or {}
    for _, d in ipairs(ndim and list or {}) do
      local hi = math.max(ndim, 1) -- a 0-d tensor has the one dim 1, as S.dim says
      if type(d) == "number" and (d < 1 or d > hi) then
        errors.raise(string.format("%s: option '%s' dim %d out of range for a %d-d input (1..%d)", def.name, a[1], d,
          ndim, hi))
      end
    end
  end
  if def.check_attrs then def.check_attrs(attrs, #inputs) end
  if def.run then return attrs, nil end
  local ok, metas = pcall(def.infer, inputs, attrs, def)
  if not ok then
    local msg = tostring(metas):gsub("^[^:]*:%d+: ", "")
    errors.raise(msg:sub(1, #def.name + 2) == def.name .. ": " and msg or def.name .. ": " .. msg)
  end
  if type(metas) ~= "table" then errors.raise(def.name .. ": shape inference gave no outputs") end
  if metas.shape then metas = { metas } end
  for i = 1, #metas do S.check(metas[i].shape, def.name) end
  return attrs, metas
end

-- ---- the call path ----
-- Run an already-normalized op eagerly: allocate outputs (or use out), call the kernel.
function M.run_kernel(def, inputs, attrs, metas, out)
  local outputs = {}
  if def.view then
    outputs[1] = Tensor._view(def.view(inputs[1], attrs, metas[1]))
    return outputs
  end
  for i = 1, def.noutputs do
    outputs[i] = (i == 1 and out) or Tensor._empty(metas[i].dtype, metas[i].shape, def.name)
  end
  local kdt = def.kernel_dtype and def.kernel_dtype(inputs, outputs, attrs) or (inputs[1] and inputs[1].dtype)
    or outputs[1].dtype
  local k = M.kernel(def, kdt)
  local nt = def.noutputs + #inputs
  local tb = tensor_buf
  if nt > 16 then tb = ffi.new("ds_tensor*[?]", nt) end
  for i = 1, def.noutputs do tb[i - 1] = outputs[i]._c end
  for i = 1, #inputs do tb[def.noutputs + i - 1] = inputs[i]._c end
  local ab = M.pack(def, attrs)
  local rc = k(tb, ab)
  for i = 0, nt - 1 do tb[i] = nil end -- no slot keeps a tensor the GC may collect
  dsffi.check(rc, def.name)
  return outputs
end

-- every tensor input the op table says the op takes is there (a missing one is nil in inputs)
local function check_arity(def, inputs)
  local nin = def.ninputs
  if def.variadic or not nin then return end
  for i = 1, nin do
    if inputs[i] == nil then
      errors.raise(string.format("%s: argument %d is missing (the op takes %d tensor inputs)", def.name, i, nin))
    end
  end
  if inputs[nin + 1] ~= nil then
    errors.raise(string.format("%s: %d tensor inputs given, the op takes %d", def.name, #inputs, nin))
  end
end

-- output shapes: the dim limit is cheap to check on every call; the full check (sizes, extent) runs
-- where a shape is made (Tensor._empty, Tensor._view) and on every traced shape
local function check_shapes(def, metas)
  for i = 1, #metas do
    local s = metas[i].shape
    if #s > S.MAXDIM or state.trace then S.check(s, def.name) end
  end
end

-- an in-place write may not land on one element twice, nor on memory an input reads partly (PyTorch's rules)
-- (def.inplace_name: the method that writes in place with this op, when not name_: copy_, fill_)
local function check_overlap(def, inputs, out)
  local name = def.inplace_name or def.name .. "_"
  if Tensor._self_overlapping(out) then
    errors.raise(string.format("%s: the tensor written in place has elements sharing memory (an expand); "
      .. "clone it first", name))
  end
  for i = 1, #inputs do
    if Tensor._partial_overlap(out, inputs[i]) then
      errors.raise(string.format("%s: input %d partly overlaps the tensor written in place; clone it first", name, i))
    end
  end
end

local function any_requires(inputs)
  for i = 1, #inputs do if rawget(inputs[i], "requires_grad") then return true end end
  return false
end

-- attrs normalized, prepare and promote run, every input a tensor: returns inputs, attrs
local function prepare_inputs(def, inputs, attrs)
  attrs = M.attrs(def, attrs)
  if def.prepare then inputs = def.prepare(inputs, attrs) or inputs end
  if def.promote then
    for i = 1, #inputs do -- numbers become constants in promote; anything else is a user error
      local x = inputs[i]
      if type(x) ~= "number" and type(x) ~= "boolean" and not is_tensor(x) and getmetatable(x) ~= "ds.sym" then
        errors.raise(string.format("%s: argument %d must be a tensor or a number, got %s", def.name, i, type(x)))
      end
    end
    inputs = def.promote(inputs, attrs)
  end
  for i = 1, #inputs do
    if not is_tensor(inputs[i]) then
      errors.raise(string.format("%s: argument %d must be a tensor, got %s", def.name, i, type(inputs[i])))
    end
  end
  return inputs, attrs
end

-- ---- the storage-only dtypes (bf16, f16, i8): ops without a kernel for them compute in dtype.compute ----
-- the first input of such a dtype def has no kernel for, else such a dtype attr (randn, sum's dtype option), and
-- its compute dtype (f32 for bf16/f16, i32 for i8); views run no kernel (a lifted view would be a copy); an op
-- with lowp_inputs (linear_int8's i8 weight) reads them itself
local function lowp_input(def, inputs, attrs)
  if not def.dtypes or def.view or def.lowp_inputs then return nil end   -- lowp_inputs: the op takes them as is
  for i = 1, #inputs do
    local dt = inputs[i].dtype
    if dtype.compute[dt] and not def.dtypes[dt] then return dt, dtype.compute[dt] end
  end
  local dt = def.attr_index.dtype and attrs.dtype
  if dtype.compute[dt] and not def.dtypes[dt] then return dt, dtype.compute[dt] end
end

-- PyTorch's CPU kernels for bf16/f16: inputs of dtype low cast up, the op in dtype up, its outputs of dtype
-- up rounded back to low (the casts are ops: traced and differentiated like any other); in place: the
-- result is copied into out
local function call_lifted(def, inputs, attrs, out, low, up)
  local lifted = {}
  for i = 1, #inputs do lifted[i] = inputs[i].dtype == low and M.cast(inputs[i], up) or inputs[i] end
  if attrs.dtype == low then
    local a = {}
    for k, v in pairs(attrs) do a[k] = v end
    a.dtype, attrs = up, a
  end
  local results = { M.call(def, lifted, attrs, nil, true) }
  for i = 1, def.noutputs do
    if is_tensor(results[i]) and results[i].dtype == up then results[i] = M.cast(results[i], low) end
  end
  if out then return M.call(M.by_name.contiguous, { results[1] }, {}, out) end
  return unpack(results, 1, def.noutputs)
end

-- inputs: array of tensors/numbers; attrs: user table or nil; out: tensor for in-place/out= forms;
-- prepared: inputs and attrs have been through prepare_inputs (call_lifted)
function M.call(def, inputs, attrs, out, prepared)
  check_arity(def, inputs)
  if not prepared then
    inputs, attrs = prepare_inputs(def, inputs, attrs)
    local low, up = lowp_input(def, inputs, attrs)
    if low then return call_lifted(def, inputs, attrs, out, low, up) end
  end
  local metas = def.infer(inputs, attrs, def)
  if metas.shape then metas = { metas } end
  check_shapes(def, metas)
  if out ~= nil then
    if not is_tensor(out) then
      errors.raise(string.format("%s: expects a tensor as self, got %s", def.inplace_name or def.name .. "_",
        type(out)))
    end
    check_overlap(def, inputs, out)
    local m = metas[1]
    if out.dtype ~= m.dtype then
      errors.raise(string.format("%s_: result dtype %s cannot be written into a %s tensor", def.name, m.dtype,
        out.dtype))
    end
    if not S.equal(out._shape, m.shape) then
      errors.raise(string.format("%s_: result shape %s does not match the in-place tensor's %s", def.name,
        S.str(m.shape), S.str(out._shape)))
    end
  end
  if out and state.grad_enabled and (rawget(out, "requires_grad") or def.backward and any_requires(inputs)) then
    return tape.inplace(def, inputs, attrs, metas, out) -- autograd.lua: the write rebases out's history
  end
  return unpack(M.execute(def, inputs, attrs, metas, out), 1, def.noutputs)
end

-- the op on checked inputs, attrs and inferred metas: recorded (tracing) or run, written into out if given;
-- in-place writes bump the version counters; the tape links the outputs. Returns the list of outputs.
function M.execute(def, inputs, attrs, metas, out)
  local outputs
  if state.trace then
    outputs = state.trace.record(def, inputs, attrs, metas, out)
  else
    outputs = M.run_kernel(def, inputs, attrs, metas, out)
  end
  if out then tape.bump(out) end -- version counters (PyTorch's): every in-place write counts
  if def.mutates then for _, j in ipairs(def.mutates) do tape.bump(inputs[j]) end end
  if state.grad_enabled and def.backward then
    tape.maybe_record(def, inputs, attrs, outputs)
  end
  return outputs
end

-- ---- eager shortcuts ----
-- Dispatch costs more than a small kernel (bench/small_ops.lua); these skip attrs, promotion, inference
-- and the tape when they would do nothing: concrete tensors, no grad needed, not tracing.
local fast_tb = ffi.new("ds_tensor*[3]")
local no_attrs = ffi.new("double[1]")
local empty = Tensor._empty

-- unrolled (at most 8 dims; missing ones are nil on both sides): no inner loop in a chain's trace
local function same_shape(sa, sb)
  return #sa == #sb and sa[1] == sb[1] and sa[2] == sb[2] and sa[3] == sb[3] and sa[4] == sb[4]
    and sa[5] == sb[5] and sa[6] == sb[6] and sa[7] == sb[7] and sa[8] == sb[8]
end

M.shortcuts = setmetatable({}, { __mode = "k" }) -- the functions below (they check operands or fall back to M.call)

-- a and b are concrete tensors of one dtype that no tape needs (not tracing, no grad): their C tensors and dtype
local function plain_pair(a, b)
  if type(a) ~= "table" or type(b) ~= "table" or state.trace then return nil end
  local ca, cb, dt = rawget(a, "_c"), rawget(b, "_c"), rawget(a, "dtype")
  if ca and cb and dt == rawget(b, "dtype")
     and not (state.grad_enabled and (rawget(a, "requires_grad") or rawget(b, "requires_grad"))) then
    return ca, cb, dt
  end
end

-- out = kernel k (out, a, b); name for the error
local function run_pair(k, out, ca, cb, name)
  fast_tb[0] = out._c; fast_tb[1] = ca; fast_tb[2] = cb
  if k(fast_tb, no_attrs) ~= 0 then dsffi.fail(name) end
  return out
end

-- def's kernel for dtype dt, cached in kernels; false when def has none for dt
local function kernel_for(def, kernels, dt)
  local k = kernels[dt]
  if k == nil then k = def.dtypes[dt] and M.kernel(def, dt) or false; kernels[dt] = k end
  return k
end

-- f(a, b) = fast(a, b), or slow(a, b) when fast gives nil; registered as a shortcut. A third argument (an
-- options table) goes to slow, which checks it (an unknown option is an error, never dropped)
local function binary_shortcut(fast, slow)
  local f = function(a, b, opts)
    if opts ~= nil then return slow(a, b, opts) end
    local out = fast(a, b)
    if out == nil then out = slow(a, b) end
    return out   -- not a tail call: LuaJIT counts those against a trace's unroll limit (a chain of ops)
  end
  M.shortcuts[f] = true
  return f
end

-- (tensor op tensor) of one dtype and shape runs def's kernel; inplace writes into a; else slow(a, b)
function M.fast_binary(def, slow, inplace)
  local kernels = {}
  local name = inplace and def.name .. "_" or def.name
  return binary_shortcut(function(a, b)
    local ca, cb, dt = plain_pair(a, b)
    -- views written in place: M.call checks overlap
    if ca and not (inplace and (rawget(a, "_base") or rawget(b, "_base"))) then
      local sa, sb = a._shape, b._shape
      local k = (sa == sb or same_shape(sa, sb)) and kernel_for(def, kernels, dt)
      if k then
        local out = run_pair(k, inplace and a or empty(dt, sa, def.name), ca, cb, name)
        if inplace then rawset(a, "_version", (rawget(a, "_version") or 0) + 1) end -- a owns its storage (no _base)
        return out
      end
    end
  end, slow)
end

-- an attr-less unary op on a concrete tensor of a kernel dtype runs def's kernel; else slow(a, ...)
function M.fast_unary(def, slow)
  local kernels = {}
  local f = function(a, ...)
    if type(a) == "table" and (...) == nil and not state.trace then
      local ca, dt = rawget(a, "_c"), rawget(a, "dtype")
      if ca and def.dtypes[dt] and not (state.grad_enabled and rawget(a, "requires_grad")) then
        local k = kernels[dt]
        if k == nil then k = M.kernel(def, dt); kernels[dt] = k end
        local out = empty(dt, a._shape, def.name)
        fast_tb[0] = out._c; fast_tb[1] = ca
        if k(fast_tb, no_attrs) ~= 0 then dsffi.fail(def.name) end
        return out
      end
    end
    local r = slow(a, ...)
    return r
  end
  M.shortcuts[f] = true
  return f
end

-- a (..., M, K) @ b (K, N) of one dtype (x @ W, the eager linear layer's product) runs def's kernel on an output
-- (..., M, N); else slow(a, b). M.call's promotion and inference cost ~2 us a call, as much as a 32 x 32 product.
function M.fast_matmul(def, slow)
  local kernels = {}
  return binary_shortcut(function(a, b)
    local ca, cb, dt = plain_pair(a, b)
    if ca and dt ~= "bool" then
      local sa, sb = a._shape, b._shape
      local na = #sa
      local k = na >= 2 and #sb == 2 and sa[na] == sb[1] and kernel_for(def, kernels, dt)
      if k then
        local shape = {}
        for i = 1, na - 1 do shape[i] = sa[i] end
        shape[na] = sb[2]
        local out = run_pair(k, empty(dt, shape, def.name), ca, cb, def.name)
        return out
      end
    end
  end, slow)
end

return M
