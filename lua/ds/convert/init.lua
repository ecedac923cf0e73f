-- convert/init.lua: ds.convert(fn) / ds.convert_source(fn): find fn's source (source.lua: proven by its bytecode),
-- rewrite its control flow (rewrite.lua) and load the result on the original lines, its upvalues joined to fn's
-- (debug.upvaluejoin: the same variables, not copies). Also the hooks ds.trace uses (trace.set_converter) and an
-- eager module call uses (its forward converted: ds.convert_modules), and ds.loadfile / ds.loadstring, which keep the
-- text they load.
local source = require("ds.convert.source")
local rewrite = require("ds.convert.rewrite")
local runtime = require("ds.convert.runtime")
local guard = require("ds.convert.guard")
local errors = require("ds.errors")
local T = require("ds.trace")
local Module = require("ds.nn.module")
local state = require("ds.state")
local args = require("ds.args")

local M = {}

local describe = guard.describe

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

-- LuaJIT's limits a converted function can exceed (each branch and loop body becomes a function), by its message
local LIMITS = {
  { "upvalues", "LuaJIT's limit on upvalues per function: a branch or loop body that becomes a function reads too "
    .. "many variables declared outside it" },
  { "local variables", "LuaJIT's limit of 200 local variables per function: a branch or loop body that becomes a "
    .. "function carries too many variables" },
  { "too many syntax levels", "LuaJIT's limit of 200 syntax levels: the tensor ifs and loops are nested too deeply "
    .. "(each becomes a nested function)" },
  { "too complex", "LuaJIT's limit of 250 registers per function: a construct carries too many variables" },
}

local function over_limit(fn, err)
  for _, l in ipairs(LIMITS) do
    if err:find(l[1], 1, true) then
      local chunk, line = err:match("^(.-):(%d+):")
      line = err:match("function at line (%d+)") or line
      errors.raise(string.format("convert: cannot convert %s: at %s:%s the converted code exceeds %s (%s). Split the "
        .. "function, or trace it with {convert = false} and use ds.cond / ds.while_loop (a module's forward called "
        .. "eagerly: m.convert_forward = false)", describe(fn),
        chunk or "?", line or "?", l[2], err))
    end
  end
  errors.raise(string.format("convert: internal error, the converted source of %s does not load: %s", describe(fn),
    err))
end

-- the converted chunk text of fn and the name of its runtime variable, or nil and why not
local function chunk_text(fn, mode)
  local nodes, name, info = source.locate(fn)
  if not nodes then return nil, name end
  local ups = upvalue_names(fn)
  local text, rt = rewrite.generate(nodes[1], name, mode, ups)
  for i = 2, #nodes do -- identical code at several places: their conversions must agree
    if rewrite.generate(nodes[i], name, mode, ups) ~= text then
      return nil, string.format("%d functions with the same code but different text are defined on %s:%d", #nodes,
        name, info.linedefined)
    end
  end
  return text, rt, info
end

