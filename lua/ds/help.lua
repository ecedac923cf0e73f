-- help.lua: ds.help(name | function): an op's signature, attrs with defaults, dtypes and description from
-- the op table (the source docs/API.md is generated from); nn modules, optimizers and Lua functions by
-- their parameter names, the comment above their definition and their file:line. The namespace (ds) to
-- look names up in is passed by the caller.
local D = require("ds.dispatch")
require("ds.ops") -- fills the op table
local Tensor = require("ds.tensor")

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

local function op_text(def)
  local args = {}
  if def.variadic then args[1] = "{tensors...}"
  else
    local names = INPUT_NAMES[def.ninputs or 1] or {}
    for i = 1, def.ninputs or 1 do args[#args + 1] = names[i] or ("t" .. i) end
  end
  for _, a in ipairs(def.args or {}) do args[#args + 1] = a end
  local options = #(def.attrs or {}) > 0 and ", {options})" or ")"
  local lines = { "ds." .. def.name .. "(" .. table.concat(args, ", ") .. options }
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
    local text = function_text(name, cls.new, true)
    return text:gsub("\n", "\ndefaults: " .. show_table(cls.defaults) .. "\n", 1)
  end
  return function_text(name, cls.init, true)
end

local function is_class(v) return type(v) == "table" and (v.init ~= nil or (v.defaults ~= nil and v.new ~= nil)) end

-- help text for a name ("matmul", "conv2d", "nn.Linear", "F.relu", "optim.Adam", "Tensor.sum"), or for a
-- value (a function or class) with the name to show; nil when nothing is known. ns: the ds namespace.
function M.text(ns, name, value)
  if type(name) ~= "string" and value == nil then name, value = nil, name end
  local nn, optim = ns.nn, ns.optim
  local short = name and name:gsub("^ds%.", "")
  if short then
    local op = D.by_name[short] or D.by_name[short:match("^F%.(.*)$") or ""] or
      D.by_name[short:match("^Tensor[.:](.*)$") or ""]
    if op then return op_text(op) end
    local mod = short:match("^nn%.(.*)$")
    if mod and is_class(nn[mod]) then return class_text("nn." .. mod, nn[mod]) end
    local opt = short:match("^optim%.(.*)$")
    if opt and is_class(optim[opt]) then return class_text("optim." .. opt, optim[opt]) end
    local fn = short:match("^F%.(.*)$")
    if fn and type(nn.functional[fn]) == "function" then return function_text("F." .. fn, nn.functional[fn]) end
    local method = short:match("^Tensor[.:](.*)$")
    if method and type(Tensor[method]) == "function" then return function_text("Tensor:" .. method, Tensor[method]) end
    if value == nil and is_class(nn[short]) then return class_text("nn." .. short, nn[short]) end
    if value == nil and type(ns[short]) == "function" then return function_text("ds." .. short, ns[short]) end
  end
  if type(value) == "function" then return function_text(name or "function", value) end
  if is_class(value) then return class_text(name or "class", value) end
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
