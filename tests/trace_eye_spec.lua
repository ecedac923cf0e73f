-- tests/trace_eye_spec.lua: ds.eye inside a traced function (it filled a storage view of a traced tensor, which has
-- no storage: a segfault), and a storage view of a traced tensor is an error, not a crash.
local ds = require("ds")
local H = require("helpers")
local Tensor = require("ds.tensor")

describe("ds.eye while tracing", function()
  it("traces and compiles to eager's values for square, wide, tall and empty shapes", function()
    for _, s in ipairs { { 3, 3 }, { 2, 4 }, { 4, 2 }, { 0, 3 } } do
      local n, m = s[1], s[2]
      local function fn(a) return a + ds.eye(n, m, { dtype = "f64" }) end
      local a = ds.randn(n, m, { dtype = "f64" })
      assert.is_true(H.bitwise(ds.trace(fn, { a })(a), fn(a)), n .. "x" .. m)
      assert.is_true(H.bitwise(ds.compile(fn, { a })(a), fn(a)), n .. "x" .. m)
    end
  end)

  it("a storage view of a traced tensor is an error naming it", function()
    H.raises(function()
      ds.trace(function(a) return Tensor._view(a, { 2 }, { 1 }, 0, "probe") end, { ds.randn(2) })
    end, "probe", "no storage")
  end)
end)
