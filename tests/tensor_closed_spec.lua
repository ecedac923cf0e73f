-- tests/tensor_closed_spec.lua: the Tensor class is closed: declared in tensor.lua or through Tensor._define while
-- ds loads, frozen by require("ds"), and tracing or compiling swaps none of its methods or metamethods.
local H = require("helpers")
local ds = require("ds")

local Tensor, mt = ds.Tensor, ds.Tensor._mt

-- the class's entries and the tensors' metamethods, and _G.tonumber, as they are now
local function snapshot()
  local s = { tonumber = _G.tonumber, methods = {}, meta = {} }
  for k, v in pairs(Tensor) do s.methods[k] = v end
  for k, v in pairs(mt) do s.meta[k] = v end
  return s
end

-- names whose entries in a and b are not the same object (or exist in one only)
local function differences(a, b)
  local out = {}
  for _, part in ipairs { "methods", "meta" } do
    for k, v in pairs(a[part]) do if not rawequal(v, b[part][k]) then out[#out + 1] = part .. "." .. k end end
    for k in pairs(b[part]) do if a[part][k] == nil then out[#out + 1] = part .. "." .. k end end
  end
  table.sort(out)
  return out
end

describe("the Tensor class after require(\"ds\")", function()
  it("refuses a new key, naming it, in the class and in the tensors' metatable", function()
    H.raises(function() Tensor.my_method = function() end end, "my_method", "closed")
    assert.is_nil(rawget(Tensor, "my_method"))
    H.raises(function() mt.__call = function() end end, "__call", "closed")
    assert.is_nil(rawget(mt, "__call"))
    H.raises(function() Tensor._define("tests", { another = function() end }) end, "another", "closed")
    assert.is_nil(rawget(Tensor, "another"))
  end)

  it("still reads and writes tensors' own fields", function()
    local x = ds.zeros(2)
    x.note = "mine"
    assert.equal("mine", x.note)
    assert.same({ 2 }, x.shape)
  end)

  it("knows the module that declared each entry, one that exists", function()
    local n = 0
    for _, part in ipairs { Tensor, mt } do
      for k in pairs(part) do
        local owner = Tensor._owner[k]
        assert(owner, "Tensor." .. tostring(k) .. " was declared by no module")
        local path = "lua/" .. owner:gsub("%.", "/")
        assert(io.open(path .. ".lua") or io.open(path .. "/init.lua"), k .. ": no module " .. owner)
        n = n + 1
      end
    end
    assert.is_true(n > 300)
    assert.equal("ds.autograd", Tensor._owner.backward)
    assert.equal("ds.random", Tensor._owner.uniform_)
    assert.equal("ds.ops", Tensor._owner.float)
    assert.equal("ds.print", Tensor._owner.__tostring)
    assert.equal("ds.ops.movement", Tensor._owner.reshape)
  end)

  it("has every method the docs call (x:name(...)) ", function()
    local x, seen = ds.zeros(2, 2), 0
    local files = { "README.md" }
    local p = io.popen("ls docs/*.md")
    for f in p:lines() do files[#files + 1] = f end
    p:close()
    for _, f in ipairs(files) do
      for name in H.read_file(f):gmatch("%f[%w_]x:([%a_][%w_]*)%(") do
        if name ~= "name" then -- "x:name(...) is ds.name(x, ...)": the rule, not a method
          assert.equal("function", type(x[name]), f .. " calls x:" .. name .. "(...), which tensors lack")
          seen = seen + 1
        end
      end
    end
    assert.is_true(seen > 20)
  end)
end)

describe("tracing and compiling", function()
  local spec = { ds.spec({ 2 }) }

  it("swap no Tensor method or metamethod; _G.tonumber is replaced while the traced function runs only", function()
    local before = snapshot()
    local during
    local g = ds.trace(function(x)
      during = snapshot()
      assert(tonumber("12") == 12 and tonumber("ff", 16) == 255)
      return x + 1
    end, spec)
    assert.same({}, differences(before, during))
    assert.same({}, differences(before, snapshot()))
    -- the one global (tracing's tonumber sees abstract tensors: Lua 5.1's consults no metamethod), then restored
    assert.is_false(rawequal(before.tonumber, during.tonumber))
    assert.is_true(rawequal(before.tonumber, _G.tonumber))
    assert.is_nil(during.tonumber(ds.tensor(1))) -- a concrete tensor: the original's answer (nil, as eagerly)
    assert.same({ 2, 3 }, g(ds.tensor({ 1, 2 })):totable())
  end)

  it("leave them in place when the traced function fails, and inside ds.cond and ds.compile", function()
    local before = snapshot()
    assert.is_false(pcall(ds.trace, function(x) error("boom") end, spec))
    assert.same({}, differences(before, snapshot()))
    assert.is_true(rawequal(before.tonumber, _G.tonumber))
    local inner
    ds.trace(function(x)
      return ds.cond(x:sum():gt(0), function(y) inner = snapshot(); return y * 2 end, function(y) return y end, x)
    end, spec)
    assert.same({}, differences(before, inner))
    local during
    local cg = ds.compile(function(x) during = snapshot(); return x * 3 end, spec)
    assert.same({ 3, 6 }, cg(ds.tensor({ 1, 2 })):totable())
    assert.same({}, differences(before, during))
    assert.same({}, differences(before, snapshot()))
    assert.is_true(rawequal(before.tonumber, _G.tonumber))
  end)

  it("keep the honest errors: comparisons and storage queries of abstract tensors name ds.cond / abstract", function()
    H.raises(function() ds.trace(function(x) return x < x end, spec) end, "x:lt(y)", "ds.cond")
    H.raises(function() ds.trace(function(x) return x:stride(1) end, spec) end, "abstract")
    H.raises(function() ds.trace(function(x) return tonumber(x) end, spec) end, "tonumber", "abstract")
    H.raises(function() return ds.zeros(2) < ds.zeros(2) end, "x:lt(y)")
  end)
end)

-- the lines of src (a Lua file) that assign into the Tensor class or the tensors' metatable: through a local bound to
-- require("ds.tensor") or to its _mt (X.k = v, X[k] = v, function X.k(), rawset(X, ...))
local function writes_into_tensor(src)
  local classes, metas = {}, {}
  for a in src:gmatch("local%s+([%w_]+)%s*=%s*require%(?%s*[\"']ds%.tensor[\"']") do classes[#classes + 1] = a end
  for _, a in ipairs(classes) do
    for m in src:gmatch("local%s+([%w_]+)%s*=%s*" .. a .. "%._mt%f[^%w_]") do metas[#metas + 1] = m end
    metas[#metas + 1] = a .. "%._mt"
  end
  local out, n = {}, 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local code = line:gsub("%-%-.*$", "")
    for _, list in ipairs { classes, metas } do
      for _, a in ipairs(list) do
        local x = "%f[%w_]" .. a
        if code:find(x .. "%s*%.%s*[%w_]+%s*=[^=]") or code:find(x .. "%s*%[[^%]]*%]%s*=[^=]")
          or code:find("function%s+" .. a .. "%s*[.:]") or code:find("rawset%(%s*" .. a .. "%s*,") then
          out[#out + 1] = n
          break
        end
      end
      if out[#out] == n then break end
    end
  end
  return out
end

describe("the sources", function()
  it("write into the Tensor class and its metatable in lua/ds/tensor.lua only (others call Tensor._define)", function()
    local p = io.popen("cd lua && find ds -name '*.lua' | sort")
    local bad = {}
    for path in p:lines() do
      if path ~= "ds/tensor.lua" then
        for _, n in ipairs(writes_into_tensor(H.read_file("lua/" .. path))) do bad[#bad + 1] = path .. ":" .. n end
      end
    end
    p:close()
    assert.same({}, bad)
  end)

  it("are checked by a scan that finds such writes", function()
    assert.same({ 2, 3, 4, 5, 7, 8 }, writes_into_tensor('local T = require("ds.tensor")\nT.f = 1\nT[k] = 2\n'
      .. 'function T.m() end\nrawset(T, "g", 3)\nlocal mt = T._mt\nmt.__add = f\nT._mt.__sub = g\n'
      .. 'local ok = T.f == 1\nT._define("m", { h = f })\nctx_mt.__index = f -- T.f = 1\n'))
  end)
end)
