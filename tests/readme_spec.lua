-- tests/readme_spec.lua: the README's eager example runs as written and prints what it claims.
local ds = require("ds")

local function readme_example()
  local f = assert(io.open("README.md"))
  local text = f:read("*a")
  f:close()
  return assert(text:match("## Example.-```lua\n(.-)```"), "README has no lua block under ## Example")
end

describe("README example", function()
  it("runs and prints tensors, a loss with its gradient, and the BLAS core", function()
    local code = readme_example()
    local lines = select(2, code:gsub("\n", "\n"))
    assert.is_true(lines <= 22, "example has " .. lines .. " lines")
    local printed = {}
    local env = setmetatable({ print = function(...)
      local parts = {}
      for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
      printed[#printed + 1] = table.concat(parts, "\t")
    end }, { __index = _G })
    local chunk = assert(loadstring(code, "=README.md"))
    setfenv(chunk, env)
    chunk()
    assert.equal(5, #printed)
    assert.truthy(printed[1]:find("[[11., 12.],", 1, true))           -- x + y
    assert.truthy(printed[2]:find("[[0., 2.],", 1, true))             -- column 1 zeroed through the view
    assert.truthy(printed[3]:find("shape=(2,3)", 1, true))            -- w.grad
    assert.truthy(printed[5]:find(ds.info().blas_core, 1, true))
  end)
end)
