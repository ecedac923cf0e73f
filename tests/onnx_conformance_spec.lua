-- tests/onnx_conformance_spec.lua: ONNX's backend conformance node tests (ONNX 1.12's generators, written by
-- `make onnx-node-tests`), each case run by ds eagerly and compiled (freeze = true) against its expected
-- outputs; prints the pass count. The skip list (tests/onnx/conformance_skip.txt) names the cases that cannot
-- apply to an inference runtime, each with its category and reason.
local H = require("helpers")

local DIR = os.getenv("DS_ONNX_NODE_TESTS") or "build/onnx-node-tests/node"
local SKIP_FILE = "tests/onnx/conformance_skip.txt"
-- categories of skipped cases that do not count against the pass rate (ops an inference runtime does not run)
local NOT_APPLICABLE = { training = true, string = true }
local CATEGORIES = { training = true, string = true, random = true, reference = true, unsupported = true }
local CHUNK_SECONDS = 300 -- a run that outlives this is killed; the case it was on counts as a hang

-- name -> {category, reason}
local function skip_list()
  local skips = {}
  for line in io.lines(SKIP_FILE) do
    if line ~= "" and line:sub(1, 1) ~= "#" then
      local name, category, reason = line:match("^(%S+)\t(%S+)\t(.+)$")
      assert(name and CATEGORIES[category], SKIP_FILE .. ": malformed line (name, category, reason): " .. line)
      skips[name] = { category = category, reason = reason }
    end
  end
  return skips
end

-- every case's {status, message}, running tests/onnx/conformance_run.lua in child processes: a child that dies
-- or hangs marks the case it was on and the next child resumes after it
local function run_all()
  local results, after = {}, ""
  while true do
    local cmd = string.format("timeout -s KILL %d env LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit tests/onnx/conformance_run.lua %s %q 2>/dev/null",
      CHUNK_SECONDS, DIR, after)
    local p = io.popen(cmd)
    local current
    for line in p:lines() do
      local started = line:match("^start\t(%S+)$")
      local name, status, msg = line:match("^done\t(%S+)\t(%a+)\t(.*)$")
      if started then current = started end
      if name then results[name], after, current = { status = status, message = msg }, name, nil end
    end
    p:close()
    if not current then return results end
    results[current] = { status = "crashed", message = "the process died or hung on this case" }
    after = current
  end
end

describe("ONNX backend conformance node tests", function()
  local f = io.open(DIR .. "/test_abs/model.onnx", "rb")
  if f then f:close() end
  it("are generated (make onnx-node-tests)", function()
    assert.truthy(f, DIR .. " has no cases: run make onnx-node-tests")
  end)
  if not f then return end
  local results = run_all()
  local skips = skip_list()
  local counts = { pass = 0, refused = 0, wrong = 0, crashed = 0, skipped = 0, not_applicable = 0, total = 0 }
  for name, r in pairs(results) do
    counts.total = counts.total + 1
    counts[r.status] = counts[r.status] + 1
    local s = skips[name]
    if s and r.status ~= "pass" then
      counts.skipped = counts.skipped + 1
      if NOT_APPLICABLE[s.category] then counts.not_applicable = counts.not_applicable + 1 end
    end
  end
  local counted = counts.total - counts.not_applicable
  print(string.format("\nONNX conformance node tests: %d of %d pass (%.1f%%; %d training or string cases not counted); " ..
    "%d refused, %d wrong, %d crashed or hung; %d of these failing cases are in the skip list with a reason",
    counts.pass, counted, 100 * counts.pass / counted, counts.not_applicable, counts.refused, counts.wrong,
    counts.crashed, counts.skipped))

  it("give no wrong answer (but where ONNX 1.12's expected values are wrong), crash or hang", function()
    local bad = {}
    for name, r in pairs(results) do
      local reference_error = skips[name] and skips[name].category == "reference"
      if (r.status == "wrong" and not reference_error) or r.status == "crashed" then
        bad[#bad + 1] = name .. ": " .. r.message
      end
    end
    table.sort(bad)
    assert.equal(0, #bad, table.concat(bad, "\n"))
  end)

  it("fail only the skipped cases; refusals name the node and the reason", function()
    local unexpected = {}
    for name, r in pairs(results) do
      if r.status ~= "pass" and not skips[name] then unexpected[#unexpected + 1] = name .. ": " .. r.message end
      if r.status == "refused" then
        assert.truthy(r.message:find("ds.onnx.load: ", 1, true) or r.message:find("^%a+: "), name .. ": " .. r.message)
      end
    end
    table.sort(unexpected)
    assert.equal(0, #unexpected, table.concat(unexpected, "\n"))
  end)

  it("skip only cases that exist and do not pass", function()
    local stale = {}
    for name in pairs(skips) do
      if not results[name] then stale[#stale + 1] = name .. " (no such case)"
      elseif results[name].status == "pass" then stale[#stale + 1] = name .. " (passes: remove it from the list)" end
    end
    table.sort(stale)
    assert.equal(0, #stale, table.concat(stale, "\n"))
  end)
end)
