-- tests/convert_refusals_spec.lua: the refusal messages tests/convert_spec.lua does not reach: each names the
-- construct, the file:line of the construct (and of the offending statement) and the reason.
local ds = require("ds")
local H = require("helpers")

local S = function(shape, dt) return ds.spec(shape or {}, dt or "f32") end
local N = S({}, "i64")

-- trace fn and check the error names the line `offset` lines below fn's first line, then the fragments
local function refused(fn, specs, offset, ...)
  local line = debug.getinfo(fn, "S").linedefined + offset
  return H.raises(function() ds.trace(fn, specs) end, "convert_refusals_spec.lua:" .. line .. ":", ...)
end

describe("ds.convert: refusals of returns", function()
  it("a return inside a tensor branch that is not the branch's last statement", function()
    refused(function(x, n)
      if x:gt(0) then
        if n > 1 then return x end
        x = x + 1
      end
      return x
    end, { S(), 3 }, 1, "if on a tensor while tracing", "return inside a branch (line", "not its last statement",
      "ds.cond")
  end)

  it("a return in the code after an early-return if that is not its last statement", function()
    local function f(x, n)
      if x:gt(0) then return x end
      if n > 1 then return -x end
      x = x + 1
      return x
    end
    local err = refused(f, { S(), 3 }, 1, "if on a tensor while tracing", "not the last statement of the code after the if")
    assert.truthy(err:find("(line " .. (debug.getinfo(f, "S").linedefined + 2) .. ")", 1, true), err)
  end)

  it("a goto in the code after an early-return if", function()
    refused(function(x)
      if x:gt(0) then return x end
      goto skip
      ::skip::
      return x * 2
    end, { S() }, 1, "if on a tensor while tracing", "goto or label inside the code after the if")
  end)

  it("a return inside a for or a repeat body on a tensor", function()
    refused(function(x, n)
      for i = 1, n do
        if i > 100 then return x end
        x = x + 1
      end
      return x
    end, { S(), N }, 1, "for on a tensor while tracing", "return inside the for body", "ds.while_loop")
    refused(function(x, n)
      repeat
        if n > 100 then return x end
        x = x + 1
      until x:gt(5)
      return x
    end, { S(), 3 }, 4, "repeat on a tensor while tracing", "return inside the repeat body") -- the until's line
  end)
end)

describe("ds.convert: refusals of loop bodies", function()
  it("goto, varargs and closures writing outer variables inside a while or for body", function()
    refused(function(x)
      while x:lt(5) do
        x = x + 1
        goto cont
        ::cont::
      end
      return x
    end, { S() }, 1, "while on a tensor while tracing", "goto or label inside the while body")
    refused(function(x, n)
      for _ = 1, n do
        x = x + 1
        goto c
        ::c::
      end
      return x
    end, { S(), N }, 1, "for on a tensor while tracing", "goto or label inside the for body")
    refused(function(x, ...)
      while x:lt(5) do x = x + select("#", ...) end
      return x
    end, { S() }, 1, "while on a tensor while tracing", "`...` used inside the while body")
    refused(function(x)
      local y = x
      while x:lt(5) do
        x = x + 1
        local function set() y = x end
        set()
      end
      return y
    end, { S() }, 2, "while on a tensor while tracing", "a function defined inside the while body assigns `y`")
  end)

  it("a loop on a tensor that changes no tensor variable, and one that turns a tensor into a number", function()
    refused(function(x)
      while x:lt(5) do local _ = x + 1 end
      return x
    end, { S() }, 1, "while on a tensor changes no tensor variable, so it would never end")
    refused(function(x)
      while x:lt(5) do x = 1 end
      return x
    end, { S() }, 1, "while on a tensor", "`x` is a tensor before the body and a number after it")
  end)
end)

describe("ds.convert: conversion off and bad calls", function()
  it("{convert = false}: and, not and repeat on a tensor name the line and say conversion is off", function()
    local function f_and(x, y) if x:gt(0) and y:gt(0) then x = x + 1 end return x end
    local function f_not(x) if not x:gt(0) then x = x + 1 end return x end
    local function f_rep(x) repeat x = x + 1 until x:gt(3) return x end
    for construct, case in pairs { ["and"] = { f_and, { S(), S() } }, ["not"] = { f_not, { S() } },
                                   ["repeat"] = { f_rep, { S() } } } do
      local line = debug.getinfo(case[1], "S").linedefined
      H.raises(function() ds.trace(case[1], case[2], { convert = false }) end, "convert_refusals_spec.lua:" .. line,
        construct .. " on a tensor while tracing", "conversion is off")
    end
  end)

  it("calling nil, or a method a table lacks, in converted code names the line", function()
    local function f(x)
      local g
      return g(x)
    end
    local line = debug.getinfo(f, "S").linedefined
    H.raises(function() ds.trace(f, { S() }) end, "convert_refusals_spec.lua:" .. (line + 2), "attempt to call 'g' (a nil value)")
    local function m(x)
      local t = {}
      return t:nope(x)
    end
    line = debug.getinfo(m, "S").linedefined
    H.raises(function() ds.convert(m)(ds.tensor(1)) end, "convert_refusals_spec.lua:" .. (line + 2),
      "attempt to call method 'nope' (a nil value)")
  end)
end)
