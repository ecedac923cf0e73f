-- tests/convert_spec.lua: source conversion (ds.convert, and by default in ds.trace / ds.compile): every rewrite
-- rule eagerly, traced, compiled and loaded, and every refusal message with its file:line.
local ds = require("ds")
local H = require("helpers")

local same = H.bitwise
local S = function(shape, dt, name) return ds.spec(shape or {}, dt or "f32", name) end
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)

local function ops_of(g)
  local ops = {}
  for _, n in ipairs(g.nodes) do ops[n.op] = (ops[n.op] or 0) + 1 end
  return ops
end

-- ---- the documents' examples ----
local function counters(a, b)
  while a:lt(b) do
    a = a + 2
    b = b + 1
  end
  return a, b
end

local Branchy = ds.nn.Module:extend("Branchy")
function Branchy:init() self.fc = ds.nn.Linear(4, 3) end
function Branchy:forward(x)
  local y
  if x:sum():gt(0) then
    y = self.fc(x):relu()
  else
    y = self.fc(-x) * 2
  end
  return y
end

-- greedy decoding: a fixed-size token buffer, a tensor stop condition and a break on the end token
local EOS = 4
local function step(tok) return tok * 2 end
local function decode(tok, max_len)
  local i = ds.tensor(0, { dtype = "i64" })
  local out = ds.zeros({ 6 }, { dtype = "i64" })
  while i:lt(max_len) do
    tok = step(tok)
    i = i + 1
    out = out + ds.one_hot(i:reshape(1), 6):reshape(6) * tok
    if tok:eq(EOS) then break end
  end
  return out, i
end

describe("ds.convert: the documents' examples", function()
  it("the TensorFlow counters as a plain while loop give (20, 20) eagerly, traced, compiled and loaded", function()
    local a, b = ds.convert(counters)(ds.tensor(0), ds.tensor(10))
    assert.same({ 20, 20 }, { a:item(), b:item() })
    local g = ds.trace(counters, { S(), S() })
    assert.equal(1, ops_of(g).while_loop)
    a, b = g(ds.tensor(0), ds.tensor(10))
    assert.same({ 20, 20 }, { a:item(), b:item() })
    local cg = ds.compile(counters, { S({}, "f32", "a"), S({}, "f32", "b") })
    a, b = cg(ds.tensor(0), ds.tensor(10))
    assert.same({ 20, 20 }, { a:item(), b:item() })
    ds.save(cg, dir .. "/counters")
    local m = ds.load(dir .. "/counters")
    a, b = m(ds.tensor(0), ds.tensor(10))
    assert.same({ 20, 20 }, { a:item(), b:item() })
    local lazy = ds.compile(counters)
    a, b = lazy(ds.tensor(0), ds.tensor(10))
    assert.same({ 20, 20 }, { a:item(), b:item() })
  end)

  it("a module whose forward branches on x:sum():gt(0) exports a cond node and agrees with eager on both branches", function()
    ds.manual_seed(3)
    local net = Branchy()
    local g = ds.trace(net, { S({ 2, 4 }, "f32", "x") })
    assert.equal(1, ops_of(g).cond)
    local cg = ds.compile(net, { S({ 2, 4 }, "f32", "x") })
    ds.save(cg, dir .. "/branchy")
    local m = ds.load(dir .. "/branchy")
    local forward = ds.convert(Branchy.forward)
    for _, sign in ipairs { 1, -1 } do
      local x = ds.randn(2, 4):abs() * sign
      local e = forward(net, x)
      local plain = sign > 0 and net.fc(x):relu() or net.fc(-x) * 2
      assert.is_true(same(e, plain))
      assert.is_true(same(e, g(x)))
      assert.is_true(same(e, cg(x)))
      assert.is_true(same(e, m(x)))
    end
  end)

  it("a greedy decoding loop with a break stops at the end token the same way eagerly, traced, compiled and loaded", function()
    local e_out, e_i = ds.convert(decode)(ds.tensor(1, { dtype = "i64" }), ds.tensor(5, { dtype = "i64" }))
    assert.same({ 2, 4, 0, 0, 0, 0 }, e_out:totable()) -- 1 -> 2 -> 4 (EOS): the break ends it after two steps
    assert.equal(2, e_i:item())
    local specs = { S({}, "i64", "tok"), S({}, "i64", "max_len") }
    local g = ds.trace(decode, specs)
    local cg = ds.compile(decode, specs)
    ds.save(cg, dir .. "/decode")
    local m = ds.load(dir .. "/decode")
    for _, case in ipairs { { 1, 5 }, { 3, 5 }, { 3, 2 } } do -- 3 -> 6 -> 12 ... never EOS: max_len stops it
      local t, n = ds.tensor(case[1], { dtype = "i64" }), ds.tensor(case[2], { dtype = "i64" })
      local eo, ei = ds.convert(decode)(t, n)
      for _, f in ipairs { g, cg, m } do
        local o, i = f(t, n)
        assert.is_true(same(eo, o) and same(ei, i))
      end
    end
  end)
end)

