-- nn/module.lua: the Module class: subclasses by Module:extend("Name"), submodules, parameters and
-- buffers registered by assignment (in assignment order), PyTorch-style dotted names, train/eval,
-- state_dict / load_state_dict, and a tree-shaped tostring.
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")
local autograd = require("ds.autograd")
local Function = require("ds.autograd_function").Function
local summary = require("ds.nn.summary")
local options = require("ds.options")
local args = require("ds.args")

local is_tensor = Tensor.is_tensor

local Module = { _name = "Module", _is_module = true }
Module.__index = Module

local function is_module(v)
  return type(v) == "table" and not is_tensor(v) and v._is_module == true
end
Module.is_module = is_module

-- a Parameter is a leaf tensor that requires grad, marked so that it stays a parameter when frozen
local function Parameter(t, requires_grad)
  if not is_tensor(t) then errors.raise("Parameter: expects a tensor, got " .. type(t)) end
  if rawget(t, "_grad_fn") then t = t:detach() end
  rawset(t, "_param", true)
  if requires_grad == false then rawset(t, "requires_grad", false) else t:requires_grad_(true) end
  return t
end
Module.Parameter = Parameter

local function is_param(t)
  return rawget(t, "_param") == true or (rawget(t, "requires_grad") == true and rawget(t, "_grad_fn") == nil)
end

