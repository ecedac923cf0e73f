-- bench/sse_client.lua: n streamed generations at once from one process (LuaJIT, lua-socket, non-blocking sockets
-- and select), the client of bench/serve_stream_bench.lua: opens every connection, sends the requests back to back,
-- reads the chunked Server-Sent Events replies as they come, and prints one JSON line: each stream's request-sent and
-- last-event times (seconds from the first connect), its tokens, and this process's CPU seconds over the streams.
-- usage: luajit bench/sse_client.lua PORT N PATH BODY
local socket = require("socket")
local cjson = require("cjson")

local port, n, path, body = tonumber(arg[1]), tonumber(arg[2]), arg[3], arg[4]
assert(port and n and path and body, "usage: luajit bench/sse_client.lua PORT N PATH BODY")

-- CPU seconds of this process so far (its threads' run time, nanoseconds in schedstat)
local function cpu()
  local f = assert(io.open("/proc/self/schedstat"))
  local ns = tonumber(f:read("*a"):match("^(%d+)"))
  f:close()
  return ns / 1e9
end

local request = string.format("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
  .. "Content-Length: %d\r\nConnection: close\r\n\r\n%s", path, port, #body, body)

local c0, t0 = cpu(), socket.gettime()
local streams, socks, by_sock = {}, {}, {}
for i = 1, n do
  local s = assert(socket.tcp())
  s:setoption("tcp-nodelay", true)
  assert(s:connect("127.0.0.1", port))
  s:settimeout(0)
  streams[i] = { i = i, sock = s, raw = "", body = {} }
  socks[i], by_sock[s] = s, streams[i]
end
for _, st in ipairs(streams) do
  local at = 1
  while at <= #request do   -- a few hundred bytes: the socket takes them at once
    local sent, err, last = st.sock:send(request, at)
    at = (sent or last) + 1
    assert(sent or err == "timeout", err)
  end
  st.sent = socket.gettime() - t0
end

-- the chunked body's data so far appended to st.body; true at its last (zero-size) chunk
local function dechunk(st)
  while true do
    local size_end = st.raw:find("\r\n", 1, true)
    if not size_end then return false end
    local size = tonumber(st.raw:sub(1, size_end - 1):match("^%x+"), 16)
    assert(size, "bad chunk header: " .. st.raw:sub(1, 40))
    if size == 0 then return true end
    if #st.raw < size_end + 1 + size + 2 then return false end
    st.body[#st.body + 1] = st.raw:sub(size_end + 2, size_end + 1 + size)
    st.raw = st.raw:sub(size_end + size + 4)
  end
end

local open = n
while open > 0 do
  local ready = socket.select(socks, nil, 30)
  assert(#ready > 0, "no event for 30 s")
  for _, s in ipairs(ready) do
    local st = by_sock[s]
    local data, err, partial = s:receive(65536)
    local got = data or partial
    if got and #got > 0 then
      st.raw = st.raw .. got
      if not st.headers then
        local head_end = st.raw:find("\r\n\r\n", 1, true)
        if head_end then
          st.headers = st.raw:sub(1, head_end)
          assert(st.headers:match("^HTTP/1%.1 200") and st.headers:lower():find("transfer-encoding: chunked", 1, true),
            "stream " .. st.i .. ": not a chunked 200 reply: " .. st.headers)
          st.raw = st.raw:sub(head_end + 4)
        end
      end
      if st.headers and not st.last and dechunk(st) then st.last = socket.gettime() - t0 end
    end
    if err == "closed" or st.last then
      s:close()
      for k, x in ipairs(socks) do if x == s then table.remove(socks, k); break end end
      open = open - 1
      assert(st.last, "stream closed before its last chunk")
    end
  end
end
local cpu_s = cpu() - c0

-- each stream: its events in order (index 1, 2, ...) and its final event's tokens, which they must spell
local out = {}
for i, st in ipairs(streams) do
  local tokens, final = {}, nil
  for event in table.concat(st.body):gmatch("data: ([^\n]*)\n\n") do
    local e = cjson.decode(event)
    if e.done then final = e
    else
      assert(e.index == #tokens + 1, "stream " .. i .. ": event " .. e.index .. " after " .. #tokens)
      tokens[#tokens + 1] = e.token
    end
  end
  assert(final and final.count == #tokens, "stream " .. i .. ": no final event matching its token events")
  for k, t in ipairs(final.tokens) do assert(tokens[k] == t, "stream " .. i .. ": token " .. k .. " differs") end
  out[i] = { sent = st.sent, last = st.last, tokens = final.tokens }
end
print(cjson.encode({ streams = out, cpu = cpu_s }))
