-- serve/session.lua: a KV-cache generation session in a worker-thread Lua VM (serve/compute.lua's session): a
-- ds.generator over the model's rows, fed and read by the nginx workers' event loops (serve/generate.lua) over a Unix
-- socket this thread listens on, so each side wakes when the other writes: requests and cancellations in, tokens out.
local ffi = require("ffi")
local cjson = require("cjson.safe")
local ds = require("ds")
require("ds.ffi")   -- poll(2) and struct ds_pollfd

local M = {}
local C = ffi.C
for _, decl in ipairs {
  "struct ds_sockaddr_un { unsigned short sun_family; char sun_path[108]; };",
  "int socket(int domain, int type, int protocol);", "int bind(int fd, const void *addr, unsigned int len);",
  "int listen(int fd, int backlog);", "int accept(int fd, void *addr, void *len);",
  "long recv(int fd, void *buf, size_t len, int flags);", "long send(int fd, const void *buf, size_t len, int flags);",
  "int close(int fd);", "int unlink(const char *path);", "int rename(const char *from, const char *to);",
} do pcall(ffi.cdef, decl) end
local AF_UNIX, SOCK_STREAM, SOCK_CLOEXEC, POLLIN, MSG_NOSIGNAL = 1, 1, 0x80000, 1, 0x4000
local IDLE_S = 0.05      -- a session ends after this long with no request running or waiting
local CONNECT_S = 10     -- how long it waits for the worker that started it to connect
-- a connection's token lines are written at most this often (each write wakes that worker's event loop, which then
-- writes each of its streams); a request's last line, an error, or a session with nothing left to run writes at once
local FLUSH_S = 0.0005
local RBUF = 65536
local rbuf = ffi.new("char[?]", RBUF)
local i64_ptr = ffi.typeof("int64_t *")

-- poll over lfd and the connections' fds, in a pollfd array kept from call to call (no allocation per step) -> the
-- array: entry 0 is lfd, entry i the connection conns[i]
local pfd, pcap = nil, 0
local function poll(lfd, conns, timeout_ms)
  local n = #conns + 1
  if n > pcap then pcap = math.max(2 * pcap, n, 8); pfd = ffi.new("struct ds_pollfd[?]", pcap) end
  pfd[0].fd, pfd[0].events, pfd[0].revents = lfd, POLLIN, 0
  for i = 1, n - 1 do pfd[i].fd, pfd[i].events, pfd[i].revents = conns[i].fd, POLLIN, 0 end
  if C.poll(pfd, n, timeout_ms) <= 0 then
    for i = 0, n - 1 do pfd[i].revents = 0 end
  end
  return pfd
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
  if C.bind(fd, addr, ffi.sizeof(addr)) ~= 0 or C.listen(fd, 64) ~= 0 or C.rename(tmp, path) ~= 0 then
    local e = ffi.errno()
    C.close(fd)
    C.unlink(tmp)
    return nil, string.format("cannot listen on %s (errno %d)", path, e)
  end
  return fd
end

