-- tests/convert_soundness_spec.lua: source conversion converts the code that runs or says why it cannot: files edited,
-- moved or removed after loading, loadstring chunks, identical shapes on one line, the whole LuaJIT lexicon; helpers
-- reached through C functions; Lua side effects of traced branches; generated names; LuaJIT's limits; recursion.
local ds = require("ds")
local H = require("helpers")
local parser = require("ds.convert.parser")

local S = ds.spec({ 2 })
local NEG = ds.tensor({ -1, -2 })
local POS = ds.tensor({ 1, 2 })

-- the values of a 1-d tensor
local function values(t) return t:totable() end

-- ds.compile(fn) and ds.trace(fn) run on NEG and POS give what fn's source says
local function sound(fn, want_neg, want_pos)
  local c = ds.compile(fn, { S })
  assert.same(want_neg, values(c(NEG)))
  assert.same(want_pos, values(c(POS)))
  local g = ds.compile(ds.trace(fn, { S }))
  assert.same(want_neg, values(g(NEG)))
end

local SRC = [[
return function(x)
  if x:sum():gt(0) then return x * %d else return x - %d end
end
]]

local dir = H.tmp_dir()
local n = 0
local function write(text)
  n = n + 1
  local path = dir .. "/f" .. n .. ".lua"
  H.write_file(path, text)
  return path
end

