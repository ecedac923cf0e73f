-- repl.lua: the `ds` interactive prompt: expressions print their values, readline editing with history
-- (~/.ds_history) and completion, `?name` help, errors as one line at the user's code, `:time on`.
-- Without a terminal on stdin it reads lines quietly (no prompt, no readline), for pipes and scripts. Ctrl-C at the
-- prompt cancels the line; during a computation it interrupts it, any number of times (src/sigint.c chains LuaJIT's
-- SIGINT handler and puts itself back, so a second Ctrl-C inside a long C kernel does not kill the process).
local ffi = require("ffi")
local bit = require("bit")
local ds = require("ds")
local pretty = require("ds.pretty")
local dsffi = require("ds.ffi")
local clock = require("ds.clock")
local errors = require("ds.errors")
local readline = require("readline") -- Debian lua-readline

local M = {}

ffi.cdef [[
int ds_sigint_install(void);
extern int rl_catch_signals;
extern int rl_done;
int rl_forced_update_display(void);
typedef int ds_repl_command(int count, int key);
int rl_bind_key(int key, ds_repl_command *fn);
struct ds_repl_termios { uint32_t iflag, oflag, cflag, lflag; uint8_t line, cc[32]; uint32_t ispeed, ospeed; };
int tcgetattr(int fd, struct ds_repl_termios *t);
int tcsetattr(int fd, int when, const struct ds_repl_termios *t);
]]
local POLLIN, ISIG, TCSANOW, CTRL_C = 1, 1, 0, 3
local libreadline -- the C library behind lua-readline (kept loaded: its variables are set)

-- SIGINT: luajit's handler (bin/ds runs under luajit's interpreter) makes the running Lua code raise "interrupted!";
-- src/sigint.c chains it and keeps itself installed (put back again after each interrupt, should anything replace it)
local function rearm_interrupt() dsffi.C.ds_sigint_install() end
local function is_interrupt(err) return type(err) == "string" and err:find("interrupted!$") ~= nil end

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
-- The chunk runs interpreted (jit.off), so that Ctrl-C stops even a tight loop typed at the prompt; ds.loadstring
-- keeps its text, so functions defined at the prompt can be converted.
local function compile(src)
  local f = ds.loadstring("local pack = ...; return pack(" .. src .. "\n)", "=stdin")
  if f then
    jit.off(f, true)
    return function() return f(pack) end
  end
  local err
  f, err = ds.loadstring(src, "=stdin")
  if f then jit.off(f, true); return f end
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

-- readline's completion hook: an error (an erroring __index) is shown, never thrown through readline's C frames
local function safe_completions(text)
  local ok, list = pcall(completions, text)
  if ok then return list end
  io.write("\nerror in completion: ", tostring(list), "\n")
  libreadline.rl_forced_update_display() -- the prompt and the line again, below the message
  return {}
end

-- readline (its callback interface) on a terminal: history, completion, Ctrl-C cancels the line; read(prompt) ->
-- the line, false when Ctrl-C cancelled it, nil at the end of input.
-- While a line is read the terminal sends Ctrl-C as a key (ISIG off), bound to cancel the line: a SIGINT there
-- would make luajit's handler raise "interrupted!" in whatever Lua code runs next, which may be a callback
-- inside readline's C frames (the line handler, completion), and unwinding through them corrupted its heap.
-- Readline puts the terminal back (ISIG on) when the line is done, so Ctrl-C interrupts computations.
local cancelled = false
local cancel_key -- the C callback bound to Ctrl-C (kept alive)
local function terminal_reader()
  libreadline = libreadline or ffi.load("libreadline.so.8")
  -- readline must not handle SIGINT itself: its handler saves and re-raises luajit's, which then resets itself
  libreadline.rl_catch_signals = 0
  cancel_key = cancel_key or ffi.cast("ds_repl_command *", function()
    cancelled = true
    libreadline.rl_done = 1
    return 0
  end)
  libreadline.rl_bind_key(CTRL_C, cancel_key)
  local tio = ffi.new("struct ds_repl_termios")
  readline.set_options({ histfile = "~/.ds_history", keeplines = 1000, completion = true })
  readline.set_readline_name("ds")
  readline.set_completion_append_character("")
  readline.set_complete_function(function(text, from, to) return safe_completions(text:sub(from, to)) end)
  local fds = ffi.new("struct ds_pollfd[1]", { { fd = 0, events = POLLIN } })
  local function read(prompt)
    local line, done = nil, false
    -- the handler is removed as the line completes (else readline shows the next prompt itself)
    cancelled = false
    readline.handler_install(prompt, function(l) line, done = l, true; readline.handler_remove() end)
    if ffi.C.tcgetattr(0, tio) == 0 then
      tio.lflag = bit.band(tio.lflag, bit.bnot(ISIG))
      ffi.C.tcsetattr(0, TCSANOW, tio)
    end
    -- an interrupt raises "interrupted!" in this Lua code: between polls (a short timeout, so a signal taken by
    -- another thread is seen too), never inside readline
    local ok, err = pcall(function()
      while not done do
        if ffi.C.poll(fds, 1, 100) > 0 then readline.read_char() end
      end
    end)
    if not done then readline.handler_remove() end
    if not ok or cancelled then
      if not ok and not is_interrupt(err) then error(err, 0) end
      rearm_interrupt()
      io.write("^C\n")
      return false
    end
    if line and line:match("%S") then readline.add_history(line) end
    return line
  end
  return { read = read, close = readline.save_history }
end

-- the line reader: readline on a terminal, plain io.read otherwise
local function make_reader(interactive)
  if not interactive then
    return { read = function() return io.read("*l") end, close = function() end }
  end
  return terminal_reader()
end

-- run one chunk; returns the text to print (may be empty) and whether it failed
local function evaluate(f, timing)
  local t0 = clock()
  local ok, n, values = xpcall(f, error_text)
  rearm_interrupt() -- (installed already; put back should anything have replaced it)
  local elapsed = clock() - t0
  local text
  if not ok then text = is_interrupt(n) and "\nerror: interrupted!" or "error: " .. tostring(n) -- (not ds's line)
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
  rearm_interrupt()
  local reader = make_reader(interactive)
  if interactive then
    print(string.format("ds %s (LuaJIT, %s, %d threads). ?name for help, :help for commands, Ctrl-D to leave.",
      ds.info().version or "", ds.info().isa or "", ds.get_num_threads and ds.get_num_threads() or 1))
  end
  local state, pending, failures = {}, nil, 0
  -- one line: false at the end of the input
  local function step()
    local line = reader.read(pending and ">> " or "> ")
    if line == nil then return false end
    if line == false then pending = nil -- Ctrl-C: the line (and an unfinished statement) is dropped
    elseif pending == nil and command(line, state) then -- handled
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
    return true
  end
  while not state.quit do
    local ok, more = pcall(step)
    if not ok then -- an interrupt that came between the computation and the prompt
      if not is_interrupt(more) then error(more, 0) end
      rearm_interrupt()
      print("interrupted")
    elseif not more then break end
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
  local f, err = ds.loadfile(path) -- keeps the text: the script's functions convert even if it is edited
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
