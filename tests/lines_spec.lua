-- tests/lines_spec.lua: tools/lines.lua's macro budget: a #define is counted with its continuation lines, and no
-- #define under src/ spans more than 10 lines (per-dtype code goes through float_kernels.h / all_kernels.h).
package.path = "./tools/?.lua;" .. package.path
local lines = require("lines")

describe("line budget: C macros", function()
  it("counts a #define with its continuation lines", function()
    local d = lines.c_defines("int a;\n#define F(x) \\\n  (x) \\\n  + 1\n  # define G 2\nint b;\n")
    assert.same({ { name = "F", first = 2, last = 4 }, { name = "G", first = 5, last = 5 } }, d)
  end)

  it("finds no #define over 10 lines under src/", function()
    local _, over = lines.check()
    local macros = {}
    for _, v in ipairs(over) do if v:match("#define") then macros[#macros + 1] = v end end
    assert.same({}, macros)
  end)
end)
