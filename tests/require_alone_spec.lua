-- tests/require_alone_spec.lua: every module under lua/ds can be required alone: each is required as the first
-- module of a fresh luajit (the modules of a batch one after another, each in its own process), and where a module
-- has an obvious cheap function (CALLS) it is called too. A module that works only when another one was loaded
-- first (an op found by name, a helper injected into a shared table) fails here naming itself.

-- module -> a Lua statement run with the module as `m` (double-quoted strings only: it is passed in single quotes)
local CALLS = {
  ["ds"] = [[assert(m.zeros(2, 3):numel() == 6)]],
  ["ds.random"] = [[local t = m.rand(2, 3); assert(t:numel() == 6 and t.dtype == "f32")]],
  ["ds.ops.sizes"] = [[local s = m.sizes_and_opts("x", 2, 3); assert(s[1] == 2 and s[2] == 3)]],
  ["ds.ops.creation"] = [[assert(require("ds.dispatch").call(m.full, {}, { shape = { 2 }, value = 1 }):numel() == 2)]],
  ["ds.ops.elementwise"] = [[assert(m.add.name == "add" and m.where.name == "where")]],
  ["ds.ops.random"] = [[assert(m.rand.name == "rand")]],
  ["ds.ops.sorting"] = [[assert(require("ds.ops.common").functions.argsort)]],
  ["ds.shape"] = [[local s = m.broadcast({ 2, 1 }, { 1, 3 }, "t"); assert(s[1] == 2 and s[2] == 3)]],
  ["ds.dtype"] = [[assert(m.promote("i32", "f32") == "f32")]],
  ["ds.convert.parser"] = [[assert(m.parse("return 1", "t").tag == "Function")]],
  ["ds.onnx.export_control"] = [[assert(type(m.cond) == "function" and type(m.while_loop) == "function")]],
  ["ds.onnx.export"] = [[assert(m.FORMS.cond and m.FORMS.add)]],
  ["ds.nn.linear"] = [[assert(m.Linear(3, 2)(require("ds.random").rand(4, 3)):numel() == 8)]],
  ["ds.nn.conv"] = [[assert(m.Conv2d(1, 2, 3)(require("ds.random").rand(1, 1, 5, 5)):numel() == 18)]],
  ["ds.optim.sgd"] = [[local p = require("ds.random").rand(3):requires_grad_(); local o = m({ p }, { lr = 0.1 });
    (p * 2):sum():backward(); o:step()]],
  ["ds.optim.adam"] = [[local p = require("ds.random").rand(3):requires_grad_(); local o = m.Adam({ p }, { lr = 0.1 });
    (p * 2):sum():backward(); o:step()]],
}

local function modules()
  local p = io.popen("cd lua && find ds -name '*.lua' | sort")
  local list = {}
  for path in p:lines() do list[#list + 1] = (path:gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")) end
  p:close()
  return list
end

-- the shell command that requires each module of mods in its own luajit, printing "<module> FAIL: <error>"
local function batch_command(mods)
  local parts = {}
  for _, mod in ipairs(mods) do
    local code = string.format('local ok, e = pcall(function() local m = require("%s"); assert(m ~= nil); %s end) '
      .. 'if not ok then io.write("FAIL: ", (tostring(e):gsub("\\n", " ")), "\\n") end', mod, CALLS[mod] or "")
    -- every line it prints (its FAIL line, or luajit's own error) is prefixed with the module's name
    parts[#parts + 1] = "luajit -e '" .. code .. "' 2>&1 | head -c 400 | sed 's/^/" .. mod .. " /'"
  end
  return "(" .. table.concat(parts, "; ") .. ")"
end

describe("every module of lua/ds required alone", function()
  local mods = modules()

  it("has a statement for modules that exist only", function()
    local known = {}
    for _, m in ipairs(mods) do known[m] = true end
    for m in pairs(CALLS) do assert(known[m], "CALLS names no module: " .. m) end
    assert.is_true(#mods > 100)
  end)

  it("loads each module in a fresh luajit and calls its cheap function", function()
    local batches, size = {}, 16
    for i = 1, #mods, size do
      batches[#batches + 1] = batch_command({ unpack(mods, i, math.min(i + size - 1, #mods)) })
    end
    -- two batches at a time (each batch's processes one after another)
    local cmd = "export LUA_PATH='./lua/?.lua;./lua/?/init.lua;;'; "
    for i = 1, #batches, 2 do
      cmd = cmd .. batches[i] .. (batches[i + 1] and (" & " .. batches[i + 1] .. " & wait; ") or "; ")
    end
    local p = io.popen(cmd)
    local failures = {}
    for line in p:lines() do if line ~= "" then failures[#failures + 1] = line end end
    p:close()
    table.sort(failures)
    assert.same({}, failures)
  end)

  it("reports a module that needs another loaded first", function()
    local p = io.popen("export LUA_PATH='./lua/?.lua;./lua/?/init.lua;;'; " .. batch_command({ "ds.no_such_module" }))
    local out = p:read("*a")
    p:close()
    assert.truthy(out:match("^ds%.no_such_module FAIL: "))
  end)
end)
