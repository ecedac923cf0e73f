-- help.lua: ds.help(name | function): an op's signature, attrs with defaults, dtypes and description from
-- the op table (the source docs/API.md is generated from); nn modules, optimizers and Lua functions by
-- their parameter names, the comment above their definition and their file:line; library tables by their
-- members; M.public_names(ns) lists every public name (what `?name` answers and docs/API.md lists). The
-- namespace (ds) to look names up in is passed by the caller.
local D = require("ds.dispatch")
require("ds.ops") -- fills the op table
local Tensor = require("ds.tensor")
local args = require("ds.args")
local C = require("ds.ops.common")

local M = {}

local INPUT_NAMES = { [0] = {}, { "x" }, { "a", "b" }, { "a", "b", "c" } }

local show

-- a table of options in key order: {a = 1, b = {2, 3}}
local function show_table(t)
  local keys, parts = {}, {}
  for k in pairs(t) do if type(k) == "string" then keys[#keys + 1] = k end end
  table.sort(keys)
  for i, x in ipairs(t) do parts[i] = show(x) end
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. " = " .. show(t[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

function show(v)
  if type(v) == "table" then return show_table(v)
  elseif type(v) == "string" then return '"' .. v .. '"' end
  return tostring(v)
end

local function sorted(set)
  local out = {}
  for k in pairs(set or {}) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- the comment lines right above line `line` of a source file (or above the class's `extend` line just
-- above it), without their "--"
local function comment_above(path, line)
  local f = path and io.open(path, "r")
  if not f then return nil end
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  local out, i = {}, line - 1
  if lines[i] and lines[i]:match(":extend%(") then i = i - 1 end -- the class's comment sits above its extend
  while i >= 1 and lines[i] and lines[i]:match("^%s*%-%-") do
    table.insert(out, 1, (lines[i]:gsub("^%s*%-%-+%s?", "")))
    i = i - 1
  end
  return #out > 0 and table.concat(out, "\n") or nil
end

-- the first line of a source file, when it is the file's purpose comment
local function file_purpose(path)
  local f = io.open(path, "r")
  local first = f and f:read("*l")
  if f then f:close() end
  return first and first:match("^%-%-%s*(.*)$")
end

local function function_text(name, f, is_method)
  f = args.original[f] or f -- a function behind its argument check (lua/ds/args.lua): as written
  local info = debug.getinfo(f, "Su")
  local params = {}
  for i = is_method and 2 or 1, info.nparams or 0 do params[#params + 1] = debug.getlocal(f, i) end
  if info.isvararg then params[#params + 1] = "..." end
  local lines = { name .. "(" .. table.concat(params, ", ") .. ")" }
  if info.what == "Lua" and info.source:sub(1, 1) == "@" then
    local doc = comment_above(info.source:sub(2), info.linedefined) or (is_method and file_purpose(info.source:sub(2)))
    if doc then lines[#lines + 1] = doc end
    lines[#lines + 1] = "defined at " .. info.short_src .. ":" .. info.linedefined
  end
  return table.concat(lines, "\n")
end

-- how an op of the table is called: the generic form (inputs, positional attrs, {options}), or the parameters of
-- its public function when that has its own (ds.gather(x, dim, index, opts), ds.full(size, value, opts))
function M.op_call(ns, def)
  local f = C.functions[def.name] or ns[def.name]
  f = type(f) == "function" and (args.original[f] or f) or nil
  local src = f and debug.getinfo(f, "S").source or ""
  if f and not src:match("ops/common%.lua$") and not src:match("/dispatch%.lua$") then
    local info, params = debug.getinfo(f, "u"), {}
    for i = 1, info.nparams or 0 do params[i] = debug.getlocal(f, i) end
    if info.isvararg then params[#params + 1] = "..." end
    local text = table.concat(params, ", ")
    -- (placeholder names, as sum(x, a, b, c) that sorts out its arguments itself: the generic form says more)
    if def.ninputs == 0 or not (", " .. text .. ","):find(", a, b,", 1, true) then
      return "ds." .. def.name .. "(" .. text .. ")"
    end
  end
  local parts = {}
  if def.variadic then parts[1] = "{tensors...}"
  else
    local names = INPUT_NAMES[def.ninputs or 1] or {}
    for i = 1, def.ninputs or 1 do parts[#parts + 1] = names[i] or ("t" .. i) end
  end
  for _, a in ipairs(def.args or {}) do parts[#parts + 1] = a end
  if #(def.attrs or {}) > 0 then parts[#parts + 1] = "{options}" end
  return "ds." .. def.name .. "(" .. table.concat(parts, ", ") .. ")"
end

local function op_text(ns, def)
  local lines = { M.op_call(ns, def) }
  if def.doc then lines[#lines + 1] = def.doc end
  for _, a in ipairs(def.attrs or {}) do
    local kind = a[2] == "enum" and table.concat(a[4] or {}, "|") or a[2]
    lines[#lines + 1] = string.format("  %-16s %s%s", a[1], kind, a[3] ~= nil and (" = " .. show(a[3])) or "")
  end
  local dts = sorted(def.dtypes)
  lines[#lines + 1] = "dtypes: " .. (#dts > 0 and table.concat(dts, " ") or "any")
  lines[#lines + 1] = "differentiable: " .. (def.backward and "yes" or "no")
  return table.concat(lines, "\n")
end

-- nn modules (an init method) and optimizers/schedulers (new(cls, params, opts) with defaults)
local function class_text(name, cls)
  if cls.defaults and cls.new then
    if type(rawget(cls, "positional")) == "table" then -- an optimizer: PyTorch's positional order, then options
      return string.format("%s(params, %s, {options})\ndefaults: %s", name, table.concat(cls.positional, ", "),
        show_table(cls.defaults))
    end
    local text = function_text(name, cls.new, true)
    return text:gsub("\n", "\ndefaults: " .. show_table(cls.defaults) .. "\n", 1)
  end
  return function_text(name, cls.init, true)
end

local function is_class(v)
  return type(v) == "table" and ((v._is_module == true and type(v.init) == "function")
    or (v.defaults ~= nil and type(v.new) == "function"))
end

-- ---- the public names: ds's functions, classes and values, and those of its libraries ----
-- namespaces that are ds's internals, not its API (the op registry, symbolic dims, a file format's reader)
local INTERNAL = { ops = true, sym = true, state_file = true }

-- a class made by a constructor: new (schedulers) or a metatable's __call
local function constructor(v)
  if type(v) ~= "table" then return nil end
  if type(v.new) == "function" then return v.new end
  local mt = getmetatable(v)
  return type(mt) == "table" and type(rawget(mt, "__call")) == "function" and rawget(mt, "__call") or nil
end

-- a library table: plain (no metatable; the Tensor class's only refuses new keys), not a class, with a function or
-- class in it
function M.is_namespace(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil and v ~= Tensor or is_class(v) or rawget(v, "_is_module") then
    return false
  end
  for _, x in pairs(v) do if type(x) == "function" or is_class(x) or constructor(x) then return true end end
  return false
end

local function public_key(k) return type(k) == "string" and k:match("^[%a][%w_]*$") and k ~= "install" end

-- every public name of ns, sorted ("compile", "optim.Adam", "nn.init.trunc_normal_", "Tensor.sum", ...): its
-- functions, classes and values, walked through its library tables (each table once, under its first name)
function M.public_names(ns)
  local out, seen = {}, {}
  local function walk(prefix, t, depth)
    seen[t] = true
    local keys = {}
    for k in pairs(t) do if public_key(k) and not (depth == 1 and INTERNAL[k]) then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v, name = t[k], prefix .. k
      out[#out + 1] = name
      if depth < 4 and not seen[v] and (M.is_namespace(v) or v == Tensor) then
        walk(name .. ".", v, depth + 1)
      end
    end
  end
  walk("", ns, 1)
  table.sort(out)
  return out
end

-- the value a dotted name reaches from ns ("optim.lr_scheduler.StepLR", "Tensor:sum"), or nil
function M.resolve(ns, name)
  local v = ns
  for part in name:gmatch("[^.:]+") do
    if type(v) ~= "table" then return nil end
    v = v[part]
  end
  return v
end

-- a library table: its members by kind
local function namespace_text(name, t)
  local kinds = {}
  for k, v in pairs(t) do
    if public_key(k) then
      local kind = (is_class(v) or constructor(v)) and "classes"
        or type(v) == "function" and "functions" or M.is_namespace(v) and "libraries" or "values"
      kinds[kind] = kinds[kind] or {}
      table.insert(kinds[kind], k)
    end
  end
  local lines = { name .. ": a library table (?" .. name .. ".<name> for each)" }
  for _, kind in ipairs { "functions", "classes", "libraries", "values" } do
    if kinds[kind] then
      table.sort(kinds[kind])
      lines[#lines + 1] = "  " .. kind .. ": " .. table.concat(kinds[kind], ", ")
    end
  end
  return table.concat(lines, "\n")
end

-- a name that is neither op, function nor class: a class made with new (schedulers), a table, a value
local function value_text(name, v)
  if constructor(v) then return function_text(name, constructor(v), true) end
  if type(v) == "table" and M.is_namespace(v) then return namespace_text(name, v) end
  if type(v) == "table" then
    local n, flat = 0, true
    for _, x in pairs(v) do n = n + 1; flat = flat and type(x) ~= "table" end
    return string.format("%s: a table of %d entries%s", name, n, flat and " " .. show(v):sub(1, 200) or "")
  end
  return string.format("%s = %s (a %s)", name, show(v), type(v))
end

-- help text for a name ("matmul", "conv2d", "nn.Linear", "F.relu", "optim.Adam", "Tensor.sum"), or for a
-- value (a function or class) with the name to show; nil when nothing is known. ns: the ds namespace.
function M.text(ns, name, value)
  if type(name) ~= "string" and value == nil then name, value = nil, name end
  local nn, optim = ns.nn, ns.optim
  local short = name and name:gsub("^ds%.", "")
  if short then
    local op = D.by_name[short] or D.by_name[short:match("^F%.(.*)$") or ""] or
      D.by_name[short:match("^Tensor[.:](.*)$") or short:match("^[%w_]+:([%w_]+)$") or ""] -- (?x:sum: a method)
    if op then return op_text(ns, op) end
    local mod = short:match("^nn%.(.*)$")
    if mod and is_class(nn[mod]) then return class_text("nn." .. mod, nn[mod]) end
    local opt = short:match("^optim%.(.*)$")
    if opt and is_class(optim[opt]) then return class_text("optim." .. opt, optim[opt]) end
    local fn = short:match("^F%.(.*)$")
    if fn and type(nn.functional[fn]) == "function" then return function_text("F." .. fn, nn.functional[fn]) end
    local method = short:match("^Tensor[.:](.*)$") or short:match("^[%w_]+:([%w_]+)$")
    if method and type(Tensor[method]) == "function" then return function_text("Tensor:" .. method, Tensor[method]) end
    if value == nil and is_class(nn[short]) then return class_text("nn." .. short, nn[short]) end
    if value == nil and type(ns[short]) == "function" then return function_text("ds." .. short, ns[short]) end
    local v = M.resolve(ns, short) -- any public name: a library's function, class or value
    if v ~= nil then
      if type(v) == "function" then return function_text("ds." .. short, v) end
      if is_class(v) then return class_text("ds." .. short, v) end
      return value_text("ds." .. short, v)
    end
  end
  if type(value) == "function" then return function_text(name or "function", value) end
  if is_class(value) then return class_text(name or "class", value) end
  if constructor(value) or M.is_namespace(value) then return value_text(name or "class", value) end
  return nil
end

-- ds.help(name or value): prints the help text (or says nothing is known) and returns it
function M.help(ns, name, value)
  local text = M.text(ns, name, value)
  if not text then
    text = string.format("no help for %s (try an op name such as 'matmul', 'nn.Linear', 'F.relu', 'optim.Adam')",
      tostring(name or value))
  end
  print(text)
  return text
end

return M
