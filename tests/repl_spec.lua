-- tests/repl_spec.lua: the `ds` command as a person uses it: through a pseudo-terminal (tmux: typing,
-- tab completion, ?help, an error, history recall, history kept across sessions), in a pipe, and running
-- a script; Ctrl-C at the prompt and during computations, errors inside completion; plus ds.help and the completion
-- candidates directly.
local ds = require("ds")
local repl = require("ds.repl")
local help = require("ds.help")

local root = io.popen("pwd"):read("*l")
-- child processes run without the sanitizer preload of make test-asan (tmux and readline are not built for it)
local CLEAN = "env -u LD_PRELOAD -u DS_ALLOC -u DS_LIB -u ASAN_OPTIONS -u UBSAN_OPTIONS "
-- output and exit status of a shell command
local function sh(cmd)
  local p = io.popen(CLEAN .. "sh -c '" .. cmd:gsub("'", "'\\''") .. "; echo \"exit=$?\"' 2>&1")
  local out = p:read("*a")
  p:close()
  local body, code = out:match("^(.*)exit=(%d+)\n$")
  return body, tonumber(code)
end

local function tmpdir()
  local d = os.tmpname(); os.remove(d); os.execute("mkdir -p " .. d)
  return d
end

describe("ds in a pipe", function()
  it("prints values, tables and errors one per line, with no prompt", function()
    local out = sh("printf 'x = ds.ones(2, 3)\\nx:sum(2)\\n1, \"a\", {1, {2}}\\nx:matmul(ds.ones(4, 5))\\n' | "
      .. root .. "/bin/ds")
    assert.equal("tensor([3., 3.])\n1\n\"a\"\n{ 1, { 2 } }\n"
      .. "error: stdin:1: matmul: inner dims 3 and 4 differ ((2,3) @ (4,5))\n", out)
  end)
  it("continues a statement over lines, answers ?name, and exits 1 after an error", function()
    local out, code = sh("printf 'for i = 1, 2 do\\nprint(i * 10)\\nend\\n?nn.Linear\\nerror(\"boom\")\\n' | "
      .. root .. "/bin/ds")
    assert.truthy(out:find("10\n20\n", 1, true))
    assert.truthy(out:find("nn.Linear(in_features, out_features, opts)", 1, true))
    assert.truthy(out:find("error: stdin:1: boom", 1, true))
    assert.equal(1, code)
  end)
  it("reports input that ends inside a statement", function()
    local out, code = sh("printf 'x = ds.ones(2,\\n' | " .. root .. "/bin/ds")
    assert.truthy(out:find("ended inside an unfinished statement", 1, true))
    assert.equal(1, code)
  end)
end)

describe("ds script.lua args", function()
  it("runs a script with its arguments and reports its error at the user's lines", function()
    local d = tmpdir()
    local f = io.open(d .. "/s.lua", "w")
    f:write('local ds = require("ds")\nprint(arg[0]:match("s.lua$"), arg[1], arg[2])\n',
      'local function g() local y = ds.ones(2, 2):matmul(ds.ones(3, 3)); return y end\ng()\n')
    f:close()
    local out, code = sh(root .. "/bin/ds " .. d .. "/s.lua A B")
    assert.truthy(out:find("s.lua\tA\tB\n", 1, true))
    assert.truthy(out:find("ds: " .. d .. "/s.lua:3: matmul: inner dims 2 and 3 differ", 1, true))
    assert.truthy(out:find(d .. "/s.lua:4: in main chunk", 1, true))
    assert.falsy(out:find("lua/ds/", 1, true)) -- no internal frames
    assert.equal(1, code)
    os.execute("rm -rf " .. d)
  end)
end)