-- ---- one rule at a time ----
local function elseif_chain(x)
  local y = x
  if x:sum():gt(10) then y = x * 10
  elseif x:sum():gt(0) then y = x + 1
  else y = -x end
  return y
end

local function early_return(x)
  if x:max():gt(2) then
    return x * 2
  end
  local y = x - 1
  return y
end

local function both_return(x)
  if x:min():lt(0) then return x:abs() else return x end
end

local function logic(x, y)
  local r = ds.zeros(1)
  if x:gt(0) and not y:gt(0) then r = r + 1 end
  if x:gt(0) or y:gt(0) then r = r + 10 end
  return r
end

local function rep(x)
  repeat
    x = x * 2
  until x:gt(100)
  return x
end

local function count_up(n)
  local s = ds.tensor(0, { dtype = "i64" })
  for i = 1, n do s = s + i end
  local back = ds.tensor(0, { dtype = "i64" })
  for i = n, 1, -1 do back = back * 10 + i end
  return s, back
end

local function lua_flow(x, n)
  if n > 2 then x = x * 2 end
  for _ = 1, n do x = x + 1 end
  return x
end

local function helper(x)
  if x:sum():gt(0) then return x end
  return -x
end
local function calls_helper(x) return helper(x) * 3 end

local Cell = ds.nn.Module:extend("Cell")
function Cell:forward(x)
  local y = x
  if x:mean():lt(0) then y = x * 0 end
  return y
end
local Outer = ds.nn.Module:extend("Outer")
function Outer:init() self.cell = Cell() end
function Outer:forward(x) return self.cell(x) + 1 end