-- modes: "convert" (ds.convert, ds.trace), "check" ({convert = false}: conditions checked only) and "eager" (a
-- module's forward called eagerly: as "convert", but a function without provable source runs as it is)
local MODES = { convert = "convert", check = "check", eager = "convert" } -- mode -> the rewrite's mode
local runtimes, cache, failed = {}, {}, {} -- failed: per mode, fn -> why it has no conversion
-- a converted function -> the function it converts (converted code hands its functions to ds.convert, ds.trace, ...
-- converted: those convert the original)
local original_of = setmetatable({}, { __mode = "k" })
for mode in pairs(MODES) do
  cache[mode] = setmetatable({}, { __mode = "k" })
  failed[mode] = setmetatable({}, { __mode = "k" })
end

-- the converted fn, or nil and why it has none
local function load_converted(fn, mode)
  local text, rt, info = chunk_text(fn, MODES[mode])
  if not text then return nil, rt end
  local chunk, err = loadstring(text, info.source)
  if not chunk then over_limit(fn, err) end
  local g = guard.mark(chunk)(runtimes[mode]) -- (marked: the hook lets it run while a trace converts a callee)
  local index = {}
  for i, n in ipairs(upvalue_names(fn)) do index[n] = index[n] or i end
  for i, n in ipairs(upvalue_names(g)) do
    if n ~= rt and index[n] then debug.upvaluejoin(g, i, fn, index[n]) end
  end
  setfenv(g, getfenv(fn))
  original_of[g] = fn
  return guard.mark(g)
end

-- the converted fn in mode (callees, the trace hook), fn itself when it must not be converted. A function whose source
-- cannot be proven is an error in mode "convert" (unless lenient: a function handed to ds code, which the trace hook
-- still checks if it runs); in modes "check" ({convert = false}) and "eager" it runs unconverted.
local function converted_or_self(fn, mode, lenient)
  fn = args.original[fn] or fn -- a method behind its argument check: the method as written
  fn = original_of[fn] or fn
  local c = cache[mode]
  local g = c[fn]
  if g then return g end
  if guard.is_library(fn) then c[fn] = fn; return fn end
  local why = (lenient or mode ~= "convert") and failed[mode][fn] -- (an error says why afresh: files change)
  if not why then
    g, why = load_converted(fn, mode)
    if g then
      c[fn] = g
      c[g] = g
      return g
    end
    failed[mode][fn] = why
  end
  if mode ~= "convert" or lenient then return fn end
  errors.raise(string.format("convert: cannot convert %s: %s. Conversion must see the code that runs (a tensor "
    .. "condition in unconverted code would take the `then` branch for every input); trace with {convert = false} "
    .. "to run it unconverted", describe(fn), why))
end

for mode in pairs(MODES) do
  runtimes[mode] = runtime.new(mode, function(f, lenient) return converted_or_self(f, mode, lenient) end)
end

local function need_function(fn, what)
  if type(fn) ~= "function" then errors.raise(what .. ": expects a Lua function, got " .. type(fn)) end
end

-- ds.convert(fn) -> the converted function (errors when fn's source cannot be found or parsed)
function M.convert(fn)
  need_function(fn, "convert")
  fn = original_of[fn] or fn
  local c = cache.convert
  if c[fn] and c[fn] ~= fn then return c[fn] end
  local g, why = load_converted(fn, "convert")
  if not g then errors.raise(string.format("convert: cannot convert %s: %s", describe(fn), why)) end
  c[fn] = g
  c[g] = g
  return g
end

-- ds.convert_source(fn) -> the rewritten source text (what ds.convert loads)
function M.convert_source(fn)
  need_function(fn, "convert_source")
  fn = original_of[fn] or fn
  local text, why = chunk_text(fn, "convert")
  if not text then errors.raise(string.format("convert_source: cannot convert %s: %s", describe(fn), why)) end
  return text
end

-- the mode of the trace being run ("convert" or "check"), for the module calls it makes (an error inside leaves it
-- set; the next trace sets its own)
local trace_mode = nil
local function restore(prev, ...)
  trace_mode = prev
  return ...
end
local function in_mode(mode, fn)
  return function(...)
    local prev = trace_mode
    trace_mode = mode
    return restore(prev, fn(...))
  end
end

-- for ds.trace: fn converted (convert = true) or with its conditions checked (convert = false)
-- (converted, it runs under guard.lua's hook: functions reached behind conversion's back are checked)
T.set_converter(function(fn, convert)
  if convert == false then return in_mode("check", converted_or_self(fn, "check")) end
  local g = converted_or_self(fn, "convert")
  return in_mode("convert", g == fn and fn or guard.guarded(g))
end)

-- an eager call m(x) runs m's forward converted (once per function, cached), so eager, traced and compiled agree,
-- unless ds.convert_modules(false) or m.convert_forward == false (on the instance or its class). While tracing the
-- trace's mode decides: a module called by ds code (nn.Sequential, a container) runs its forward converted too
local convert_modules = true
local eager_forward = setmetatable({}, { __mode = "kv" }) -- forward -> what an eager call runs
Module._set_forward_converter(function(m, f)
  if state.trace ~= nil then
    if trace_mode == nil then return f end
    local g = converted_or_self(f, trace_mode)
    return g == (args.original[f] or f) and f or g
  end
  if not convert_modules or m.convert_forward == false then return f end
  local g = eager_forward[f]
  if g then return g end
  g = converted_or_self(f, "eager")
  if g == (args.original[f] or f) then g = f end -- unconverted: f behind its argument check
  eager_forward[f] = g
  return g
end)

-- ds.convert_modules(on) -> the previous setting; ds.convert_modules() -> the current one
function M.convert_modules(on)
  if on ~= nil and type(on) ~= "boolean" then
    errors.raise("convert_modules: expects a boolean (or nothing), got " .. type(on))
  end
  local was = convert_modules
  if on ~= nil then convert_modules = on end
  return was
end

-- ds.loadstring(text, chunkname) / ds.loadfile(path): as Lua's, keeping the text so the functions it defines can
-- be converted after the file changes (or for chunks named "=...", which have no file)
function M.loadstring(text, chunkname)
  if type(text) ~= "string" then errors.raise("loadstring: expects the source text (a string), got " .. type(text)) end
  if chunkname ~= nil and type(chunkname) ~= "string" then
    errors.raise("loadstring: the chunk name must be a string, got " .. type(chunkname))
  end
  local f, err = loadstring(text, chunkname)
  if f then source.remember(chunkname or text, text) end
  return f, err
end

function M.loadfile(path)
  if type(path) ~= "string" then errors.raise("loadfile: expects a path (a string), got " .. type(path)) end
  local fh, err = io.open(path, "rb")
  if not fh then return nil, "cannot open " .. path .. ": " .. tostring(err) end
  local text = fh:read("*a")
  fh:close()
  return M.loadstring(text, "@" .. path)
end

function M.install(ds)
  ds.convert = M.convert
  ds.convert_source = M.convert_source
  ds.convert_modules = M.convert_modules
  ds.loadstring = M.loadstring
  ds.loadfile = M.loadfile
end

return M