describe("ds.help and completion", function()
  it("describes an op from the op table: signature, attrs with defaults, dtypes, gradient", function()
    local text = help.text(ds, "sum")
    assert.truthy(text:find("ds.sum(x, dims, keepdim, {options})", 1, true))
    assert.truthy(text:find("keepdim%s+bool = false"))
    assert.truthy(text:find("differentiable: yes", 1, true))
    assert.truthy(help.text(ds, "optim.Adam"):find("lr = 0.001", 1, true))
    assert.truthy(help.text(ds, "nn.Linear"):find("x: (..., in_features) -> (..., out_features)", 1, true))
    assert.is_nil(help.text(ds, "nothing_by_this_name"))
  end)
  it("completes globals, fields and tensor methods", function()
    _G.compl_x = ds.ones(2)
    local c = repl.completions("compl_x:su")
    assert.truthy(#c > 0)
    for _, s in ipairs(c) do assert.equal("compl_x:su", s:sub(1, 10)) end
    local set = {}
    for _, s in ipairs(c) do set[s] = true end
    assert.is_true(set["compl_x:sum"])
    _G.compl_x = nil
    assert.same({ "string.format" }, repl.completions("string.form"))
  end)
end)

local have_tmux = os.execute("command -v tmux >/dev/null 2>&1") == 0
local describe_tmux = have_tmux and describe or pending

describe_tmux("ds at a terminal (tmux)", function()
  local home, session = tmpdir(), "ds_repl_spec_" .. tostring(os.time()) .. tostring({}):match("0x(%x+)")
  local function tmux(args) return sh("tmux -L " .. session .. " " .. args) end
  local function screen() return (tmux("capture-pane -p -t " .. session)) end
  -- wait (bounded) until the screen shows `text`
  local function wait_for(text, plain)
    for _ = 1, 100 do
      local s = screen()
      if s:find(text, 1, plain ~= false) then return s end
      os.execute("sleep 0.1")
    end
    error("the terminal never showed " .. text .. "; it shows:\n" .. screen())
  end
  local function type_line(keys) tmux("send-keys -t " .. session .. " -l '" .. keys:gsub("'", "'\\''") .. "'") end
  local function press(key) tmux("send-keys -t " .. session .. " " .. key) end

  local function start()
    tmux(string.format("new-session -d -s %s -x 120 -y 50 'HOME=%s TERM=xterm %s/bin/ds'", session, home, root))
    wait_for("Ctrl-D to leave")
  end
  setup(start)
  teardown(function()
    tmux("kill-server")
    os.execute("rm -rf " .. home)
  end)

  it("prints an assignment's value on request, completes x:su, shows ?help, recovers from an error, recalls history",
    function()
    type_line("x = ds.ones(3, 4)"); press("Enter")
    type_line("x:sum(2)"); press("Enter")
    wait_for("tensor([4., 4., 4.])")
    type_line("x:su"); press("Tab"); press("Tab")
    wait_for("x:sub_") -- the candidates listed (sub, sub_, sum)
    press("C-u")
    type_line("x:cumpr"); press("Tab")
    wait_for("> x:cumprod") -- the one candidate completed in the line
    press("C-u")
    type_line("?conv2d"); press("Enter")
    wait_for("stride%s+ints = {1, 1}", false)
    type_line("x:matmul(x)"); press("Enter")
    wait_for("error: stdin:1: matmul: inner dims 4 and 3 differ")
    type_line("1 + 1"); press("Enter")
    wait_for("\n2\n")
    press("Up"); press("Up"); press("Enter") -- the failed line again, from history
    local _, n = screen():gsub("inner dims 4 and 3 differ", "")
    for _ = 1, 50 do
      if n >= 2 then break end
      os.execute("sleep 0.1")
      _, n = screen():gsub("inner dims 4 and 3 differ", "")
    end
    assert.equal(2, n)
    press("C-d")
    for _ = 1, 50 do
      local f = io.open(home .. "/.ds_history")
      if f then
        local hist = f:read("*a"); f:close()
        if hist:find("x:sum(2)", 1, true) then return end
      end
      os.execute("sleep 0.1")
    end
    error("~/.ds_history does not hold the session's lines")
  end)

  it("survives Ctrl-C at the prompt and during computations, any number of times, and errors in completion", function()
    start() -- a new session (the test above left with Ctrl-D)
    type_line("kept = 42"); press("Enter")
    for _ = 1, 3 do -- at the idle prompt, and with a line typed
      press("C-c"); os.execute("sleep 0.3")
      type_line("kept = 0 -- cancelled"); press("C-c"); os.execute("sleep 0.3")
    end
    type_line("kept + 1"); press("Enter")
    wait_for("\n43\n")
    for _ = 1, 2 do -- a tight Lua loop typed at the prompt, and a loop of ds calls
      type_line("while true do end"); press("Enter"); os.execute("sleep 0.7"); press("C-c")
      type_line("for i = 1, 1e12 do local z = ds.ones(2) end"); press("Enter"); os.execute("sleep 0.7"); press("C-c")
      os.execute("sleep 0.3")
      press("C-c"); os.execute("sleep 0.3")
    end
    local _, n = wait_for("interrupted!"):gsub("interrupted!", "")
    for _ = 1, 50 do
      if n >= 4 then break end
      os.execute("sleep 0.1")
      _, n = screen():gsub("interrupted!", "")
    end
    assert.equal(4, n)
    type_line("bad = setmetatable({}, {__index = function() error('boom in index') end})"); press("Enter")
    type_line("bad.x.y"); press("Tab")
    wait_for("error in completion: stdin:1: boom in index")
    press("C-u")
    type_line("kept * 2"); press("Enter")
    wait_for("\n84\n")
  end)

  it("survives two and three Ctrl-C in a row inside long matmul kernels (the second one killed it)", function()
    type_line("a = ds.randn(1500, 1500)"); press("Enter")
    for _, presses in ipairs { 2, 3, 2, 3 } do
      type_line("for i = 1, 1e9 do local b = a:matmul(a) end"); press("Enter"); os.execute("sleep 0.7")
      press(string.rep("C-c ", presses)) -- one send-keys: the interrupts arrive within the same kernel
      os.execute("sleep 0.3")
    end
    type_line("b = a:matmul(a):matmul(a):matmul(a)"); press("Enter"); os.execute("sleep 0.3") -- one long statement
    press("C-c C-c C-c")
    -- each loop runs until interrupted: the lines typed after it run only if it was, and only if ds still runs
    type_line("kept + 100"); press("Enter")
    wait_for("\n142\n")
    assert.truthy(screen():find("\nerror: interrupted!\n", 1, true))
  end)
end)
