-- tests/serve_stream_session_spec.lua: the KV-cache generation session (serve/session.lua) over its Unix socket,
-- without nginx: a client process (python3) stands in for a worker's event loop.
local ds = require("ds")
local session = require("ds.serve.session")

-- a by-slot step model of 4 cache rows (ids (n, t), pos (n), slots (4) -> logits (n, t, 5)) whose prompt calls
-- (t > 1) fail; its one-token calls (the session's warm-up) return zeros
local function failing_model()
  local m = {}
  function m.specs() return { { shape = { "n", "t" } }, { shape = { "n" } }, { shape = { 4 } } } end
  return setmetatable(m, { __call = function(_, ids)
    if ids:size(2) > 1 then error("the prompt call failed on purpose", 0) end
    return ds.zeros({ ids:size(1), 1, 5 })
  end })
end

-- a client in the background: connects to path once it exists, writes `request`, reads until the session closes
-- the connection (writes "eof" and what it read to out) or 5 s pass (writes "timeout")
local CLIENT = [[
import os, socket, sys, time
path, out, request = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.time()
while not os.path.exists(path) and time.time() - t0 < 5: time.sleep(0.005)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.sendall(request.encode() + b"\n")
s.settimeout(5)
got = b""
try:
    while True:
        d = s.recv(4096)
        if not d: break
        got += d
    res = "eof " + got.decode()
except socket.timeout:
    res = "timeout"
open(out + ".tmp", "w").write(res)
os.rename(out + ".tmp", out)
]]

describe("serve KV-cache session", function()
  local dir
  before_each(function()
    dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
    local f = assert(io.open(dir .. "/client.py", "w")); f:write(CLIENT); f:close()
  end)
  after_each(function() os.execute("rm -rf " .. dir) end)

  it("closes its connections when a step fails, so the event loop sees it end (no request waits for its deadline)",
    function()
      local path, out = dir .. "/s.sock", dir .. "/out"
      os.execute(string.format("python3 %s/client.py %s %s '%s' &", dir, path, out,
        'S {"id": 7, "ids": [1, 2, 3], "opts": {"max_new_tokens": 4}}'))
      local ok, err = session.run(failing_model(), path, 16)
      assert.is_nil(ok)
      assert.truthy(tostring(err):find("the prompt call failed on purpose", 1, true), tostring(err))
      local res
      for _ = 1, 100 do   -- the client has 5 s before it reports a timeout
        local f = io.open(out)
        if f then res = f:read("*a"); f:close(); break end
        os.execute("sleep 0.1")
      end
      assert.equal("eof R 4\n", res)   -- its rows, then closed: no token
    end)

  it("builds the plans of every decode step before it listens; a short prompt is one call", function()
    local calls = {}
    local m = {}   -- a by-slot step model of 4 cache rows: logits of zeros (token 1), each call's (n, t) recorded
    function m.specs() return { { shape = { "n", "t" } }, { shape = { "n" } }, { shape = { 4 } } } end
    setmetatable(m, { __call = function(_, ids)
      calls[#calls + 1] = ids:size(1) .. "x" .. ids:size(2)
      return ds.zeros({ ids:size(1), ids:size(2), 5 })
    end })
    local path, out = dir .. "/s.sock", dir .. "/out"
    os.execute(string.format("python3 %s/client.py %s %s '%s' &", dir, path, out,
      'S {"id": 7, "ids": [1, 2, 3], "opts": {"max_new_tokens": 2}}'))
    assert.is_true((session.run(m, path, 16)))
    -- warm-up: 1..4 rows of one token; then the prompt in one call and a step
    assert.same({ "1x1", "2x1", "3x1", "4x1", "1x3", "1x1" }, calls)
  end)
end)
