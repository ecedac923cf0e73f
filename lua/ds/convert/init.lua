-- convert/init.lua: ds.convert(fn) / ds.convert_source(fn): find fn's source (debug.getinfo), parse it, rewrite
-- its control flow (rewrite.lua) and load the result on the original lines, its upvalues joined to fn's
-- (debug.upvaluejoin: the same variables, not copies). Also the hook ds.trace uses (trace.set_converter).
local parser = require("ds.convert.parser")
local rewrite = require("ds.convert.rewrite")
local runtime = require("ds.convert.runtime")
local errors = require("ds.errors")
local T = require("ds.trace")
local args = require("ds.args")

local M = {}

-- library code is never converted: ds itself and installed Lua modules
local ds_dir = debug.getinfo(1, "S").source:match("^@(.*/)convert/[^/]*$") or "\0"
local LIBRARY_DIRS = { ds_dir, "/usr/share/lua/", "/usr/local/share/lua/", "/usr/lib/", "/usr/local/lib/" }

local parsed = {} -- source name -> {text =, root =}

local function source_text(info)
  local src = info.source
  if src:sub(1, 1) == "@" then
    local f = io.open(src:sub(2), "rb")
    if not f then return nil, "its source file " .. src:sub(2) .. " cannot be read" end
    local text = f:read("*a")
    f:close()
    return text, src:sub(2)
  end
  if src:sub(1, 1) == "=" then return nil, "it was loaded without source text (" .. src .. ")" end
  return src, info.short_src
end

-- the Function node of fn, or nil and why not
local function find_node(fn)
  local info = debug.getinfo(fn, "Su")
  if info.what == "C" then return nil, "it is a C function" end
  if info.what == "main" then return nil, "it is a main chunk" end
  local text, name = source_text(info)
  if not text then return nil, name end
  local entry = parsed[info.source]
  if not entry or entry.text ~= text then
    local ok, root = pcall(parser.parse, text, name)
    if not ok then return nil, "its source does not parse: " .. tostring(root) end
    entry = { text = text, root = root, functions = parser.functions(root) }
    parsed[info.source] = entry
  end
  local found = {}
  for _, f in ipairs(entry.functions) do
    if f.line == info.linedefined and f.endline == info.lastlinedefined and #f.params == info.nparams
      and f.vararg == info.isvararg then
      found[#found + 1] = f
    end
  end
  if #found ~= 1 then
    return nil, string.format("%s functions of this shape are defined on %s:%d", #found == 0 and "no" or "several",
      name, info.linedefined)
  end
  return found[1], name, info
end

local function upvalue_names(fn)
  local names, i = {}, 1
  while true do
    local n = debug.getupvalue(fn, i)
    if not n then break end
    names[i] = n
    i = i + 1
  end
  return names
end

-- the chunk text: line 1 declares the runtime and fn's upvalues, the function sits on its own lines
local function chunk_text(fn, mode)
  local node, name, info = find_node(fn)
  if not node then return nil, name end
  local ups, seen, decl = upvalue_names(fn), {}, { "__ds_rt" }
  for _, n in ipairs(ups) do if not seen[n] and n ~= "__ds_rt" then seen[n] = true; decl[#decl + 1] = n end end
  local prefix = "local " .. table.concat(decl, ", ") .. " = ...; return"
  return rewrite.generate(node, name, mode, prefix), name, info
end

local runtimes, cache = {}, {}
for _, mode in ipairs { "convert", "check" } do cache[mode] = setmetatable({}, { __mode = "k" }) end

local function load_converted(fn, mode)
  local text, name, info = chunk_text(fn, mode)
  if not text then return nil, name end
  local chunk, err = loadstring(text, info.source)
  if not chunk then error("convert: internal error, the converted source does not load: " .. err, 0) end
  local g = chunk(runtimes[mode])
  local index = {}
  for i, n in ipairs(upvalue_names(fn)) do index[n] = index[n] or i end
  for i, n in ipairs(upvalue_names(g)) do
    if n ~= "__ds_rt" and index[n] then debug.upvaluejoin(g, i, fn, index[n]) end
  end
  setfenv(g, getfenv(fn))
  return g
end

local function is_library(fn)
  local src = debug.getinfo(fn, "S").source
  if src:sub(1, 1) ~= "@" then return true end
  for _, d in ipairs(LIBRARY_DIRS) do if src:sub(2, #d + 1) == d then return true end end
  return false
end

-- the converted fn in mode, or fn itself when it cannot or must not be converted (callees, the trace hook)
local function converted_or_self(fn, mode)
  fn = args.original[fn] or fn -- a method behind its argument check: the method as written
  local c = cache[mode]
  local g = c[fn]
  if g then return g end
  if is_library(fn) then c[fn] = fn; return fn end
  g = load_converted(fn, mode) or fn
  c[fn] = g
  c[g] = g
  return g
end

for _, mode in ipairs { "convert", "check" } do
  runtimes[mode] = runtime.new(mode, function(f) return converted_or_self(f, mode) end)
end

local function need_function(fn, what)
  if type(fn) ~= "function" then errors.raise(what .. ": expects a Lua function, got " .. type(fn)) end
end

-- ds.convert(fn) -> the converted function (errors when fn's source cannot be found or parsed)
function M.convert(fn)
  need_function(fn, "convert")
  local c = cache.convert
  if c[fn] and c[fn] ~= fn then return c[fn] end
  local g, why = load_converted(fn, "convert")
  if not g then errors.raise("convert: cannot convert this function: " .. why) end
  c[fn] = g
  c[g] = g
  return g
end

-- ds.convert_source(fn) -> the rewritten source text (what ds.convert loads)
function M.convert_source(fn)
  need_function(fn, "convert_source")
  local text, why = chunk_text(fn, "convert")
  if not text then errors.raise("convert_source: cannot convert this function: " .. why) end
  return text
end

-- for ds.trace: fn converted (convert = true) or with its conditions checked (convert = false)
T.set_converter(function(fn, convert)
  return converted_or_self(fn, convert == false and "check" or "convert")
end)

function M.install(ds)
  ds.convert = M.convert
  ds.convert_source = M.convert_source
end

return M
