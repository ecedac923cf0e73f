-- save_kill_spec.lua: ds.save is crash-atomic: a process saving in a loop is SIGKILLed at random points
-- (40 times); after every kill the model loads and is the previous or the new one, bit for bit, and the
-- next save leaves no temporary or superseded files behind.
local ds = require("ds")
local H = require("helpers")
local cjson = require("cjson")

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local KILLS = 40

-- the saver: two models (seeds 1 and 2, ~1 MiB of params) saved alternately until it is killed
local SAVER = [[
local ds = require("ds")
local nn = ds.nn
local function model(seed)
  ds.manual_seed(seed)
  local net = nn.Sequential(nn.Linear(16, 512), nn.ReLU(), nn.Linear(512, 512), nn.Linear(512, 4))
  net:eval()
  return ds.compile(net, { ds.spec({ "batch", 16 }, "f32", "x") }), net
end
local a, b = model(1), model(2)
local path, ready = arg[1], arg[2]
local f = io.open(ready, "w"); f:close()
local k = 0
while true do
  k = k + 1
  ds.save(k % 2 == 0 and a or b, path)
end
]]

local function listing()
  local p = io.popen("ls -A " .. dir .. "/models")
  local s = p:read("*a"); p:close()
  local names = {}
  for name in s:gmatch("[^\n]+") do names[#names + 1] = name end
  return names
end

describe("ds.save under SIGKILL", function()
  it("every kill leaves the previous or the new model loadable, and the next save cleans up", function()
    local nn = ds.nn
    local want = {}
    local x = ds.randn(3, 16)
    for seed = 1, 2 do
      ds.manual_seed(seed)
      local net = nn.Sequential(nn.Linear(16, 512), nn.ReLU(), nn.Linear(512, 512), nn.Linear(512, 4))
      net:eval()
      want[seed] = net(x)
      if seed == 1 then
        os.execute("mkdir -p " .. dir .. "/models")
        ds.save(ds.compile(net, { ds.spec({ "batch", 16 }, "f32", "x") }), dir .. "/models/m")
      end
    end
    H.write_file(dir .. "/saver.lua", SAVER)
    local seen, killed_mid_write = { 0, 0 }, 0
    math.randomseed(7)
    for round = 1, KILLS do
      local ready, pidfile = dir .. "/ready", dir .. "/pid"
      os.remove(ready)
      os.execute(string.format("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit %s %s %s >/dev/null 2>&1 & echo $! > %s",
        dir .. "/saver.lua", dir .. "/models/m", ready, pidfile))
      local pid = tonumber(H.read_file(pidfile))
      for _ = 1, 300 do
        if io.open(ready) then break end
        os.execute("sleep 0.02")
      end
      assert.truthy(io.open(ready), "the saver did not start")
      os.execute(string.format("sleep %.3f; kill -9 %d", 0.02 + math.random() * 0.3, pid))
      while io.open("/proc/" .. pid .. "/stat") and not H.read_file("/proc/" .. pid .. "/stat"):match("^%d+ %b() Z") do
        os.execute("sleep 0.01")
      end
      for _, name in ipairs(listing()) do if name:match("%.tmp$") then killed_mid_write = killed_mid_write + 1; break end end
      local m = ds.load(dir .. "/models/m")
      local y = m(x)
      local which = H.bitwise(y, want[1]) and 1 or H.bitwise(y, want[2]) and 2 or nil
      assert.truthy(which, "round " .. round .. ": the loaded model is neither the previous nor the new one")
      seen[which] = seen[which] + 1
    end
    -- both models were seen, and some kills landed while a file was being written
    assert.truthy(seen[1] > 0 and seen[2] > 0)
    assert.truthy(killed_mid_write > 0)
    -- the next save removes what the killed savers left: the graph file, its params file and the plan remain
    ds.manual_seed(1)
    local net = nn.Sequential(nn.Linear(16, 512), nn.ReLU(), nn.Linear(512, 512), nn.Linear(512, 4))
    net:eval()
    ds.save(ds.compile(net, { ds.spec({ "batch", 16 }, "f32", "x") }), dir .. "/models/m")
    local names = listing()
    table.sort(names)
    local want_names = { "m.json", cjson.decode(H.read_file(dir .. "/models/m.json")).params.file }
    table.sort(want_names)
    assert.same(want_names, names)
    assert(H.bitwise(ds.load(dir .. "/models/m")(x), want[1]))
    os.execute("rm -rf " .. dir)
  end)
end)