describe("conversion identifies the source by its bytecode", function()
  it("a file edited after loading (same lines) is refused by compile, trace and convert", function()
    local path = write(SRC:format(1, 101))
    local f = loadfile(path)()
    H.write_file(path, SRC:format(2, 102))
    local line = "f" .. n .. ".lua:1"
    H.raises(function() ds.compile(f, { S }) end, "cannot convert the function defined at", line,
      "does not compile to the code that runs")
    H.raises(function() ds.trace(f, { S }) end, line, "edited or moved")
    H.raises(function() ds.convert(f) end, line, "edited or moved")
    H.raises(function() ds.compile(f) (NEG) end, line, "edited or moved") -- the lazy compile
    -- {convert = false} traces it unconverted, as asked: the Lua if takes `then` for a tensor
    assert.same({ -1, -2 }, values(ds.compile(f, { S }, { convert = false })(NEG)))
  end)

  it("a file removed or moved after loading is refused; ds.loadfile keeps the text it loaded", function()
    local path, other = write(SRC:format(1, 101)), write(SRC:format(1, 101))
    local f = loadfile(path)()
    local kept = ds.loadfile(other)()
    os.rename(path, path .. ".moved")
    os.remove(other)
    H.raises(function() ds.compile(f, { S }) end, "cannot be read", "removed or moved")
    sound(kept, { -102, -103 }, { 1, 2 })
    H.write_file(path, SRC:format(3, 103)) -- another file in its place
    H.raises(function() ds.trace(f, { S }) end, "does not compile to the code that runs")
  end)

  it("loadstring chunks: their own text, ds.loadstring's text, and chunks without text", function()
    local text = SRC:format(1, 101)
    sound(loadstring(text)(), { -102, -103 }, { 1, 2 })
    sound(ds.loadstring(text, "=generated")(), { -102, -103 }, { 1, 2 })
    H.raises(function() ds.compile(loadstring(text, "=nosource")(), { S }) end, "nosource:1",
      "without its source text", "convert = false")
    H.raises(function() ds.compile(loadstring(text, "@/no/such/file.lua")(), { S }) end, "cannot be read")
    H.raises(function() ds.compile(loadstring(text, "a name")(), { S }) end,
      "does not compile to the code that runs")
  end)

  it("two functions of the same shape on one line are told apart", function()
    local a, b = function(x) if x:sum():gt(0) then return x else return -x end end, function(x) if x:sum():gt(0) then return -x else return x end end -- luacheck: ignore
    sound(a, { 1, 2 }, { 1, 2 })
    sound(b, { -1, -2 }, { -1, -2 })
  end)

  it("a file with \\z, \\u{}, hex floats and LL/ULL/i literals converts", function()
    local path = write([===[
local s = "a\z
           b\u{48}\x41\065"
local k = 0x1p4 + 0x.8P1 + 0xA.8p0 + 1e2 + .5 + 3. -- [[ not a long comment
local i, u, c = 1LL, 0x10ULL, 2i --[=[ a long
comment ]=] local t = [==[ x ]] ]==]
return function(x)
  if x:sum():gt(0) then return x * (#s - 4) else return x - k + 0 * tonumber(i + u) end
end
]===])
    local f = loadfile(path)()
    sound(f, { -132, -133 }, { 1, 2 })
  end)
end)

describe("the lexer reads what LuaJIT reads", function()
  it("every Lua file of the repository and of the machine parses exactly when loadstring accepts it", function()
    local p = io.popen("{ git ls-files '*.lua'; find /usr/share/lua /usr/share/luajit* -name '*.lua'; } 2>/dev/null")
    local count = 0
    for path in p:lines() do
      local f = io.open(path, "rb")
      if f then
        local text = f:read("*a")
        f:close()
        local lj, err = loadstring(text, "@" .. path)
        local ok, perr = pcall(parser.parse, text, path)
        assert(ok == (lj ~= nil), path .. ": loadstring says " .. tostring(err or "ok") .. ", the parser says "
          .. tostring(ok and "ok" or perr))
        count = count + 1
      end
    end
    p:close()
    assert.is_true(count > 200, count .. " files")
  end)

  it("accepts LuaJIT's extensions and refuses what LuaJIT refuses", function()
    local cases = { "x = '\\z  \n  y'", "x = '\\u{10FFFF}'", "x = 0x1p-2", "x = 0x.1", "x = 1ULL + 1ll + 2I",
      "x = [=[ ]] ]=]", "--[==[ \n ]==] x = 1", "x = '\\255'", "x = '\\\r\n'", "x = 1\r\ny = 2", "\239\187\191x = 1",
      "#!shebang\nx = 1", "goto l ::l::", "x = 1e+5", "x = 3..2", "x = 0x", "x = 1e", "x = 1.5LL", "x = '\\q'",
      "x = '\\256'", "x = '\\u{110000}'", "x = '\\xg0'", "x = [= x", "x = ~1", "x = 0x1p", "x = 08", "x = 1..x",
      "x = a.b:c'd'", "x = 5 // 2", "x = 'abc" }
    for _, src in ipairs(cases) do
      local lj, err = loadstring(src)
      local ok, perr = pcall(parser.parse, src, "case")
      assert(ok == (lj ~= nil), src .. ": loadstring says " .. tostring(err or "ok") .. ", the parser says "
        .. tostring(ok and "ok" or perr))
    end
  end)
end)

describe("functions reached through C functions", function()
  local function helper(x) if x:sum():gt(0) then return x else return -x end end

  it("pcall, xpcall, coroutine.wrap/create, table.sort and string.gsub convert the functions they call", function()
    sound(function(x) local _, y = pcall(helper, x); return y end, { 1, 2 }, { 1, 2 })
    sound(function(x) local _, y = xpcall(helper, debug.traceback, x); return y end, { 1, 2 }, { 1, 2 })
    sound(function(x) return coroutine.wrap(helper)(x) end, { 1, 2 }, { 1, 2 })
    sound(function(x)
      local co = coroutine.create(helper)
      local _, y = coroutine.resume(co, x)
      return y
    end, { 1, 2 }, { 1, 2 })
  end)

  it("table.sort and string.gsub convert the functions they call (eagerly, a tensor's truth decides)", function()
    local function descending(a, b) if a:gt(b) then return true else return false end end
    local sorted = ds.convert(function(t) table.sort(t, descending); return t end)({ ds.tensor(1), ds.tensor(3),
      ds.tensor(2) })
    assert.same({ 3, 2, 1 }, { sorted[1]:item(), sorted[2]:item(), sorted[3]:item() })
    local x = ds.tensor(-1)
    local function flip(c) if x:gt(0) then return c:upper() else return c end end
    assert.equal("ab", ds.convert(function(s) return (s:gsub(".", flip)) end)("ab"))
    assert.equal("ab", ds.convert(function(s) return (string.gsub(s, ".", flip)) end)("ab"))
  end)

  it("table.sort's comparator returning a tensor: its value eagerly, refused with its line while tracing", function()
    local function desc(a, b) return a:sum():gt(b:sum()) end
    local line = debug.getinfo(desc, "S").linedefined
    local function top(x)
      local t = { x, -x }
      table.sort(t, desc)
      return t[1]
    end
    assert.same({ 1, 2 }, values(ds.convert(top)(NEG)))
    assert.same({ 1, 2 }, values(ds.convert(top)(POS)))
    H.raises(function() ds.compile(top, { S }) end, "table.sort's comparator",
      "convert_soundness_spec.lua:" .. line, "returns a tensor while tracing")
    H.raises(function() ds.trace(top, { S }) end, "table.sort's comparator", "returns a tensor while tracing")
  end)

  it("LuaJIT's builtins written in bytecode (table.foreach, table.remove) run as library code", function()
    sound(function(x)
      local r
      table.foreach({ x }, function(_, v) r = helper(v) end)
      local t = { r }
      return table.remove(t)
    end, { 1, 2 }, { 1, 2 })
  end)

  it("ds.cond / ds.while_loop convert the functions they are given", function()
    local function id(y) return y end
    sound(function(x) return ds.cond(x:sum():gt(100), id, helper, x) end, { 1, 2 }, { 1, 2 })
    assert.same({ 1, 2 }, values(ds.convert(function(x) return ds.cond(x:sum():gt(100), id, helper, x) end)(NEG)))
  end)

  it("functions handed to ds code (ds.no_grad(helper), ds.init_scope) are converted", function()
    local function flag(o) if o.on then return 1 end return 2 end
    sound(function(x) return ds.no_grad(helper, x) end, { 1, 2 }, { 1, 2 })
    sound(function(x) return x * ds.init_scope(flag, { on = false }) end, { -2, -4 }, { 2, 4 })
    assert.same({ 1, 2 }, values(ds.convert(function(x) return ds.no_grad(helper, x) end)(NEG)))
  end)

  it("a module called by ds code (nn.Sequential) runs its forward converted while tracing", function()
    local Flip = ds.nn.Module:extend("SoundnessFlip")
    function Flip:forward(x) if x:sum():gt(0) then return x else return -x end end
    local line = debug.getinfo(1, "l").currentline - 1
    local seq = ds.nn.Sequential(Flip(), ds.nn.Identity())
    sound(function(x) return seq(x) end, { 1, 2 }, { 1, 2 })
    sound(seq, { 1, 2 }, { 1, 2 })
    assert.same({ 1, 2 }, values(seq(NEG))) -- eagerly too
    -- {convert = false}: its conditions are checked, as the traced function's are
    H.raises(function() ds.compile(seq, { S }, { convert = false }) end, "convert_soundness_spec.lua:" .. line,
      "conversion is off")
  end)

  it("forward hooks run converted as the forward does; other unconverted user code testing a truth is refused",
    function()
      local lin = ds.nn.Linear(2, 2)
      lin:register_forward_hook(function(_, inp, out) if inp[1]:sum():gt(0) then return out else return out * 0 end end)
      local pos = lin(POS)
      sound(function(x) return lin(x) end, { 0, 0 }, values(pos))
      assert.same({ 0, 0 }, values(lin(NEG))) -- eagerly too
      -- a function ds calls that no conversion reaches: a metamethod of a table the traced code builds on
      local obj = setmetatable({}, { __index = function(_, k) if rawget(_G, "ds_soundness_" .. k) then return 1 end
        return 2 end })
      local line = debug.getinfo(1, "l").currentline - 2
      H.raises(function() ds.compile(function(x) return ds.no_grad(function() return x * obj.w end) end, { S }) end,
        "convert_soundness_spec.lua:" .. line, "tests a value's truth")
    end)

  it("a callable table's __call is converted", function()
    local obj = setmetatable({}, { __call = function(_, x) return helper(x) end })
    sound(function(x) return obj(x) end, { 1, 2 }, { 1, 2 })
  end)

  it("a metamethod that tests a tensor's truth is refused while tracing, naming it", function()
    local obj = setmetatable({}, { __add = function(_, x) if x:sum():gt(0) then return x else return -x end end })
    local line = debug.getinfo(1, "l").currentline - 1
    H.raises(function() ds.compile(function(x) return obj + x end, { S }) end,
      "convert_soundness_spec.lua:" .. line, "a metamethod", "tests a value's truth")
    -- also after ds.init_scope ran inside the trace (the hook stopped when no trace was active)
    H.raises(function() ds.compile(function(x) ds.init_scope(function() end); return obj + x end, { S }) end,
      "convert_soundness_spec.lua:" .. line, "tests a value's truth")
    -- and after a trace whose hook was replaced and that then failed (as an interrupt at the prompt does)
    assert.has_error(function() ds.compile(function(x) debug.sethook(); error("interrupted!") end, { S }) end)
    H.raises(function() ds.compile(function(x) return obj + x end, { S }) end, "convert_soundness_spec.lua:" .. line,
      "tests a value's truth")
    -- one that tests only comparisons is fine
    local k = setmetatable({}, { __index = function(_, key) if key == "w" then return 3 end end })
    sound(function(x) return x * k.w end, { -3, -6 }, { 3, 6 })
  end)
end)

describe("Lua side effects of traced tensor branches", function()
  it("an upvalue written by a helper called in a tensor branch is refused with the branch's line", function()
    local calls = 0
    local function count(x) calls = calls + 1; return x end
    local function f(x)
      if x:sum():gt(0) then x = count(x) end
      return x
    end
    local line = debug.getinfo(f, "S").linedefined + 1
    H.raises(function() ds.compile(f, { S }) end, "convert_soundness_spec.lua:" .. line, "then branch",
      "changes `calls`", "side effects")
    assert.equal(3, ds.convert(f)(POS) and 3) -- eagerly it just runs
  end)

  it("a global written in a tensor loop body is refused", function()
    local function f(x)
      while x:sum():lt(10) do
        x = x + 1
        rawset(_G, "ds_soundness_global", x)
      end
      return x
    end
    H.raises(function() ds.trace(f, { S }) end, "while on a tensor: the body", "ds_soundness_global", "a global")
    _G.ds_soundness_global = nil
  end)

  it("user names like __ds_rt and __ds_break1 are not the converter's", function()
    local __ds_rt = 5
    local function f(x)
      local __ds_break1 = 7
      for _ = 1, 3 do
        if x:sum():gt(100) then break end
        x = x + __ds_rt + __ds_break1
      end
      return x
    end
    sound(f, { 35, 34 }, { 37, 38 })
  end)
end)

describe("limits", function()
  -- a generated function: nested tensor ifs, many outer locals read by a branch, many carried variables
  local function generated(kind, count)
    local lines = { "return function(x)" }
    if kind == "nested" then
      for _ = 1, count do lines[#lines + 1] = "if x:sum():gt(0) then x = x + 1" end
      for _ = 1, count do lines[#lines + 1] = "end" end
    elseif kind == "outer" then
      for i = 1, count do lines[#lines + 1] = "local v" .. i .. " = " .. i end
      lines[#lines + 1] = "if x:sum():gt(0) then"
      for i = 1, count do lines[#lines + 1] = "x = x + v" .. i end
      lines[#lines + 1] = "end"
    else
      for i = 1, count do lines[#lines + 1] = "local v" .. i .. " = x" end
      lines[#lines + 1] = "if x:sum():gt(0) then"
      for i = 1, count do lines[#lines + 1] = "v" .. i .. " = x + " .. i end
      lines[#lines + 1] = "end"
      lines[#lines + 1] = "x = v1"
    end
    lines[#lines + 1] = "return x end"
    return ds.loadstring(table.concat(lines, "\n"), "=limits_" .. kind)()
  end

  it("over-limit conversions name the limit and the line", function()
    H.raises(function() ds.compile(generated("nested", 100), { S }) end, "limits_nested:", "LuaJIT's limit",
      "nested too deeply")
    H.raises(function() ds.compile(generated("outer", 150), { S }) end, "limits_outer:152",
      "LuaJIT's limit on upvalues")
    H.raises(function() ds.compile(generated("carried", 190), { S }) end, "limits_carried:", "LuaJIT's limit")
  end)

  it("a recursion whose depth a tensor decides is refused at once", function()
    local f
    f = function(x, k)
      if k:gt(0) then return f(x * 2, k - 1) end
      return x
    end
    local t0 = os.clock()
    H.raises(function() ds.trace(f, { S, ds.spec({}, "i64") }) end, "nested in itself", "recursion")
    assert.is_true(os.clock() - t0 < 10)
  end)
end)
