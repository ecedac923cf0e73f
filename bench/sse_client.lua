-- bench/sse_client.lua: n streamed generations at once from one process (LuaJIT, its FFI over the socket calls), the
-- client of bench/serve_stream_bench.lua: opens every connection, sends the requests back to back, reads the chunked
-- Server-Sent Events replies as they come (poll, then one recv per ready socket into one buffer: a real client runs
-- on another machine, and this one shares the server's cores, so it does little per read), and prints one JSON line:
-- each stream's request-sent and last-event times (seconds from the first connect), its tokens, and this process's
-- CPU seconds over the streams. A stream's last event is its reply's last (zero-size) chunk; the replies are parsed
-- and checked after every stream has ended (outside the CPU window: that work does not compete with the server).
-- usage: luajit bench/sse_client.lua PORT N PATH BODY
local ffi = require("ffi")
local cjson = require("cjson")

ffi.cdef [[
struct sse_sockaddr_in { unsigned short family; unsigned short port; unsigned int addr; char zero[8]; };
struct sse_pollfd { int fd; short events; short revents; };
struct sse_timespec { long sec; long nsec; };
int socket(int domain, int type, int protocol);
int connect(int fd, const void *addr, unsigned int len);
int setsockopt(int fd, int level, int name, const void *value, unsigned int len);
long send(int fd, const void *buf, size_t len, int flags);
long recv(int fd, void *buf, size_t len, int flags);
int poll(struct sse_pollfd *fds, unsigned long nfds, int timeout);
int close(int fd);
int clock_gettime(int clock, struct sse_timespec *ts);
]]
local C = ffi.C
local AF_INET, SOCK_STREAM, IPPROTO_TCP, TCP_NODELAY, POLLIN, CLOCK_MONOTONIC = 2, 1, 6, 1, 1, 1
local RBUF = 65536

local port, n, path, body = tonumber(arg[1]), tonumber(arg[2]), arg[3], arg[4]
assert(port and n and path and body, "usage: luajit bench/sse_client.lua PORT N PATH BODY")

local ts = ffi.new("struct sse_timespec")
local function now()
  C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9
end
-- CPU seconds of this process so far (its threads' run time, nanoseconds in schedstat)
local function cpu()
  local f = assert(io.open("/proc/self/schedstat"))
  local ns = tonumber(f:read("*a"):match("^(%d+)"))
  f:close()
  return ns / 1e9
end

local request = string.format("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
  .. "Content-Length: %d\r\nConnection: close\r\n\r\n%s", path, port, #body, body)

local addr = ffi.new("struct sse_sockaddr_in")
addr.family, addr.port, addr.addr = AF_INET, bit.bswap(port * 65536), bit.bswap(0x7f000001)   -- network order
local one = ffi.new("int[1]", 1)

local c0, t0 = cpu(), now()
local streams, pfd = {}, ffi.new("struct sse_pollfd[?]", n)
for i = 1, n do
  local fd = C.socket(AF_INET, SOCK_STREAM, 0)
  assert(fd >= 0 and C.connect(fd, addr, ffi.sizeof(addr)) == 0, "cannot connect to 127.0.0.1:" .. port)
  C.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, one, ffi.sizeof(one))
  streams[i] = { i = i, fd = fd, parts = {}, tail = "" }
  pfd[i - 1].fd, pfd[i - 1].events = fd, POLLIN
end
for _, st in ipairs(streams) do
  assert(C.send(st.fd, request, #request, 0) == #request, "stream " .. st.i .. ": the request was not sent whole")
  st.sent = now() - t0
end

-- read until every stream's reply has ended: its last chunk ("0\r\n\r\n", the last 5 bytes read) or its socket closed
local buf, open = ffi.new("char[?]", RBUF), n
while open > 0 do
  local ready = C.poll(pfd, n, 30000)
  assert(ready > 0, "no event for 30 s")
  for i = 0, n - 1 do
    if pfd[i].revents ~= 0 then
      local st = streams[i + 1]
      local got = tonumber(C.recv(st.fd, buf, RBUF, 0))
      if got > 0 then
        local s = ffi.string(buf, got)
        st.parts[#st.parts + 1] = s
        st.tail = (st.tail .. s):sub(-5)
      end
      if got <= 0 or st.tail == "0\r\n\r\n" then
        st.last = now() - t0
        C.close(st.fd)
        pfd[i].fd, pfd[i].revents = -1, 0   -- poll skips it
        open = open - 1
      end
    end
  end
end
local cpu_s = cpu() - c0

-- a reply's chunked body's data (its headers checked first)
local function data_of(st)
  local raw = table.concat(st.parts)
  local head_end = raw:find("\r\n\r\n", 1, true)
  assert(head_end, "stream " .. st.i .. ": no reply headers")
  local headers = raw:sub(1, head_end)
  assert(headers:match("^HTTP/1%.1 200") and headers:lower():find("transfer-encoding: chunked", 1, true),
    "stream " .. st.i .. ": not a chunked 200 reply: " .. headers)
  local out, at = {}, head_end + 4
  while true do
    local size_end = raw:find("\r\n", at, true)
    assert(size_end, "stream " .. st.i .. ": closed before its last chunk")
    local size = tonumber(raw:sub(at, size_end - 1):match("^%x+"), 16)
    assert(size, "stream " .. st.i .. ": bad chunk header: " .. raw:sub(at, at + 40))
    if size == 0 then return table.concat(out) end
    out[#out + 1] = raw:sub(size_end + 2, size_end + 1 + size)
    at = size_end + size + 4
  end
end

-- each stream: its events in order (index 1, 2, ...) and its final event's tokens, which they must spell
local out = {}
for i, st in ipairs(streams) do
  local tokens, final = {}, nil
  for event in data_of(st):gmatch("data: ([^\n]*)\n\n") do
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
