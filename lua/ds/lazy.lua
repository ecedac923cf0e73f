-- lazy.lua: ds.compile(fn) without specs: trace once per argument signature and reuse the graph
-- (tf.function's cache); counts traces, warns once when retracing is frequent, {strict = true} forbids it.
-- A signature is the dtype and shape of each tensor argument, the value of each Lua number/string/boolean,
-- the identity of other tables, and the train/eval mode of modules (the argument, self, or upvalues), which
-- each graph records (graph.training).
local S = require("ds.shape")
local errors = require("ds.errors")
local state = require("ds.state")
local Tensor = require("ds.tensor")
local T = require("ds.trace")
local Graph = require("ds.graph")
local compiler = require("ds.compile")
local args = require("ds.args")

local M = { warn_after = 5 }
local is_tensor = Tensor.is_tensor

-- where warnings go (tests replace it)
function M.warn(msg) io.stderr:write("ds warning: ", msg, "\n") end

local Lazy = {}
Lazy.__index = Lazy

local function describe(v)
  local tv = type(v)
  if is_tensor(v) then return "tensor " .. v.dtype .. " " .. S.str(v._shape) end
  if tv == "number" then return string.format("number %.17g", v) end
  if tv == "string" then return string.format("string %q", v) end
  if tv == "boolean" or tv == "nil" then return tv .. " " .. tostring(v) end
  if T.is_module(v) then
    return string.format("module %s %s (%s)", rawget(getmetatable(v) or {}, "_name") or "?",
      tostring(v):match("0x%x+") or "",
      v.training == false and "eval" or "train")
  end
  return tv .. " " .. tostring(v)
end


-- modules the function sees through its upvalues (their mode is part of the signature)
local function upvalue_modules(fn)
  local out = {}
  local i = 1
  while true do
    local n, v = debug.getupvalue(fn, i)
    if not n then break end
    if T.is_module(v) then out[#out + 1] = { n, v } end
    i = i + 1
  end
  return out
end

-- an nn.Module instance (or one of its submodules) in train mode; another object with a forward by its own
-- training field (a class is in no mode)
local function in_train_mode(m)
  if rawget(m, "_order") == nil then return rawget(m, "training") == true end
  for _, sub in ipairs(m:modules()) do
    if sub.training ~= false then return true end
  end
  return false
end

-- a trace of target that records the train/eval mode it was made in (graph.training, which ds.save writes and
-- checks): train when any of the modules is in train mode; nil without modules
local function trace_in_mode(target, specs, opts, modules)
  local g = T.trace(target, specs, opts)
  if #modules > 0 then
    g.training = false
    for _, m in ipairs(modules) do g.training = g.training or in_train_mode(m[2]) end
  end
  return g
end

-- target: function or module; opts: {strict =, warn_after =, name =, specs =, dtype = (compile.lua's: "bf16")}
function M.new(target, opts)
  opts = opts or {}
  local is_mod = T.is_module(target)
  local fn = is_mod and (args.original[target.forward] or target.forward) or target
  local info = debug.getinfo(fn, "S")
  local self = setmetatable({
    target = target, opts = opts, cache = {}, count = 0, warned = false, is_module = is_mod,
    modules = is_mod and { { "self", target } } or upvalue_modules(fn),
    arg_names = T.param_names(fn, is_mod),
    name = opts.name or (is_mod and (rawget(getmetatable(target), "_name") or "module"))
      or ((info.short_src or "?"):match("([^/]*)$"):gsub("%.lua$", "") .. ":" .. (info.linedefined or 0)),
  }, Lazy)
  self.compile_opts = opts.dtype ~= nil and { dtype = opts.dtype } or nil   -- each trace compiled with them
  if opts.specs then self:trace_specs(opts.specs) end
  return self
end

function Lazy:arg_name(i) return self.arg_names[i] or ("arg" .. i) end

-- the train/eval mode of each module, as signature parts appended to parts
local function add_modes(parts, modules)
  for _, m in ipairs(modules) do parts[#parts + 1] = m[1] .. " " .. (m[2].training == false and "eval" or "train") end
  return parts
end

function Lazy:signature(args, n)
  local parts = { "n=" .. n }
  for i = 1, n do parts[#parts + 1] = describe(args[i]) end
  add_modes(parts, self.modules)
  return table.concat(parts, "|"), parts
end

-- what changed from the previous trace's signature, in words
function Lazy:what_changed(prev, parts)
  if not prev then return "first trace" end
  if prev[1] ~= parts[1] then
    return string.format("called with %s arguments instead of %s", parts[1]:sub(3), prev[1]:sub(3))
  end
  local n = tonumber(parts[1]:sub(3))
  for i = 2, #parts do
    if prev[i] ~= parts[i] then
      if i - 1 <= n then
        return string.format("argument %d (%s) changed from %s to %s", i - 1, self:arg_name(i - 1), prev[i], parts[i])
      end
      return string.format("module mode changed: %s -> %s", prev[i], parts[i])
    end
  end
  return "same signature"
end

function Lazy:specs_for(args, n)
  local specs = { n = n }
  for i = 1, n do
    local a = args[i]
    specs[i] = is_tensor(a) and T.spec(a.shape, a.dtype, self:arg_name(i)) or a
  end
  return specs
end

function Lazy:trace_with(specs)
  return trace_in_mode(self.target, specs, { name = self.name, convert = self.opts.convert }, self.modules)
end

function Lazy:trace_specs(specs)
  local named = { n = specs.n or table.maxn(specs) }
  for i = 1, named.n do
    local s = specs[i]
    if T.is_spec(s) and not s.name then s = T.spec(s.shape, s.dtype, self:arg_name(i)) end
    named[i] = s
  end
  local g = self:trace_with(named)
  self.count = 1
  self.fixed = { graph = g, run = compiler.compile_graph(g, self.compile_opts) }
end

function Lazy:retrace(key, parts, args, n)
  if self.count >= 1 and self.opts.strict then
    errors.raise(string.format("compile %s: strict function would retrace: %s", self.name,
      self:what_changed(self.last_parts, parts)))
  end
  local g = self:trace_with(self:specs_for(args, n))
  local entry = { graph = g, run = compiler.compile_graph(g, self.compile_opts), parts = parts }
  self.cache[key] = entry
  self.count = self.count + 1
  local limit = self.opts.warn_after or M.warn_after
  if self.count >= limit and not self.warned then
    self.warned = true
    M.warn(string.format("compiled function %s has been traced %d times; the last retrace: %s. Each new tensor "
      .. "shape/dtype, Lua number/string value or module mode makes a new graph: pass numbers as tensors, or give "
      .. "specs with dynamic dims (ds.compile(fn, {ds.spec({\"batch\", ...})}))", self.name, self.count,
      self:what_changed(self.last_parts, parts)))
  end
  self.last_parts = parts
  return entry
end

function Lazy:__call(...)
  if state.trace then
    if self.is_module then return self.target:forward(...) end
    return self.target(...)
  end
  local n = select("#", ...)
  local args = { ... }
  local entry = self.fixed
  if not entry then
    local key, parts = self:signature(args, n)
    entry = self.cache[key] or self:retrace(key, parts, args, n)
  end
  local tensors = {}
  for i = 1, n do if is_tensor(args[i]) then tensors[#tensors + 1] = args[i] end end
  return entry.run(unpack(tensors))
end

function Lazy:trace_count() return self.count end

-- the graphs traced so far (one per signature)
function Lazy:graphs()
  if self.fixed then return { self.fixed.graph } end
  local out = {}
  for _, e in pairs(self.cache) do out[#out + 1] = e.graph end
  return out
end

-- the graph for these arguments (tracing it if needed)
function Lazy:graph_for(...)
  if self.fixed then return self.fixed.graph end
  local n = select("#", ...)
  local args = { ... }
  local key, parts = self:signature(args, n)
  return (self.cache[key] or self:retrace(key, parts, args, n)).graph
end

function Lazy:__tostring()
  return string.format("compiled %s (%d trace%s)", self.name, self.count, self.count == 1 and "" or "s")
end

local function is_spec_list(t)
  if type(t) ~= "table" or is_tensor(t) or T.is_spec(t) then return T.is_spec(t) end
  return t[1] ~= nil or (t.n ~= nil and t.n > 0)
end

-- ds.compile(fn_or_module[, opts]) is lazy (this file); ds.compile(graph[, opts]) and
-- ds.compile(fn_or_module, specs[, opts]) compile now (compile.lua), tracing once with the specs.
function M.compile(target, specs_or_opts, opts)
  if specs_or_opts ~= nil and type(specs_or_opts) ~= "table" then
    errors.raise("compile: the second argument must be a list of specs or an options table, got "
      .. type(specs_or_opts))
  end
  if opts ~= nil and (type(opts) ~= "table" or is_tensor(opts)) then
    errors.raise("compile: options must be a table, got " .. type(opts))
  end
  -- an object that compiles itself (an imported model specialized on input values: onnx/specialized.lua)
  local mt = type(target) == "table" and not is_tensor(target) and getmetatable(target)
  if type(mt) == "table" and mt.__ds_compile then return mt.__ds_compile(target, specs_or_opts or opts) end
  local callable = type(target) == "function" or T.is_module(target)
  if callable and not is_spec_list(specs_or_opts) then return M.new(target, specs_or_opts) end
  if Graph.is_graph(target) then return compiler.compile_graph(target, specs_or_opts or opts) end
  if type(specs_or_opts) ~= "table" or specs_or_opts[1] == nil and next(specs_or_opts) ~= nil and
    not specs_or_opts.shape then
    errors.raise("compile: give a graph, or a function/module and a list of specs (ds.spec)")
  end
  local convert = opts and opts.convert
  if convert ~= nil then opts = T.without(opts, "convert") end
  local trace_opts = { convert = convert }
  local modules = callable and (T.is_module(target) and { { "self", target } } or upvalue_modules(target)) or {}
  local cg = compiler.compile_graph(trace_in_mode(target, specs_or_opts, trace_opts, modules), opts)
  -- a module (or a function of modules) follows their train/eval mode: one compiled graph per mode,
  -- traced with the same specs when the mode is first seen (cg.current() gives the one for now)
  if #modules > 0 then
    local by_mode = { [table.concat(add_modes({}, modules), "|")] = cg }
    -- each call: the modes of the last call's graph (eval = true), compared without building its key
    local last, last_c = {}, cg
    for i, m in ipairs(modules) do last[i] = m[2].training == false end
    local function current()
      local same = true
      for i = 1, #modules do
        if (modules[i][2].training == false) ~= last[i] then same = false; break end
      end
      if same then return last_c end
      local key = table.concat(add_modes({}, modules), "|")
      local c = by_mode[key]
      if not c then
        c = compiler.compile_graph(trace_in_mode(target, specs_or_opts, trace_opts, modules), opts)
        c.current = current
        by_mode[key] = c
      end
      for i, m in ipairs(modules) do last[i] = m[2].training == false end
      last_c = c
      return c
    end
    cg.current = current
  end
  return cg
end

M.Lazy = Lazy

return M
