-- convert/guard.lua: a call hook while converted code is traced. A user function that runs unconverted (reached by a
-- path conversion does not see: a C function calling back, a metamethod, an iterator, ds calling a hook) and that
-- tests a value's truth is refused; the upvalues and globals that the functions called by a tensor branch or loop
-- body change while it is traced are found (branch_begin / branch_end), since the graph would keep their traced
-- values for every input.
local state = require("ds.state")
local analysis = require("ds.convert.analysis")
local source = require("ds.convert.source")

local M = {}
local getinfo, getupvalue, upvalueid = debug.getinfo, debug.getupvalue, debug.upvalueid

-- library code is never converted: ds itself and installed Lua modules
local ds_dir = debug.getinfo(1, "S").source:match("^@(.*/)convert/[^/]*$") or "\0"
local LIBRARY_DIRS = { ds_dir, "/usr/share/lua/", "/usr/local/share/lua/", "/usr/lib/", "/usr/local/lib/" }
local RUNTIME = "@" .. ds_dir .. "convert/runtime.lua"

-- "the function defined at file:line", for errors
function M.describe(fn)
  local info = getinfo(fn, "S")
  if info.what == "C" then return "a C function" end
  return string.format("the function defined at %s:%d", info.short_src, info.linedefined)
end

-- LuaJIT's standard functions written in Lua bytecode (table.foreach, table.remove, ...): no source file
local BUILTIN = {}
for _, lib in ipairs { _G, table, string, math, coroutine, os, io, debug, package, bit, jit } do
  for _, f in pairs(lib) do
    if type(f) == "function" and getinfo(f, "S").short_src:match("^%[builtin") then BUILTIN[f] = true end
  end
end

-- functions that run as they are: C functions, LuaJIT's builtins, ds itself and installed Lua modules
function M.is_library(fn)
  if BUILTIN[fn] then return true end
  local src = getinfo(fn, "S").source
  if src == "=[C]" then return true end
  if src:sub(1, 1) ~= "@" then return false end
  for _, d in ipairs(LIBRARY_DIRS) do if src:sub(2, #d + 1) == d then return true end end
  return false
end

local converted = setmetatable({}, { __mode = "k" }) -- the functions of converted code
function M.mark(f) converted[f] = true; return f end
function M.is_converted(f) return converted[f] == true end

-- per function: "C", "runtime", "library", "safe" (user code testing no value's truth) or a reason to refuse it
local kind = setmetatable({}, { __mode = "k" })
local function classify(f)
  local k = kind[f]
  if k then return k end
  local info = getinfo(f, "S")
  if info.what == "C" then k = "C"
  elseif info.source == RUNTIME then k = "runtime"
  elseif M.is_library(f) then k = "library"
  else
    local nodes, why = source.locate(f)
    if not nodes then k = "its source cannot be read: " .. why
    else
      local test = analysis.truth_test(nodes[1])
      k = test and string.format("it tests a value's truth at %s:%d, which unconverted is true for every tensor",
        info.short_src, test.line) or "safe"
    end
  end
  kind[f] = k
  return k
end

-- ---- side effects of a traced branch ----
-- the branches being traced, innermost last: {fns =, ups = id -> {f, i, value}, envs = env -> copy}
local recorders = {}

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local function record(f)
  for _, rec in ipairs(recorders) do
    if not rec.fns[f] then
      rec.fns[f] = true
      local i = 1
      while true do
        local name, v = getupvalue(f, i)
        if not name then break end
        local id = upvalueid(f, i)
        if not rec.ups[id] then rec.ups[id] = { f = f, i = i, value = v, name = name } end
        i = i + 1
      end
      local env = getfenv(f)
      if not rec.envs[env] then rec.envs[env] = copy(env) end
    end
  end
end

local function same(a, b) return rawequal(a, b) or (a ~= a and b ~= b) end

-- ---- the hook ----
local armed, previous = 0, nil
local resets = {} -- what to forget when a trace ends, normally or by an error

-- fn() runs when a guarded trace ends
function M.on_stop(fn) resets[#resets + 1] = fn end

local function stop()
  armed = 0
  recorders = {}
  for _, fn in ipairs(resets) do fn() end
  debug.sethook(previous and previous[1], previous and previous[2] or "", previous and previous[3])
end

local function refuse(f, why)
  stop()
  error(string.format("convert: %s is called while converted code is traced by a C function, a metamethod, an "
    .. "iterator or ds itself (pcall, table.sort, __index, a hook, ...), which conversion cannot see, and %s. Call it "
    .. "directly from the converted code, or trace with {convert = false}", M.describe(f), why), 0)
end

local wrappers = setmetatable({}, { __mode = "k" }) -- the functions M.guarded made

-- no trace: inside ds.init_scope (a guarded function is still running: keep watching) or after a trace that ended
-- with an error (stop)
local function still_running()
  for level = 3, 1000 do
    local info = getinfo(level, "f")
    if not info then return false end
    if wrappers[info.func] then return true end
  end
  return false
end

local function hook()
  if state.trace == nil then
    if not still_running() then stop() end
    return
  end
  local f = getinfo(2, "f").func
  if converted[f] then
    if #recorders > 0 then record(f) end
    return
  end
  local k = classify(f)
  if k == "C" or k == "runtime" or k == "library" then return end
  if #recorders > 0 then record(f) end
  if k == "safe" then return end
  -- unconverted user code that tests a value's truth, under a trace of converted code: whatever called it (a C
  -- function, a metamethod, an iterator, ds calling a hook or a branch function) did so behind conversion's back
  refuse(f, k)
end

local function disarm(...)
  armed = armed - 1
  if armed <= 0 then stop() end
  return ...
end

-- fn wrapped so that the hook runs while it does (a trace of converted code); an error leaves the hook to stop
-- itself at the next call after the trace ended. A trace that ended while its hook had been replaced (Ctrl-C at the
-- prompt: luajit's interrupt hook raised in it) never stopped: the next one starts afresh.
function M.guarded(fn)
  local w = function(...)
    if debug.gethook() ~= hook then
      if armed > 0 then stop() end
      local h, mask, count = debug.gethook()
      previous = h and { h, mask, count } or nil
      debug.sethook(hook, "c")
    end
    armed = armed + 1
    return disarm(fn(...))
  end
  wrappers[w] = true
  return w
end

-- a tensor branch or loop body is about to be traced
function M.branch_begin()
  local rec = { fns = {}, ups = {}, envs = { [_G] = copy(_G) } }
  recorders[#recorders + 1] = rec
  return rec
end

-- it was traced: an upvalue or global it changed is an error naming the construct's site
function M.branch_end(rec, site, what)
  for i = #recorders, 1, -1 do if recorders[i] == rec then table.remove(recorders, i) end end
  local function fail(name, whose)
    error(string.format("%s: %s changes `%s`, %s, while it is traced; the graph would keep the traced value for "
      .. "every input (graph control flow cannot carry Lua side effects): return the value instead, or change it "
      .. "outside the tensor branch or loop", site, what, name, whose), 0)
  end
  for _, u in pairs(rec.ups) do
    local _, now = getupvalue(u.f, u.i)
    if not same(now, u.value) then fail(u.name, "a variable of " .. M.describe(u.f)) end
  end
  for env, before in pairs(rec.envs) do
    for k, v in pairs(before) do if not same(rawget(env, k), v) then fail(tostring(k), "a global") end end
    for k in pairs(env) do if before[k] == nil then fail(tostring(k), "a global") end end
  end
end

return M
