-- tests/lines_spec.lua: the line budget (tools/lines.lua, `make lines`): a #define is counted with its continuation
-- lines, a Lua function from its `function` to its `end`; nothing under src/ or lua/ds/ is over budget: no file over
-- 700 lines, no function over 150, no #define over 10 (per-dtype code goes through float_kernels.h / all_kernels.h).
-- CI runs `make test`, so this spec is the budget's check.
package.path = "./tools/?.lua;" .. package.path
local lines = require("lines")

describe("line budget", function()
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

  it("counts a Lua function from `function` to its `end`, nested ones too", function()
    local f = lines.lua_functions("local function a()\n  local function b()\n  end\n  if x then end\nend\n", "t")
    assert.same({ { name = "b", first = 2, last = 3 }, { name = "a", first = 1, last = 5 } }, f)
  end)

  it("finds nothing over budget under src/ and lua/ds/ (files, functions, macros)", function()
    local _, over = lines.check()
    assert.same({}, over)
  end)
end)
