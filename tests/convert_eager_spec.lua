-- tests/convert_eager_spec.lua: a module's forward called eagerly runs converted (a tensor `if`/`while` tests the
-- tensor's value), so eager, traced and compiled agree; ds.convert_modules(false) and m.convert_forward = false turn
-- it off; a forward without provable source runs as before; a goto under a tensor condition is refused eagerly too.
local ds = require("ds")
local H = require("helpers")

local S = function(shape, dt) return ds.spec(shape or {}, dt or "f32") end

local Branchy = ds.nn.Module:extend("EagerBranchy")
function Branchy:init() self.fc = ds.nn.Linear(4, 3) end
function Branchy:forward(x)
  if x:sum():gt(0) then return self.fc(x):relu() end
  return self.fc(-x) * 2
end

-- halves x while its sum is above 1: a loop on a tensor condition
local Halver = ds.nn.Module:extend("EagerHalver")
function Halver:forward(x)
  while x:sum():gt(1) do x = x / 2 end
  return x
end

-- fn() under a limit of Lua instructions (an unconverted `while <tensor>` never ends: every table is true)
local function bounded(fn)
  debug.sethook(function() debug.sethook(); error("endless loop", 0) end, "", 1e7)
  local r = { pcall(fn) }
  debug.sethook()
  assert(r[1], r[2])
  return unpack(r, 2)
end

local function expected(net, x, positive)
  if positive then return net.fc(x):relu() end
  return net.fc(-x) * 2
end

describe("ds.convert: a module's forward called eagerly", function()
  it("takes the branch the tensor's value says, as the traced and compiled module do", function()
    ds.manual_seed(5)
    local net = Branchy()
    local cg = ds.compile(net, { S({ 2, 4 }) })
    local g = ds.trace(net, { S({ 2, 4 }) })
    for _, sign in ipairs { 1, -1 } do
      local x = ds.randn(2, 4):abs() * sign
      local e = net(x)
      assert.is_true(H.bitwise(e, expected(net, x, sign > 0)))
      assert.is_true(H.bitwise(e, cg(x)))
      assert.is_true(H.bitwise(e, g(x)))
    end
  end)

  it("runs a while loop on a tensor condition by its value, as traced", function()
    local net = Halver()
    local x = ds.tensor({ 3, 5 })
    assert.same({ 0.375, 0.625 }, bounded(function() return net(x) end):totable())
    assert.same({ 0.375, 0.625 }, ds.trace(net, { S({ 2 }) })(x):totable())
    assert.same({ 0.25, 0.5 }, net(ds.tensor({ 0.25, 0.5 })):totable())
  end)

  it("converts a module inside nn.Sequential, runs forward hooks and keeps the gradient", function()
    ds.manual_seed(6)
    local inner = Branchy()
    local seq = ds.nn.Sequential(inner)
    local seen = 0
    inner:register_forward_hook(function(_, _, out) seen = seen + 1; return out * 3 end)
    local x = ds.randn(2, 4):abs() * -1
    local y = seq(x)
    assert.equal(1, seen)
    assert.is_true(H.bitwise(y, expected(inner, x, false) * 3))
    y:sum():backward()
    local gw = inner.fc.weight.grad
    inner:zero_grad()
    local ref = expected(inner, x, false) * 3
    ref:sum():backward()
    assert.is_true(H.bitwise(gw, inner.fc.weight.grad))
  end)

  it("converts each forward once (cached per function)", function()
    local source = require("ds.convert.source")
    local locate, calls = source.locate, 0
    source.locate = function(...) calls = calls + 1; return locate(...) end
    local Once = ds.nn.Module:extend("EagerOnce")
    function Once:forward(x) if x:gt(0) then return x end return -x end
    local a, b = Once(), Once()
    local ok, err = pcall(function()
      for _ = 1, 3 do a(ds.tensor(-1)); b(ds.tensor(2)) end
    end)
    source.locate = locate
    assert.is_true(ok, err)
    assert.equal(1, calls)
    assert.equal(1, a(ds.tensor(-1)):item())
  end)

  it("is turned off by ds.convert_modules(false) or convert_forward = false (instance or class)", function()
    assert.is_true(ds.convert_modules())
    assert.is_true(ds.convert_modules(false))
    assert.is_false(ds.convert_modules(true))
    local Always = ds.nn.Module:extend("EagerAlways")
    function Always:forward(x) if x:gt(0) then return 1 end return 2 end
    local m = Always()
    assert.equal(2, m(ds.tensor(-1)))
    m.convert_forward = false
    assert.equal(1, m(ds.tensor(-1))) -- plain Lua: every table is true
    m.convert_forward = nil
    Always.convert_forward = false
    assert.equal(1, m(ds.tensor(-1)))
    Always.convert_forward = nil
    ds.convert_modules(false)
    local off = m(ds.tensor(-1))
    ds.convert_modules(true)
    assert.equal(1, off)
    assert.equal(2, m(ds.tensor(-1)))
    H.raises(function() ds.convert_modules("no") end, "convert_modules: expects a boolean")
  end)

  it("runs a forward without provable source (a chunk loaded without its text) as before", function()
    local Cls = loadstring([[
      local nn = ...
      local C = nn.Module:extend("EagerNoSource")
      function C:forward(x) if x:gt(0) then return 1 end return 2 end
      return C
    ]], "=no source")(ds.nn)
    assert.equal(1, Cls()(ds.tensor(-1))) -- unconverted: docs/differences.md says so
  end)
end)

describe("ds.convert: goto under a tensor condition", function()
  local function back(x)
    ::again::
    x = x - 1
    if x:gt(0) then goto again end
    return x
  end
  local line = debug.getinfo(back, "S").linedefined + 3

  it("a goto jumping backwards is refused eagerly by ds.convert, as traced", function()
    H.raises(function() ds.convert(back)(ds.tensor(3)) end, "convert_eager_spec.lua:" .. line .. ":",
      "refused eagerly too", "goto or label inside the branch")
    H.raises(function() ds.trace(back, { S() }) end, "convert_eager_spec.lua:" .. line .. ":", "while tracing",
      "goto or label inside the branch")
    local function lua_back(x)
      ::again::
      x = x - 1
      if x > 0 then goto again end
      return x
    end
    assert.equal(0, ds.convert(lua_back)(3)) -- a Lua condition: the jump runs
  end)

  it("through not / and in the condition, in a loop, and in a module's eager forward", function()
    local function negated(x)
      ::again::
      x = x - 1
      if not x:le(0) and true then goto again end
      return x
    end
    H.raises(function() ds.convert(negated)(ds.tensor(3)) end, "refused eagerly too", "goto or label")
    local function loop(x, n)
      for _ = 1, n do
        if x:gt(5) then goto done end
        x = x + 1
      end
      ::done::
      return x
    end
    H.raises(function() ds.convert(loop)(ds.tensor(3), ds.tensor(4, { dtype = "i64" })) end, "for on a tensor",
      "refused eagerly too", "goto or label inside the for body")
    local Jumpy = ds.nn.Module:extend("EagerJumpy")
    function Jumpy:forward(x)
      ::again::
      x = x - 1
      if x:gt(0) then goto again end
      return x
    end
    H.raises(function() Jumpy()(ds.tensor(3)) end, "refused eagerly too", "goto or label inside the branch")
  end)
end)
