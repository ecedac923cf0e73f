-- tests/misuse_spec.lua: runs tools/misuse_fuzz.lua (every public function and Tensor method with bad
-- arguments) in its own process for a bounded time (DS_FUZZ_SECONDS, default 5): a crash or a hang fails,
-- as does an op of the op table without a fuzz target; errors that do not name an op are listed as pending.
local H = require("helpers")

describe("misuse fuzzer", function()
  local seconds = tonumber(os.getenv("DS_FUZZ_SECONDS")) or 5
  local out_path = os.tmpname()
  local cmd = string.format("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit tools/misuse_fuzz.lua %g 1 > %s 2>/dev/null; echo $?", seconds, out_path)
  local p = io.popen(cmd)
  local rc = tonumber(p:read("*a"))
  p:close()
  local out = H.read_file(out_path)
  os.remove(out_path)
  it("runs to its end (no crash) and finds no hang and no op without a target", function()
    assert.truthy(out:find("^misuse fuzz: %d+ calls"), "the fuzzer did not finish (crash?), exit " .. tostring(rc) .. ":\n" .. out)
    assert.is_true(rc == 0 or rc == 1)
    assert.falsy(out:find("instruction limit", 1, true), out)
    assert.falsy(out:find("op without a fuzz target", 1, true), out)
  end)
  local raw = select(2, out:gsub("\n    %-> ", ""))
  if raw > 0 then
    pending(string.format("%d calls still fail with a Lua internal instead of naming the op (issue 12 item 2)", raw))
  end
end)
