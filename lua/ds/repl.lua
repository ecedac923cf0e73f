-- repl.lua: the `ds` interactive prompt: expressions print their values, readline editing with history
-- (~/.ds_history) and completion, `?name` help, errors as one line at the user's code, `:time on`.
-- Without a terminal on stdin it reads lines quietly (no prompt, no readline), for pipes and scripts.
local ds = require("ds")
local pretty = require("ds.pretty")
local dsffi = require("ds.ffi")
local clock = require("ds.clock")
local errors = require("ds.errors")
local readline = require("readline") -- Debian lua-readline

local M = {}

local HELP = [[
  x = ds.randn(3, 4)   assign (globals persist);  x:sum(2)   an expression prints its value
  ?name                help for an op, module or function (?matmul, ?nn.Linear, ?F.relu, ?optim.Adam)
  :time on|off         print each line's run time
  :debug on|off        full tracebacks with ds's internal frames (ds.debug(true) does the same)
  :quit                leave (or Ctrl-D); history is kept in ~/.ds_history]]

-- the value printed for a list of results (one line each result; nothing for none)
local function results_text(n, ...)
  local parts = {}
  for i = 1, n do parts[i] = pretty.format((select(i, ...))) end
  return table.concat(parts, "\n")
end

local function error_text(err) return errors.report(err, 2) end

local function pack(...) return select("#", ...), { ... } end

-- compile a line: as an expression list first (so `x` prints x), else as a statement; nil, "incomplete"
-- when the chunk needs more lines. The expressions are arguments of pack, not a tail call, so the chunk's
-- frame (the user's line) is on the stack when an op raises.
local function compile(src)
  local f = loadstring("local pack = ...; return pack(" .. src .. "\n)", "=stdin")
  if f then return function() return f(pack) end end
  local err
  f, err = loadstring(src, "=stdin")
  if f then return f end
  if err:match("<eof>") then return nil, "incomplete" end
  return nil, err
end

-- the candidates completing `word` (a chain a.b.c or a.b:c), from globals, table fields and methods
local function completions(word)
  local head, sep, prefix = word:match("^(.-)([.:]?)([%w_]*)$")
  local scope
  if sep == "" then scope = _G
  else
    scope = _G
    for name in head:gmatch("[^.:]+") do
      local v = type(scope) == "table" and rawget(scope, name) or (type(scope) == "table" and scope[name])
      if v == nil then return {} end
      scope = v
    end
  end
  local seen, out = {}, {}
  local function add_keys(t, methods_only)
    for k, v in pairs(t) do
      if type(k) == "string" and k:sub(1, #prefix) == prefix and k:sub(1, 1) ~= "_" and not seen[k]
        and (not methods_only or type(v) == "function") then
        seen[k] = true
        out[#out + 1] = head .. sep .. k
      end
    end
  end
  if ds.is_tensor(scope) then add_keys(ds.Tensor, true)
  elseif type(scope) == "table" then
    local t, depth = scope, 0
    while type(t) == "table" and depth < 8 do -- fields, then what the class chain offers
      add_keys(t, sep == ":")
      local mt = getmetatable(t)
      t = type(mt) == "table" and type(mt.__index) == "table" and mt.__index or nil
      depth = depth + 1
    end
  end
  table.sort(out)
  return out
end
M.completions = completions

-- the line reader: readline on a terminal (history, completion), plain io.read otherwise
local function make_reader(interactive)
  if not interactive then
    return { read = function() return io.read("*l") end, close = function() end }
  end
  readline.set_options({ histfile = "~/.ds_history", keeplines = 1000, completion = true })
  readline.set_readline_name("ds")
  readline.set_completion_append_character("")
  readline.set_complete_function(function(text, from, to) return completions(text:sub(from, to)) end)
  return { read = readline.readline, close = readline.save_history }
end

-- run one chunk; returns the text to print (may be empty) and whether it failed
local function evaluate(f, timing)
  local t0 = clock()
  local ok, n, values = xpcall(f, error_text)
  local elapsed = clock() - t0
  local text
  if not ok then text = "error: " .. tostring(n)
  elseif type(n) == "number" and type(values) == "table" then text = results_text(n, unpack(values, 1, n))
  else text = "" end
  if timing then text = text .. (text ~= "" and "\n" or "") .. string.format("(%.3f ms)", elapsed * 1e3) end
  return text, not ok
end

-- a ":command" or "?name" line; returns true when handled
local function command(line, state)
  local name = line:match("^%?%s*(.-)%s*$")
  if name then
    if name == "" then print(HELP) else
      local ok, value = pcall(function() return loadstring("return " .. name)() end)
      ds.help(name, ok and value or nil)
    end
    return true
  end
  local cmd, arg = line:match("^:(%a+)%s*(%a*)")
  if not cmd then return false end
  if cmd == "time" then state.timing = arg ~= "off"
  elseif cmd == "debug" then ds.debug(arg ~= "off")
  elseif cmd == "quit" or cmd == "q" then state.quit = true
  elseif cmd == "help" then print(HELP)
  else print("unknown command :" .. cmd .. " (:help lists them)") end
  return true
end

-- the prompt loop; opts.interactive defaults to "stdin is a terminal"
function M.run(opts)
  opts = opts or {}
  local interactive = opts.interactive
  if interactive == nil then interactive = dsffi.C.ds_isatty(0) ~= 0 end
  _G.ds, _G.nn, _G.F, _G.optim = ds, ds.nn, ds.F, ds.optim
  local reader = make_reader(interactive)
  if interactive then
    print(string.format("ds %s (LuaJIT, %s, %d threads). ?name for help, :help for commands, Ctrl-D to leave.",
      ds.info().version or "", ds.info().isa or "", ds.get_num_threads and ds.get_num_threads() or 1))
  end
  local state, pending, failures = {}, nil, 0
  while not state.quit do
    local line = reader.read(pending and ">> " or "> ")
    if line == nil then break end
    if pending == nil and command(line, state) then -- handled
    else
      local src = pending and (pending .. "\n" .. line) or (line:gsub("^=", ""))
      local f, err = compile(src)
      if err == "incomplete" then pending = src
      else
        pending = nil
        local text, failed
        if f then text, failed = evaluate(f, state.timing)
        else text, failed = "error: " .. err, true end
        if failed then failures = failures + 1 end
        if text ~= "" then print(text) end
      end
    end
    io.stdout:flush()
  end
  if pending then
    print("error: the input ended inside an unfinished statement: " .. pending)
    failures = failures + 1
  end
  reader.close()
  if interactive then print() end
  return failures
end

-- `ds script.lua args...`: run a script as luajit would (arg[0] = script, arg[1..] = args), its errors
-- reported as at the prompt; exit status 1 on an error
local function run_script(path, ...)
  local f, err = loadfile(path)
  if not f then io.stderr:write("ds: ", err, "\n"); os.exit(1) end
  _G.arg = { [0] = path, ... }
  local ok, msg = xpcall(f, error_text, ...)
  if not ok then io.stderr:write("ds: ", msg, "\n"); os.exit(1) end
end

-- bin/ds: no arguments, the prompt (exit status 1 when a piped session had errors); else a script
function M.main(...)
  if select("#", ...) > 0 then return run_script(...) end
  local interactive = dsffi.C.ds_isatty(0) ~= 0
  local failures = M.run({ interactive = interactive })
  os.exit((not interactive and failures > 0) and 1 or 0)
end

return M