describe("ds.convert: rewrite rules", function()
  local function check(fn, specs, inputs_list)
    local g = ds.trace(fn, specs)
    local cg = ds.compile(fn, specs)
    local conv = ds.convert(fn)
    for _, inputs in ipairs(inputs_list) do
      local e = { conv(unpack(inputs)) }
      local t = { g(unpack(inputs)) }
      local c = { cg(unpack(inputs)) }
      assert.equal(#e, #t)
      for i = 1, #e do assert.is_true(same(e[i], t[i]) and same(e[i], c[i])) end
    end
    return g, conv
  end

  it("if/elseif/else on tensors: nested conds carrying the assigned local", function()
    local g, conv = check(elseif_chain, { S({ 2 }) }, { { ds.tensor { 6, 7 } }, { ds.tensor { 1, 2 } }, { ds.tensor { -1, -2 } } })
    assert.equal(1, ops_of(g).cond)
    assert.same({ 60, 70 }, conv(ds.tensor { 6, 7 }):totable())
    assert.same({ 2, 3 }, conv(ds.tensor { 1, 2 }):totable())
    assert.same({ 1, 2 }, conv(ds.tensor { -1, -2 }):totable())
  end)

  it("an early return becomes a cond whose else branch is the rest of the function", function()
    local g, conv = check(early_return, { S({ 2 }) }, { { ds.tensor { 1, 3 } }, { ds.tensor { 1, 2 } } })
    assert.equal(1, ops_of(g).cond)
    assert.same({ 2, 6 }, conv(ds.tensor { 1, 3 }):totable())
    assert.same({ 0, 1 }, conv(ds.tensor { 1, 2 }):totable())
    check(both_return, { S({ 2 }) }, { { ds.tensor { -1, 3 } }, { ds.tensor { 1, 2 } } })
    assert.truthy(ds.convert_source(early_return):find("if_ret", 1, true))
  end)

  it("and / or / not on tensor conditions", function()
    local g = check(logic, { S(), S() }, { { ds.tensor(1), ds.tensor(-1) }, { ds.tensor(1), ds.tensor(1) },
      { ds.tensor(-1), ds.tensor(1) }, { ds.tensor(-1), ds.tensor(-1) } })
    local conv = ds.convert(logic)
    assert.equal(11, conv(ds.tensor(1), ds.tensor(-1)):item())
    assert.equal(10, conv(ds.tensor(-1), ds.tensor(1)):item())
    assert.equal(0, conv(ds.tensor(-1), ds.tensor(-1)):item())
    assert.is_true(ops_of(g).cond >= 2)
  end)

  it("repeat ... until on a tensor", function()
    local g = check(rep, { S() }, { { ds.tensor(3) }, { ds.tensor(500) } })
    assert.equal(192, ds.convert(rep)(ds.tensor(3)):item())
    assert.equal(1000, ds.convert(rep)(ds.tensor(500)):item()) -- the body runs once before the test
    assert.equal(1, ops_of(g).while_loop)
  end)

  it("numeric for with tensor bounds (and a negative step) becomes a loop with a tensor counter", function()
    local n = ds.tensor(4, { dtype = "i64" })
    local s, back = ds.convert(count_up)(n)
    assert.same({ 10, 4321 }, { s:item(), back:item() })
    local g = check(count_up, { S({}, "i64") }, { { n }, { ds.tensor(0, { dtype = "i64" }) } })
    assert.equal(2, ops_of(g).while_loop)
  end)

  it("conditions and bounds that are Lua values stay plain Lua (specialized at trace time)", function()
    local g = ds.trace(lua_flow, { S({ 2 }), 3 })
    assert.is_nil(ops_of(g).cond)
    assert.is_nil(ops_of(g).while_loop)
    assert.same({ 5, 7 }, g(ds.tensor { 1, 2 }, 3):totable())
  end)

  it("converts the Lua functions a converted function calls, and module forwards it reaches", function()
    local g = ds.trace(calls_helper, { S({ 2 }) })
    assert.equal(1, ops_of(g).cond)
    assert.same({ 3, 6 }, g(ds.tensor { -1, -2 }):totable())
    local net = Outer()
    local go = ds.trace(net, { S({ 2 }) })
    assert.equal(1, ops_of(go).cond)
    assert.same({ 1, 1 }, go(ds.tensor { -1, -2 }):totable())
    assert.same({ 2, 3 }, go(ds.tensor { 1, 2 }):totable())
  end)

  it("eagerly a one-element tensor condition is true when non-zero (the always-true `if tensor` is fixed)", function()
    local function f(x) if x:gt(0) then return 1 end return 0 end
    assert.equal(1, f(ds.tensor(-1))) -- plain Lua: any tensor is true
    local cf = ds.convert(f)
    assert.equal(0, cf(ds.tensor(-1)))
    assert.equal(1, cf(ds.tensor(2)))
    H.raises(function() cf(ds.tensor { 1, 2 }) end, "convert_spec.lua:", "shape (2)", ":any()")
  end)

  it("upvalues keep their identity: the converted function writes the original's variables", function()
    local calls, scale = 0, ds.tensor(2)
    local function f(x)
      calls = calls + 1
      if x:gt(0) then x = x * scale end
      return x
    end
    local cf = ds.convert(f)
    assert.equal(6, cf(ds.tensor(3)):item())
    assert.equal(1, calls)
    scale = ds.tensor(5)
    assert.equal(15, cf(ds.tensor(3)):item())
    f(ds.tensor(1))
    assert.equal(3, calls)
  end)

  it("errors and graph nodes point at the user's original lines", function()
    local function f(x)
      if x:sum():gt(0) then
        x = x + 1
      end
      return x:nonexistent_method()
    end
    local line = debug.getinfo(f, "S").linedefined
    H.raises(function() ds.convert(f)(ds.tensor { 1 }) end, "convert_spec.lua:" .. (line + 4) .. ":", "nonexistent_method")
    local g = ds.trace(function(x) return ds.convert(counters)(x, x + 10) end, { S() })
    local info = debug.getinfo(counters, "S")
    local src = g.nodes[#g.nodes].line
    assert.truthy(src:find("convert_spec.lua:" .. (info.linedefined + 1), 1, true), src)
    local body = g.nodes[#g.nodes].attrs.body_graph
    assert.truthy(body.nodes[1].line:find("convert_spec.lua:" .. (info.linedefined + 2), 1, true))
  end)

  it("ds.convert_source shows the rewrite on the original lines", function()
    local text = ds.convert_source(counters)
    assert.truthy(text:find("__ds_rt.while_(", 1, true))
    local _, nl = text:gsub("\n", "")
    assert.equal(debug.getinfo(counters, "S").lastlinedefined - 1, nl)
  end)
end)

-- ---- refusals: each names the construct, the file:line and why ----
describe("ds.convert: refusals", function()
  local function refused(fn, specs, ...)
    local err = H.raises(function() ds.trace(fn, specs) end, "convert_spec.lua:", ...)
    return err
  end

  it("goto inside a branch", function()
    refused(function(x)
      if x:gt(0) then goto done end
      x = x + 1
      ::done::
      return x
    end, { S() }, "if on a tensor", "goto or label inside the branch", "ds.cond")
  end)

  it("return inside only one branch, return inside a loop body, return not last", function()
    refused(function(x)
      local y = x
      for _ = 1, 2 do
        if x:gt(0) then return x end
        y = y + 1
      end
      return y
    end, { S() }, "if on a tensor", "inside a loop")
    refused(function(x)
      while x:lt(10) do
        if x:gt(5) then return x end
        x = x + 1
      end
      return x
    end, { S() }, "while on a tensor", "return inside the while body")
    refused(function(x)
      if x:gt(0) then
        x = x + 1
        return x
      else
        x = x - 1
      end
      return x * 2
    end, { S() }, "if on a tensor", "only some branches return")
  end)

  it("break out of a loop that is not converted (a generic for)", function()
    refused(function(x)
      for _, k in ipairs { 1, 2 } do
        if x:gt(k) then break end
        x = x + 1
      end
      return x
    end, { S() }, "if on a tensor", "break inside the branch", "not converted")
  end)

  it("varargs and closures writing outer variables inside a branch", function()
    refused(function(x, ...)
      if x:gt(0) then x = x + select("#", ...) end
      return x
    end, { S() }, "`...` used inside the branch")
    refused(function(x)
      local y = x
      if x:gt(0) then
        local function set() y = x * 2 end
        set()
      end
      return y
    end, { S() }, "a function defined inside the branch assigns `y`")
  end)

  it("a table field assigned in a tensor branch, a Lua number changed by a tensor branch or loop", function()
    refused(function(x)
      local t = {}
      if x:gt(0) then t.v = x end
      return x
    end, { S() }, "assigns a table field")
    refused(function(x)
      local n = 0
      if x:gt(0) then n = n + 1 end
      return x * n
    end, { S() }, "`n` is a number before and a number after")
    refused(function(x)
      local n = 0
      while x:lt(5) do x = x + 1; n = n + 1 end
      return x * n
    end, { S() }, "while on a tensor", "`n` is a number")
  end)

  it("a variable that is a tensor in one branch only, a loop variable that changes shape", function()
    refused(function(x)
      local y
      if x:sum():gt(0) then y = x end
      return y
    end, { S({ 2 }) }, "`y` is a tensor after the then branch but a nil after the else branch")
    refused(function(x)
      while x:sum():lt(5) do x = ds.cat({ x, x }, 1) end
      return x
    end, { S({ 2 }) }, "while on a tensor", "turns `x` from f32 (2) into f32 (4)")
  end)

  it("break inside repeat ... until (the if on a tensor is refused first, else the until)", function()
    refused(function(x)
      repeat
        x = x + 1
        if x:gt(3) then break end
      until x:gt(10)
      return x
    end, { S() }, "if on a tensor", "break inside the branch")
    refused(function(x, n)
      repeat
        x = x + 1
        if n > 3 then break end
      until x:gt(10)
      return x
    end, { S(), 2 }, "repeat on a tensor", "break inside repeat")
  end)

  it("{convert = false}: a tensor condition is an error naming the line, not a silently taken branch", function()
    local function f(x) if x:gt(0) then return x end return -x end
    local line = debug.getinfo(f, "S").linedefined
    H.raises(function() ds.trace(f, { S() }, { convert = false }) end,
      "convert_spec.lua:" .. line, "if on a tensor", "conversion is off", "ds.cond")
    H.raises(function() ds.compile(counters, { S(), S() }, { convert = false }) end, "while on a tensor", "conversion is off")
    H.raises(function() ds.compile(count_up, { convert = false })(ds.tensor(3, { dtype = "i64" })) end,
      "for on a tensor", "conversion is off")
    local g = ds.trace(lua_flow, { S({ 2 }), 3 }, { convert = false })
    assert.same({ 5, 7 }, g(ds.tensor { 1, 2 }, 3):totable())
  end)

  it("a tensor used as a Lua number while tracing names the line and how to fix it", function()
    local function f(x) return x * math.floor(x:sum()) end
    local line = debug.getinfo(f, "S").linedefined
    H.raises(function() ds.trace(f, { S({ 2 }) }) end, "number expected", "convert_spec.lua:" .. line,
      "a tensor used as a Lua number", "ds.while_loop")
  end)

  it("bad options and functions without source are clear errors", function()
    H.raises(function() ds.trace(counters, { S(), S() }, { convert = "yes" }) end, "option 'convert' must be a boolean")
    H.raises(function() ds.trace(counters, { S(), S() }, { convrt = false }) end, "unknown option 'convrt'")
    H.raises(function() ds.convert(print) end, "convert", "C function")
    H.raises(function() ds.convert(loadstring("return function(x) return x end", "=nosource")()) end, "without its source text")
    H.raises(function() ds.convert(42) end, "expects a Lua function")
  end)
end)
