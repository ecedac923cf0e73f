-- serve/session.lua: a KV-cache generation session in a worker-thread Lua VM (serve/compute.lua's session): a
-- ds.generator over the model's rows, fed and read by the nginx worker's event loop (serve/generate.lua) over a Unix
-- socket this thread listens on, so each side wakes when the other writes: requests and cancellations in, tokens out.
local ffi = require("ffi")
local cjson = require("cjson.safe")
local ds = require("ds")

local M = {}
local C = ffi.C
for _, decl in ipairs {
  "struct ds_sockaddr_un { unsigned short sun_family; char sun_path[108]; };",
  "struct ds_pollfd { int fd; short events; short revents; };",
  "int socket(int domain, int type, int protocol);", "int bind(int fd, const void *addr, unsigned int len);",
  "int listen(int fd, int backlog);", "int accept(int fd, void *addr, void *len);",
  "int poll(struct ds_pollfd *fds, unsigned long nfds, int timeout);",
  "long recv(int fd, void *buf, size_t len, int flags);", "long send(int fd, const void *buf, size_t len, int flags);",
  "int close(int fd);", "int unlink(const char *path);", "int rename(const char *from, const char *to);",
} do pcall(ffi.cdef, decl) end
local AF_UNIX, SOCK_STREAM, SOCK_CLOEXEC, POLLIN, MSG_NOSIGNAL = 1, 1, 0x80000, 1, 0x4000
local IDLE_S = 0.05      -- a session ends after this long with no request running or waiting
local CONNECT_S = 10     -- how long it waits for the event loop to connect
local RBUF = 65536
local rbuf = ffi.new("char[?]", RBUF)
local pfd = ffi.new("struct ds_pollfd[1]")

-- fd readable within timeout_ms (0: now)
local function readable(fd, timeout_ms)
  pfd[0].fd, pfd[0].events, pfd[0].revents = fd, POLLIN, 0
  return C.poll(pfd, 1, timeout_ms) > 0
end

-- a socket listening on path, or nil and why. It listens under another name first and is renamed to path: the
-- event loop, waiting for path to exist, connects at once.
local function listen_on(path)
  local addr, tmp = ffi.new("struct ds_sockaddr_un"), path .. "~"
  if #tmp >= 108 then return nil, "socket path too long: " .. path end
  addr.sun_family = AF_UNIX
  ffi.copy(addr.sun_path, tmp)
  local fd = C.socket(AF_UNIX, SOCK_STREAM + SOCK_CLOEXEC, 0)
  if fd < 0 then return nil, "socket() failed (errno " .. ffi.errno() .. ")" end
  C.unlink(tmp)
  if C.bind(fd, addr, ffi.sizeof(addr)) ~= 0 or C.listen(fd, 1) ~= 0 or C.rename(tmp, path) ~= 0 then
    local e = ffi.errno()
    C.close(fd)
    C.unlink(tmp)
    return nil, string.format("cannot listen on %s (errno %d)", path, e)
  end
  return fd
end

local function send_all(fd, s)
  local at = 0
  while at < #s do
    local n = tonumber(C.send(fd, ffi.cast("const char *", s) + at, #s - at, MSG_NOSIGNAL))
    if n <= 0 then error("the event loop's socket closed (errno " .. ffi.errno() .. ")", 0) end
    at = at + n
  end
end

-- the session over the connected fd until it has been idle for IDLE_S or the event loop closed its end -> steps.
-- In: "S {id, ids, opts}" (a request: ds.generator:start's prompt and options) and "C id" (cancel) lines; out:
-- "id token 0|1" (1: its last token) and "id ! error" lines, one write per step.
local function serve(fd, gen, slots)
  local inbuf, waiting, running, steps, idle_since = "", {}, {}, 0, ds.clock()   -- running: generator id -> id
  while true do
    local busy = gen:active() > 0 or #waiting > 0
    local wait_ms = busy and 0 or math.max(0, math.ceil((IDLE_S - (ds.clock() - idle_since)) * 1000))
    if readable(fd, wait_ms) then
      local n = tonumber(C.recv(fd, rbuf, RBUF, 0))
      if n <= 0 then return steps end   -- the event loop went away (worker exiting)
      inbuf = inbuf .. ffi.string(rbuf, n)
      for line in inbuf:gmatch("([^\n]*)\n") do
        if line:sub(1, 2) == "S " then
          waiting[#waiting + 1] = cjson.decode(line:sub(3))
        elseif line:sub(1, 2) == "C " then
          local rid = tonumber(line:sub(3))
          for id, r in pairs(running) do if r == rid then gen:cancel(id); running[id] = nil end end
          for i = #waiting, 1, -1 do if waiting[i].id == rid then table.remove(waiting, i) end end
        end
      end
      inbuf = inbuf:match("[^\n]*$")
    elseif not busy then
      return steps
    end
    local out = {}
    while gen:active() < slots and #waiting > 0 do
      local r = table.remove(waiting, 1)
      local ok, id, why = pcall(gen.start, gen, r.ids, r.opts)
      if ok and id then running[id] = r.id
      else out[#out + 1] = string.format("%d ! %s\n", r.id, (tostring(ok and why or id):gsub("\n", " "))) end
    end
    if gen:active() > 0 then
      for _, ev in ipairs(gen:step()) do
        local rid = running[ev.id]
        if rid then
          out[#out + 1] = string.format("%d %d %d\n", rid, ev.token, ev.done and 1 or 0)
          if ev.done then running[ev.id] = nil end
        end
      end
      steps, idle_since = steps + 1, ds.clock()
    end
    if #out > 0 then send_all(fd, table.concat(out)) end
  end
end

-- M.run(m, path, max_len) -> true, steps | nil, error: a session of the loaded step model m (ids (slots, 1), pos
-- (slots) -> logits) whose caches hold max_len positions, talking to the event loop that connects to path
function M.run(m, path, max_len)
  local slots = m:specs()[1].shape[1]
  local gen = ds.generator({ step = function(_, ids, pos) return m(ids, pos) end, max_len = max_len },
    { slots = slots, compile = false })
  local lfd, err = listen_on(path)
  if not lfd then return nil, err end
  local fd = readable(lfd, CONNECT_S * 1000) and C.accept(lfd, nil, nil) or -1
  C.close(lfd)
  C.unlink(path)
  if fd < 0 then return nil, "the event loop did not connect to " .. path end
  local ok, steps = pcall(serve, fd, gen, slots)
  C.close(fd)
  if not ok then return nil, tostring(steps) end
  return true, steps
end

return M