-- assignment of a tensor or module to a new key records the key (registration order = naming order)
local function newindex(self, k, v)
  rawset(self, k, v)
  if v ~= nil and (is_tensor(v) or is_module(v)) then
    local known = rawget(self, "_known")
    if known and not known[k] then
      known[k] = true
      local order = rawget(self, "_order")
      order[#order + 1] = k
    end
  end
end

-- the forward an eager call runs: ds.convert (a layer above) registers a converter (Module._set_forward_converter)
-- that gives the converted forward, so a tensor `if` in it tests the tensor's value as it does traced
local forward_converter = function(_, f) return f end
local function call(self, ...) return forward_converter(self, self.forward)(self, ...) end

local function construct(cls, ...)
  local sig = rawget(cls, "_signatures")
  if sig and sig.init then args.check(cls._name, sig.init, ...) end
  local obj = setmetatable({ _order = {}, _known = {}, _buffers = {}, training = true }, cls)
  obj:init(...)
  return obj
end

-- v is an instance of cls or of a class extending it
local function instance_of(v, cls)
  if type(v) ~= "table" or is_tensor(v) then return false end
  local c = getmetatable(v)
  while c ~= nil do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

-- a method defined on a class (its first parameter is self) checks self, so m.forward(x) (a dot for a
-- colon) is an error naming the method, and its arguments against the class's signature for it
local function define_method(cls, k, f)
  if type(f) == "function" and type(k) == "string" and k ~= "init" and k:sub(1, 1) ~= "_" and
    debug.getlocal(f, 1) == "self" then
    local sig = rawget(cls, "_signatures")
    sig = sig and sig[k]
    local method = f
    f = function(self, ...)
      if not instance_of(self, cls) then
        errors.raise(string.format("%s: expects a %s as self (call it as m:%s(...)), got %s", k, cls._name, k,
          is_tensor(self) and "a tensor" or is_module(self) and "a " .. self._name or type(self)))
      end
      if sig then args.check_method(self, k, sig, ...) end
      return method(self, ...)
    end
    args.original[f] = method
  end
  rawset(cls, k, f)
end

-- Module:extend("Name"[, signatures]) -> a class; Class(...) builds an instance and calls its init(...).
-- signatures: { init = kinds, forward = kinds, ... }, the kinds of each method's arguments after self
-- (lua/ds/args.lua), checked before it runs; every method defined on the class checks self.
function Module:extend(name, signatures)
  if type(name) ~= "string" then errors.raise("Module:extend: expects a class name") end
  local sigs = nil
  for k, kinds in pairs(signatures or {}) do sigs = sigs or {}; sigs[k] = args.signature(kinds) end
  local cls = setmetatable({ _signatures = sigs },
    { __index = self, __call = construct, __tostring = function() return "class " .. name end,
      __newindex = define_method })
  cls.__index = cls
  cls.__newindex = newindex
  cls.__call = call
  cls.__tostring = self.__tostring
  cls._name = name
  cls.super = self
  return cls
end

function Module:init() end

function Module:forward()
  errors.raise(self._name .. ": forward is not implemented")
end

-- ---- registration ----
-- a member name: a string, or a positive integer (Sequential's 1-based keys)
local function check_name(self, what, name)
  if not (type(name) == "string" and name ~= "" or type(name) == "number" and name >= 1 and name == math.floor(name) and
    name < 2 ^ 53) then
    errors.raise(string.format("%s.%s: name must be a non-empty string or a positive integer, got %s", self._name, what,
      tostring(name)))
  end
end

-- forward hooks (PyTorch's register_forward_pre_hook / register_forward_hook): the module's forward is wrapped
-- on the instance (so calls through conversion and tracing run them too). A pre-hook gets (module, args) (args:
-- the list of positional inputs) and may return a tensor or a list replacing them; a hook gets (module, args,
-- output) (output: the result, a list when forward returns several) and may return a replacement. Each returns
-- a handle with :remove().
-- Full backward hooks (register_full_backward_pre_hook / register_full_backward_hook) work as PyTorch's: the
-- tensor inputs and outputs of a call pass through identity functions whose backward runs the hooks. A pre-hook
-- gets (module, grad_output) and may return a replacement list; a hook gets (module, grad_input, grad_output)
-- (lists over the tensor inputs and the outputs, nil where there is no gradient) and may return a replacement
-- grad_input.
-- the identity functions of one call's backward hooks: outputs first (their backward runs first, with grad_output)
local HookOutputs = Function:extend("BackwardHookFunction")
function HookOutputs.forward(ctx, rec, ...)
  ctx.rec = rec
  return ...
end
function HookOutputs.backward(ctx, ...)
  local rec, n = ctx.rec, select("#", ...)
  local gout = { ... }
  for _, entry in ipairs(rawget(rec.module, "_backward_pre_hooks")) do
    local r = entry.fn(rec.module, gout)
    if r ~= nil then gout = Tensor.is_tensor(r) and { r } or r end
  end
  rec.grad_output = gout
  if not rec.inputs_hooked then -- no input requires grad: the hooks run here, with grad_input all nil
    local gin = {}
    for _, entry in ipairs(rawget(rec.module, "_backward_hooks")) do entry.fn(rec.module, gin, gout) end
  end
  return nil, unpack(gout, 1, n)
end
local HookInputs = Function:extend("BackwardHookFunction")
function HookInputs.forward(ctx, rec, ...)
  ctx.rec = rec
  return ...
end
function HookInputs.backward(ctx, ...)
  local rec, n = ctx.rec, select("#", ...)
  local gin = { ... }
  for _, entry in ipairs(rawget(rec.module, "_backward_hooks")) do
    local r = entry.fn(rec.module, gin, rec.grad_output or {})
    if r ~= nil then gin = Tensor.is_tensor(r) and { r } or r end
  end
  return nil, unpack(gin, 1, n)
end

-- the tensors of a list (positions), passed through f (an identity Function) when one requires grad
local function through(f, rec, list, n)
  local pos, ts, any = {}, {}, false
  for i = 1, n do
    local x = list[i]
    if Tensor.is_tensor(x) then
      pos[#pos + 1] = i; ts[#ts + 1] = x
      any = any or rawget(x, "requires_grad") == true
    end
  end
  if not any then return list, false end
  local outs = { f.apply(rec, unpack(ts, 1, #ts)) }
  local r = { n = n }
  for i = 1, n do r[i] = list[i] end
  for k, i in ipairs(pos) do r[i] = outs[k] end
  return r, true
end

local function run_with_hooks(self, ...)
  local inputs = { n = select("#", ...), ... }
  for _, entry in ipairs(rawget(self, "_forward_pre_hooks")) do
    local r = forward_converter(self, entry.fn)(self, { unpack(inputs, 1, inputs.n) }) -- (converted as forward is)
    if r ~= nil then
      if Tensor.is_tensor(r) or type(r) ~= "table" then inputs = { n = 1, r } else inputs = { n = #r, unpack(r) } end
    end
  end
  local rec
  if autograd.is_grad_enabled() and (#rawget(self, "_backward_hooks") > 0 or #rawget(self, "_backward_pre_hooks") > 0)
  then
    rec = { module = self }
    inputs, rec.inputs_hooked = through(HookInputs, rec, inputs, inputs.n)
  end
  local results = { n = 0 }
  local function keep(...) results = { n = select("#", ...), ... } end
  keep(forward_converter(self, getmetatable(self).forward)(self, unpack(inputs, 1, inputs.n)))
  for _, entry in ipairs(rawget(self, "_forward_hooks")) do
    local output = results.n == 1 and results[1] or { unpack(results, 1, results.n) }
    local r = forward_converter(self, entry.fn)(self, { unpack(inputs, 1, inputs.n) }, output)
    if r ~= nil then
      if results.n == 1 then results = { n = 1, r } else results = { n = #r, unpack(r) } end
    end
  end
  if rec then
    if results.n == 1 and type(results[1]) == "table" and not Tensor.is_tensor(results[1]) then
      local list = results[1]
      results = { n = 1, (through(HookOutputs, rec, list, table.maxn(list))) }
      setmetatable(results[1], nil)
      results[1].n = nil
    else
      results = through(HookOutputs, rec, results, results.n)
    end
  end
  return unpack(results, 1, results.n)
end

-- opts of a hook registration: prepend = true puts the hook first; PyTorch 2's with_kwargs and always_call are
-- refused
local function hook_options(opts, what)
  opts = options.check(opts, what, { prepend = "boolean", with_kwargs = "boolean", always_call = "boolean" })
  if opts.with_kwargs then errors.raise(what .. ": with_kwargs = true is not supported (ds modules take positional "
    .. "arguments)") end
  if opts.always_call then errors.raise(what .. ": always_call = true is not supported") end
  return opts
end

local function add_hook(self, list_name, fn, what, opts)
  if type(fn) ~= "function" then errors.raise(string.format("%s: expects a function, got %s", what, type(fn))) end
  opts = hook_options(opts, what)
  if rawget(self, "_forward_hooks") == nil then
    rawset(self, "_forward_hooks", {}); rawset(self, "_forward_pre_hooks", {})
    rawset(self, "_backward_hooks", {}); rawset(self, "_backward_pre_hooks", {})
    rawset(self, "forward", run_with_hooks)
  end
  local list, entry = rawget(self, list_name), { fn = fn }
  table.insert(list, opts.prepend and 1 or #list + 1, entry)
  return { remove = function()
    for i, e in ipairs(rawget(self, list_name)) do if e == entry then table.remove(rawget(self, list_name), i) end end
  end }
end
function Module:register_forward_pre_hook(fn, opts)
  return add_hook(self, "_forward_pre_hooks", fn, "register_forward_pre_hook", opts)
end
function Module:register_forward_hook(fn, opts)
  return add_hook(self, "_forward_hooks", fn, "register_forward_hook", opts)
end
-- fn(module, grad_input, grad_output) after the gradients of the module's inputs are computed
function Module:register_full_backward_hook(fn, opts)
  return add_hook(self, "_backward_hooks", fn, "register_full_backward_hook", opts)
end
-- fn(module, grad_output) before the gradients of the module's inputs are computed
function Module:register_full_backward_pre_hook(fn, opts)
  return add_hook(self, "_backward_pre_hooks", fn, "register_full_backward_pre_hook", opts)
end
function Module:register_backward_hook()
  errors.raise(self._name .. ".register_backward_hook: the non-full backward hook is deprecated in PyTorch; use "
    .. "register_full_backward_hook")
end

function Module:register_buffer(name, t, persistent)
  check_name(self, "register_buffer", name)
  if t ~= nil and not is_tensor(t) then
    errors.raise(self._name .. ".register_buffer: '" .. tostring(name) .. "' must be a tensor or nil")
  end
  rawget(self, "_buffers")[name] = persistent == false and "nonpersistent" or "persistent"
  local known = rawget(self, "_known")
  if not known[name] then
    known[name] = true
    local order = rawget(self, "_order"); order[#order + 1] = name
  end
  rawset(self, name, t)
end

function Module:register_parameter(name, p)
  check_name(self, "register_parameter", name)
  if p ~= nil then p = Parameter(p) end
  self[name] = p
end

function Module:add_module(name, m)
  check_name(self, "add_module", name)
  if m ~= nil and not is_module(m) then
    errors.raise(self._name .. ".add_module: '" .. tostring(name) .. "' is not a module")
  end
  self[name] = m
end

-- own entries in registration order: kind is "module", "param" or "buffer"
local function own(self, kind)
  local out = {}
  local buffers = rawget(self, "_buffers")
  for _, k in ipairs(rawget(self, "_order")) do
    local v = rawget(self, k)
    if v ~= nil then
      local kv
      if is_module(v) then kv = "module"
      elseif buffers[k] then kv = "buffer"
      elseif is_param(v) then kv = "param" end
      if kv == kind then out[#out + 1] = { tostring(k), v, buffers[k] } end
    end
  end
  return out
end

local function iterator(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

-- {name, module} pairs in pre-order, self first with name "" (each module once)
local function module_list(self)
  local out, seen = {}, {}
  local function visit(m, prefix)
    if seen[m] then return end
    seen[m] = true
    out[#out + 1] = { prefix, m }
    for _, e in ipairs(own(m, "module")) do visit(e[2], prefix == "" and e[1] or prefix .. "." .. e[1]) end
  end
  visit(self, "")
  return out
end

local function member_list(self, kind, persistent_only)
  local out, seen = {}, {}
  for _, me in ipairs(module_list(self)) do
    local prefix, m = me[1], me[2]
    for _, e in ipairs(own(m, kind)) do
      if not seen[e[2]] and not (persistent_only and e[3] == "nonpersistent") then
        seen[e[2]] = true
        out[#out + 1] = { prefix == "" and e[1] or prefix .. "." .. e[1], e[2] }
      end
    end
  end
  return out
end

-- for name, p in model:named_parameters() do ... end  (names like "fc.weight", "1.bias")
function Module:named_parameters() return iterator(member_list(self, "param")) end
function Module:named_buffers() return iterator(member_list(self, "buffer")) end
function Module:named_children() return iterator(own(self, "module")) end
function Module:named_modules() return iterator(module_list(self)) end

local function values(list)
  local out = {}
  for i, e in ipairs(list) do out[i] = e[2] end
  return out
end
-- lists (arrays)
function Module:parameters() return values(member_list(self, "param")) end
function Module:buffers() return values(member_list(self, "buffer")) end
function Module:children() return values(own(self, "module")) end
function Module:modules() return values(module_list(self)) end

-- ---- modes, grads ----
function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then errors.raise(self._name .. ".train: mode must be a boolean, got " .. type(mode)) end
  for _, m in ipairs(self:modules()) do rawset(m, "training", mode and true or false) end
  return self
end
function Module:eval() return self:train(false) end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do rawset(p, "grad", nil) end
end

function Module:requires_grad_(on)
  if on ~= nil and type(on) ~= "boolean" then
    errors.raise(self._name .. ".requires_grad_: expects a boolean, got " .. type(on))
  end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(on ~= false) end
  return self
end

-- fn(module) on every submodule, then on self
function Module:apply(fn)
  if type(fn) ~= "function" then errors.raise(self._name .. ".apply: expects a function, got " .. type(fn)) end
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

-- convert floating parameters and buffers to dtype, in place (do it before building an optimizer)
function Module:astype(dt)
  if dt ~= "f32" and dt ~= "f64" then
    errors.raise(self._name .. ".astype: dtype must be 'f32' or 'f64', got " .. tostring(dt))
  end
  for _, m in ipairs(self:modules()) do
    for _, kind in ipairs { "param", "buffer" } do
      for _, e in ipairs(own(m, kind)) do
        local t = e[2]
        if t.dtype ~= dt and (t.dtype == "f32" or t.dtype == "f64") then
          local key = tonumber(e[1]) or e[1]
          local nt = autograd.no_grad(function() return t:astype(dt) end)
          if kind == "param" then nt = Parameter(nt, rawget(t, "requires_grad") == true) end
          rawset(m, key, nt)
        end
      end
    end
  end
  return self
end
Module.to = Module.astype
function Module:double() return self:astype("f64") end
function Module:float() return self:astype("f32") end

-- a deep copy with its own parameters and buffers (same values, own storage, same requires_grad);
-- submodules and plain tables are copied, anything else (functions, classes) is shared
function Module:deepcopy()
  local copies = {}
  local function copy(v)
    if copies[v] then return copies[v] end
    if is_tensor(v) then
      local c = autograd.no_grad(function() return v:clone() end)
      if is_param(v) then c = Parameter(c, rawget(v, "requires_grad") == true) end
      copies[v] = c
      return c
    end
    if type(v) ~= "table" or (getmetatable(v) ~= nil and not is_module(v)) then return v end
    local out = {}
    copies[v] = out
    for k, x in pairs(v) do rawset(out, k, copy(x)) end
    return setmetatable(out, getmetatable(v))
  end
  return copy(self)
end

-- ---- state ----
-- {name = tensor} of parameters and persistent buffers (detached, sharing storage)
function Module:state_dict()
  local sd = {}
  for _, e in ipairs(member_list(self, "param")) do sd[e[1]] = e[2]:detach() end
  for _, e in ipairs(member_list(self, "buffer", true)) do sd[e[1]] = e[2]:detach() end
  return sd
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

-- copy values from sd into the parameters and buffers; opts.strict (default true) refuses missing
-- and unexpected keys; a shape mismatch is always an error. Returns {missing_keys, unexpected_keys}.
function Module:load_state_dict(sd, opts)
  opts = options.check(opts, self._name .. ".load_state_dict", { strict = "boolean" })
  local strict = opts.strict ~= false
  if type(sd) ~= "table" then errors.raise(self._name .. ".load_state_dict: expects a table of tensors") end
  for k in pairs(sd) do
    if type(k) ~= "string" then
      errors.raise(self._name .. ".load_state_dict: keys must be parameter names (strings), got " .. type(k))
    end
  end
  local targets = {}
  for _, e in ipairs(member_list(self, "param")) do targets[e[1]] = e[2] end
  for _, e in ipairs(member_list(self, "buffer", true)) do targets[e[1]] = e[2] end
  local missing, unexpected, mismatched = {}, {}, {}
  for _, k in ipairs(sorted_keys(targets)) do if sd[k] == nil then missing[#missing + 1] = k end end
  for _, k in ipairs(sorted_keys(sd)) do
    local v, t = sd[k], targets[k]
    if t == nil then unexpected[#unexpected + 1] = tostring(k)
    elseif not is_tensor(v) then
      mismatched[#mismatched + 1] = string.format("%s: expected a tensor, got %s", k, type(v))
    elseif not S.equal(v._shape, t._shape) then
      mismatched[#mismatched + 1] = string.format("%s: checkpoint shape %s, model shape %s", k, S.str(v._shape),
        S.str(t._shape))
    end
  end
  local problems = {}
  if #mismatched > 0 then problems[#problems + 1] = "size mismatch for " .. table.concat(mismatched, "; ") end
  if strict and #missing > 0 then problems[#problems + 1] = "missing keys: " .. table.concat(missing, ", ") end
  if strict and #unexpected > 0 then problems[#problems + 1] = "unexpected keys: " .. table.concat(unexpected, ", ") end
  if #problems > 0 then
    errors.raise(string.format("load_state_dict for %s: %s", self._name, table.concat(problems, "; ")))
  end
  autograd.no_grad(function()
    for k, v in pairs(sd) do
      local t = targets[k]
      if t then t:copy_(v) end
    end
  end)
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- model:summary({1, 1, 28, 28}): layers in call order with output shapes and parameter counts
Module.summary = summary.summary

-- ---- printing ----
function Module:extra_repr() return "" end

local function indent(s)
  return (s:gsub("\n", "\n  "))
end

function Module:__tostring()
  local kids = own(self, "module")
  local extra = self:extra_repr()
  if #kids == 0 then return self._name .. "(" .. extra .. ")" end
  local lines = { self._name .. "(" }
  if extra ~= "" then lines[2] = "  " .. indent(extra) end
  for _, e in ipairs(kids) do lines[#lines + 1] = "  (" .. e[1] .. "): " .. indent(tostring(e[2])) end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- every method checks self, so m.eval() (a dot for a colon) is an error naming the method
-- (Module._unchecked: the methods as written, for their parameter names in docs/API.md)
local OWN_SELF = { extend = true, init = true, forward = true, is_module = true, Parameter = true }
Module._unchecked = {}
for name, f in pairs(Module) do
  if type(f) == "function" and not OWN_SELF[name] and name:sub(1, 2) ~= "__" then
    Module._unchecked[name] = f
    Module[name] = function(self, ...)
      if not is_module(self) then
        errors.raise(string.format("%s: expects a module as self (call it as m:%s(...)), got %s", name, name,
          is_tensor(self) and "a tensor" or type(self)))
      end
      return f(self, ...)
    end
  end
end

Module.__newindex = newindex
Module.__call = call
function Module._set_forward_converter(f) forward_converter = f end

return Module
