-- examples/counters.lua: the article's two counters, `while a < b do a = a + 2; b = b + 1 end` from (0, 10):
-- plain Lua eagerly, a while_loop node when traced; both give (20, 20).
local ds = require("ds")

local function counters(a, b)
  return ds.while_loop(function(x, y) return x:lt(y) end,
                       function(x, y) return x + 2, y + 1 end,
                       { a, b })
end

local a, b = counters(ds.tensor(0), ds.tensor(10))
print(string.format("eager:  %g %g", a:item(), b:item()))

local g = ds.trace(counters, { ds.spec({}, "f32", "first_counter"), ds.spec({}, "f32", "second_counter") })
print(g)
a, b = g(ds.tensor(0), ds.tensor(10))
print(string.format("traced: %g %g", a:item(), b:item()))