-- s written to fd; false when the other side has gone
local function send_all(fd, s)
  local at = 0
  while at < #s do
    local n = tonumber(C.send(fd, ffi.cast("const char *", s) + at, #s - at, MSG_NOSIGNAL))
    if n <= 0 then return false end
    at = at + n
  end
  return true
end

-- a session's connection (fd, inbuf, out: its lines this step, nout) and the helpers of serve below: module-level
-- functions, not closures made per session, so the JIT's traces of one session's loop serve the next (a closure
-- made per session fails the traces' guards on it, and its side traces were recorded again every session)
local function conn(fd) return { fd = fd, inbuf = "", out = {}, nout = 0, now = false, written = 0 } end
local function put(c, line, now)
  c.nout = c.nout + 1
  c.out[c.nout] = line
  c.now = c.now or now
end

-- the requests of connection c end (id: only its request id, else all of them)
local function cancel(st, c, rid)
  for id, r in pairs(st.running) do
    if r.conn == c and (rid == nil or r.id == rid) then st.gen:cancel(id); st.running[id] = nil end
  end
  local waiting = st.waiting
  for i = #waiting, 1, -1 do
    if waiting[i].conn == c and (rid == nil or waiting[i].id == rid) then table.remove(waiting, i) end
  end
end

-- a connection gone: closed, its requests end
local function drop(st, c)
  C.close(c.fd)
  for i, x in ipairs(st.conns) do if x == c then table.remove(st.conns, i); break end end
  cancel(st, c, nil)
end

-- connection c's new bytes: its complete lines ("S {...}" requests, "C id" cancellations) taken
local function take_lines(st, c, got)
  c.inbuf = c.inbuf .. ffi.string(rbuf, got)
  for line in c.inbuf:gmatch("([^\n]*)\n") do
    if line:sub(1, 2) == "S " then
      local r = cjson.decode(line:sub(3))
      if r then r.conn = c; st.waiting[#st.waiting + 1] = r end
    elseif line:sub(1, 2) == "C " then
      local rid = tonumber(line:sub(3))
      if rid then cancel(st, c, rid) end
    end
  end
  c.inbuf = c.inbuf:match("[^\n]*$")
end

-- The session over the listening socket lfd until no request has run or waited for IDLE_S, or no event loop is
-- connected -> steps. Every worker of the server may connect (serve/generate.lua finds the session in the shared
-- dict ds_generate), so requests of all workers share the model's rows. In, per connection: "S {id, ids, opts}" (a
-- request: ds.generator:start's prompt and options; id unique on that connection) and "C id" (cancel) lines; out:
-- "R rows" (written on connecting: its cache rows), "id token 0|1" (1: its last token) and "id ! error" lines, one
-- write per connection (all its rows' lines) after a step that ends one of its requests, or leaves none running,
-- else every FLUSH_S. conns (the caller's, empty): the connections, open ones left in it on an error for the caller
-- to close.
local function serve(lfd, gen, slots, conns)
  local st = { gen = gen, conns = conns, waiting = {}, running = {} }   -- running: generator id -> request
  local waiting, running, steps = st.waiting, st.running, 0
  local hello = "R " .. slots .. "\n"   -- each connection's first line: the rows, so a loop can balance sessions
  -- the first connection (the worker that started the session) comes within CONNECT_S
  local first = poll(lfd, conns, CONNECT_S * 1000)[0].revents ~= 0 and C.accept(lfd, nil, nil) or -1
  if first < 0 then error("the event loop did not connect", 0) end
  conns[1] = conn(first)
  send_all(first, hello)
  local idle_since, gone = ds.clock(), {}
  while #conns > 0 do
    local busy = gen:active() > 0 or #waiting > 0
    if not busy and ds.clock() - idle_since >= IDLE_S then break end
    local n = #conns
    local p = poll(lfd, conns, busy and 0 or math.max(0, math.ceil((IDLE_S - (ds.clock() - idle_since)) * 1000)))
    local accept = p[0].revents ~= 0
    for i = 1, n do
      local c = conns[i]
      if p[i].revents ~= 0 then
        local got = tonumber(C.recv(c.fd, rbuf, RBUF, 0))
        if got <= 0 then gone[#gone + 1] = c else take_lines(st, c, got) end
      end
    end
    for i = #gone, 1, -1 do drop(st, gone[i]); gone[i] = nil end
    if accept then
      local fd = C.accept(lfd, nil, nil)
      if fd >= 0 and send_all(fd, hello) then conns[#conns + 1] = conn(fd) elseif fd >= 0 then C.close(fd) end
    end
    while gen:active() < slots and #waiting > 0 do
      local r = table.remove(waiting, 1)
      local ok, id, why = pcall(gen.start, gen, r.ids, r.opts)
      if ok and id then running[id] = r
      else put(r.conn, string.format("%d ! %s\n", r.id, (tostring(ok and why or id):gsub("\n", " "))), true) end
    end
    if gen:active() > 0 then
      local events = gen:step()
      for i = 1, #events do
        local ev = events[i]
        local r = running[ev.id]
        if r then
          put(r.conn, string.format("%d %d %d\n", r.id, ev.token, ev.done and 1 or 0), ev.done)
          if ev.done then running[ev.id] = nil end
        end
      end
      steps, idle_since = steps + 1, ds.clock()
    end
    local t, last = ds.clock(), gen:active() == 0
    for i = 1, #conns do
      local c = conns[i]
      if c.nout > 0 and (c.now or last or t - c.written >= FLUSH_S) then
        if not send_all(c.fd, table.concat(c.out, "", 1, c.nout)) then gone[#gone + 1] = c end
        c.nout, c.now, c.written = 0, false, t
      end
    end
    for i = #gone, 1, -1 do drop(st, gone[i]); gone[i] = nil end
  end
  return steps
end

-- the cache rows of the loaded step model m: ids (slots, 1), pos (slots) (each step runs every row), or ids (n, t),
-- pos (n), slots (slots) (by slot: the rows of ids first, docs/SERVING.md) -> slots, by_slot
local function rows_of(m)
  local specs = m:specs()
  local rows = specs[#specs].shape[1]
  if type(rows) ~= "number" or #specs < 2 or #specs > 3 or (#specs == 2 and specs[1].shape[1] ~= rows) then
    error("a KV-cache step model takes ids (slots, 1), pos (slots), or ids (n, t), pos (n), slots (slots) "
      .. "(docs/SERVING.md)", 0)
  end
  return rows, #specs == 3
end

-- The plans of every decode step a by-slot session makes (n running rows of one token, n = 1 .. slots), built once
-- per loaded model m before its first session listens: a shape's first call builds its plan (~5 ms), which otherwise
-- stalls every running stream the first time a batch size comes up (requests joining in waves). Prompt shapes stay
-- lazy (ds.generator: one row of 1 .. 15 tokens, or chunks of 16, 32, ..): a plan keeps ~0.3 MB of Lua heap that
-- every full GC cycle walks, and 17 more of them made each session ~0.3-0.9 ms slower (char GPT, 1 and 8 requests,
-- 1 thread, busy host, indicative). The calls write cache position 1 of rows 1 .. slots, which a request's own
-- prompt writes again before any query reads it.
local warmed = setmetatable({}, { __mode = "k" })
local function warm(m, slots)
  if warmed[m] then return end
  local i64 = { dtype = "i64" }
  local all = ds.arange(1, slots + 1, i64)
  for n = 1, slots do m(ds.ones({ n, 1 }, i64), ds.ones({ n }, i64), all) end
  warmed[m] = true
end

-- The generator's model over the loaded step model m (methods, not closures made per session: the JIT's traces
-- through them serve every session). With by_slot, step(ids (n, t), pos (n), run (n)) calls m with its slots input
-- (slots) i64: the generator's rows first, then the other rows, written in place (one tensor for every call: m reads
-- it during the call).
local Model, BySlot = {}, {}
Model.__index, BySlot.__index = Model, BySlot
function Model:step(ids, pos) return self.m(ids, pos) end
function BySlot:step(ids, pos, run)
  local n, o, taken, slots = run:numel(), self.order_p, self.taken, self.slots
  local rp = ffi.cast(i64_ptr, run:data_ptr())
  for s = 1, slots do taken[s] = false end
  for i = 0, n - 1 do
    local s = rp[i]
    o[i], taken[tonumber(s)] = s, true
  end
  for s = 1, slots do
    if not taken[s] then o[n] = s; n = n + 1 end
  end
  return self.m(ids, pos, self.order)
end
local function step_model(m, slots, by_slot, max_len)
  if not by_slot then return setmetatable({ m = m, max_len = max_len }, Model) end
  local order = ds.zeros({ slots }, { dtype = "i64" })
  return setmetatable({ m = m, max_len = max_len, slots = slots, order = order, taken = ffi.new("bool[?]", slots + 1),
                        order_p = ffi.cast(i64_ptr, order:data_ptr()) }, BySlot)
end

-- M.run(m, path, max_len) -> true, steps | nil, error: a session of the loaded step model m (rows_of) whose caches
-- hold max_len positions, listening on path for the workers' event loops
function M.run(m, path, max_len)
  local okr, slots, by_slot = pcall(rows_of, m)
  if not okr then return nil, tostring(slots) end
  local gen = ds.generator(step_model(m, slots, by_slot, max_len), { slots = slots, by_slot = by_slot,
    compile = false })
  -- the steps run on this thread alone (an OpenMP team's second thread would take the core the event loops and the
  -- clients need; the pool thread's team size is restored after)
  local threads = ds.get_num_threads()
  ds.set_num_threads(1)
  local okw, why = true, nil
  if by_slot then okw, why = pcall(warm, m, slots) end
  local lfd, err
  if okw then lfd, err = listen_on(path) else err = "warm-up: " .. tostring(why) end
  if not lfd then
    ds.set_num_threads(threads)
    return nil, err
  end
  local conns = {}
  local ok, steps = pcall(serve, lfd, gen, slots, conns)
  for _, c in ipairs(conns) do C.close(c.fd) end   -- on an error too: the event loops see the session end
  ds.set_num_threads(threads)
  C.unlink(path)   -- no new connection from here on
  C.close(lfd)
  if not ok then return nil, tostring(steps) .. " (" .. path .. ")" end
  return true, steps
end

return M
