-- serve/generate.lua: streamed generation with continuous batching, one loop per step model in one nginx worker.
-- A request's sequence joins the running batch between two steps and leaves it when it ends (max tokens, eos,
-- the model's max_length, its deadline, or its client gone); each step is one call of the step model on every
-- running sequence of one version (at most max_batch of them, max_tokens tokens in all) in the worker thread pool.
-- The step (serve/compute.lua) computes every sequence's row on its own, so each answer is bitwise the answer the
-- same request gets alone.
local ffi = require("ffi")
local cjson = require("cjson.safe")
local semaphore = ngx and require("ngx.semaphore")
local metrics = require("ds.serve.metrics")
local models = ngx and require("ds.serve.models")

local M = {}
local Loop = {}
Loop.__index = Loop

-- name: the model; cfg: its settings; step(version, seqs) -> ok, {tokens, logits}, seconds (compute.step)
function M.new(name, cfg, step)
  return setmetatable({ name = name, cfg = cfg, step = step, active = {}, seen = {}, wake = semaphore.new(0) }, Loop)
end

-- sequences waiting or running in this worker
function Loop:queued() return #self.active end

-- adds the versions of the running sequences to the set `into`
function Loop:versions(into)
  for _, s in ipairs(self.active) do into[s.version] = true end
  if self.running then into[self.running] = true end
end

local function now() ngx.update_time(); return ngx.now() end

-- A new sequence {ids (prompt), max_new, deadline (ngx.now() seconds), version, eos}: joins at the next step.
-- It gains seq.tokens and seq.logits one per step, seq.done = reason at its end (seq.error for "error"), and its
-- seq.sema is posted after each. nil, reason, message when the queue is full.
function Loop:submit(seq)
  if #self.active >= self.cfg.queue_limit then
    return nil, "queue_full", string.format("model '%s' has %d sequences running or waiting (queue_limit)", self.name,
      #self.active)
  end
  seq.tokens, seq.logits, seq.sema = {}, {}, semaphore.new(0)
  self.active[#self.active + 1] = seq
  if self.wake:count() < 1 then self.wake:post(1) end
  return seq
end

-- a request gives up on seq (its client went away: "cancelled", or its deadline passed: "deadline"): the loop
-- ends it before its next step
function Loop:cancel(seq, reason)
  seq.cancelled = seq.cancelled or reason
  seq.sema:post(1)
  if self.wake:count() < 1 then self.wake:post(1) end
end

-- end seq with `reason` (counted once), wake its request
function Loop:finish(seq, reason)
  if seq.done then return end
  seq.done = reason
  metrics.count("ds_generations_total", self.name, reason)
  seq.sema:post(1)
end

-- drop the sequences that ended or must end before the next step (cancelled, past their deadline)
function Loop:sweep()
  local keep, t = {}, now()
  for _, s in ipairs(self.active) do
    if s.cancelled then self:finish(s, s.cancelled)
    elseif t >= s.deadline then self:finish(s, "deadline") end
    if not s.done then keep[#keep + 1] = s end
  end
  self.active = keep
end

-- the sequences of the next step: the oldest running one's version, in arrival order, at most max_batch and
-- max_tokens tokens (the oldest always)
function Loop:take()
  local batch, tokens = {}, 0
  for _, s in ipairs(self.active) do
    local n = #s.ids + #s.tokens
    if #batch == 0 or (s.version == batch[1].version and #batch < self.cfg.max_batch
                       and tokens + n <= self.cfg.max_tokens) then
      batch[#batch + 1] = s
      tokens = tokens + n
    end
  end
  return batch
end

-- one step: every sequence of the batch gains a token, or they all end with "error"
function Loop:run_step()
  local batch = self:take()
  local seqs = {}
  for i, s in ipairs(batch) do
    local all = {}
    for k, v in ipairs(s.ids) do all[k] = v end
    for _, v in ipairs(s.tokens) do all[#all + 1] = v end
    seqs[i] = all
  end
  metrics.observe("ds_batch_size", self.name, #batch)
  self.running = batch[1].version
  local ok, res, secs = self.step(self.running, seqs)
  self.running = nil
  if not (ok and res) then
    local err = "model step failed: " .. tostring(ok and secs or res)
    ngx.log(ngx.ERR, self.name, ": ", err)
    for _, s in ipairs(batch) do s.error = err; self:finish(s, "error") end
    return
  end
  metrics.observe("ds_compute_seconds", self.name, secs)
  metrics.count("ds_generated_tokens_total", self.name, nil, #batch)
  for i, s in ipairs(batch) do
    if not s.done then
      local tok = res.tokens[i]
      s.tokens[#s.tokens + 1], s.logits[#s.logits + 1] = tok, res.logits[i]
      if s.eos and tok == s.eos then self:finish(s, "eos")
      elseif #s.tokens >= s.max_new then self:finish(s, "length")
      elseif #s.ids + #s.tokens >= self.cfg.max_length then self:finish(s, "max_length")
      else s.sema:post(1) end
    end
  end
end

-- the loop: runs until the worker exits with nothing running (wakes at least every second to notice). After an
-- idle spell the first step waits for others up to max_wait_ms after the first arrival (less once max_batch wait).
function Loop:loop()
  local idle = true
  while not ngx.worker.exiting() or #self.active > 0 do
    self:sweep()
    if #self.active == 0 then
      idle = true
      self.wake:wait(1)
    else
      if idle then
        local until_ = now() + self.cfg.max_wait_ms / 1000
        while #self.active < self.cfg.max_batch and now() < until_ do ngx.sleep(0.001) end
        idle = false
      end
      self:run_step()
    end
  end
end

-- ---- KV-cache step models: ds.generator sessions (docs/SERVING.md "KV caches") ----
-- The generator's caches live in the one thread VM that runs its session (compute.session), so requests reach it
-- over a Unix socket the session listens on (serve/session.lua) instead of one thread call per step. A version runs
-- up to cfg.sessions sessions at once, each in its own pool thread with its own cache rows (any worker's: the shared
-- dict ds_generate names their sockets, "session:NAME:VERSION:K", and counts each one's busy rows, "rows:PATH"): a
-- waiting request joins the running session with the fewest busy rows; a new one starts (in this worker's pool) when
-- every running one has at least half its rows busy and fewer than cfg.sessions run, so 8 streams run as 2 sessions of
-- 4 rows, one per core. The loop writes each request (and cancellation) as a line, and a reader light thread per
-- session wakes on each line of tokens it writes after a step and hands the tokens to their requests at once (no
-- polling on either side). The requests of every worker share the sessions' rows.
local Cached = setmetatable({}, { __index = Loop })
Cached.__index = Cached
local CONNECT_RETRY_S = 0.001   -- a session listens once its pool thread runs: checked this often till then
local JOIN_WAIT_S = 10          -- how long a worker waits for another worker's session to listen (its CONNECT_S)
local next_id, started = 0, 0
pcall(ffi.cdef, "int access(const char *path, int mode);")

local function wake(self) if self.wake:count() < 1 then self.wake:post(1) end end

-- name, cfg as M.new; session(version, path) -> ok, true, steps | error (models.session)
function M.cached(name, cfg, session)
  return setmetatable({ name = name, cfg = cfg, session = session, active = {}, seen = {},
                        wake = semaphore.new(0), by_rid = {}, sessions = {}, by_path = {},
                        dict = ngx.shared.ds_generate }, Cached)
end

-- adds the versions of the waiting sequences and of the sessions this worker talks to to the set `into`
function Cached:versions(into)
  for _, s in ipairs(self.active) do into[s.version] = true end
  for _, sess in ipairs(self.sessions) do into[sess.version] = true end
end

-- seq as Loop:submit, with opts (ds.generator's start options: max_new_tokens, eos, temperature, top_k, top_p,
-- min_p, seed): sent to a session of its version by the loop
function Cached:submit(seq)
  local ok, reason, msg = Loop.submit(self, seq)
  if not ok then return nil, reason, msg end
  next_id = next_id + 1
  seq.rid = next_id
  self.by_rid[seq.rid] = seq
  return seq
end

-- seq no longer holds a row of the session it was sent to (counted once)
function Cached:release(seq)
  local sess = seq.counted
  if not sess then return end
  seq.counted, sess.mine = nil, sess.mine - 1
  self.dict:incr("rows:" .. sess.path, -1)
end

-- as Loop:finish; the loop then drops it from the running ones
function Cached:finish(seq, reason)
  Loop.finish(self, seq, reason)
  self:release(seq)
  self.by_rid[seq.rid] = nil
  wake(self)
end

-- the socket of a new session: in nginx's temp directory (/tmp if that path is too long for a socket address)
local function socket_path(name)
  started = started + 1
  local file = string.format("ds-gen-%d-%d-%s.sock", ngx.worker.pid(), started, name)
  local path = ngx.config.prefix() .. "temp/" .. file
  return #path < 108 and path or "/tmp/" .. file
end

-- a line of session sess: "rid token 0|1", "rid ! error", or "R rows" (its first: how many cache rows it has) -> 1
-- when it gave a request a token, else 0 (plain finds, no patterns: this runs per token)
function Cached:on_line(sess, line)
  if line:byte(1) == 82 then   -- "R"
    sess.rows = tonumber(line:sub(3))
    wake(self)
    return 0
  end
  local sp = line:find(" ", 1, true)
  local s = sp and self.by_rid[tonumber(line:sub(1, sp - 1))]
  if not s or s.done then return 0 end
  if line:byte(sp + 1) == 33 then   -- "!"
    s.error = "model step failed: " .. line:sub(sp + 3)
    self:finish(s, "error")
    return 0
  end
  local tok = tonumber(line:sub(sp + 1, -3))
  s.tokens[#s.tokens + 1] = tok
  if line:byte(-1) == 49 then   -- "1": its last token
    self:finish(s, s.eos and tok == s.eos and "eos" or s.capped and "max_length" or "length")
  elseif s.sema:count() < 1 then
    s.sema:post(1)
  end
  return 1
end

-- the reader light thread of a session's socket: each read's lines handed to on_line (the tokens counted once per
-- read), until the socket closes; then sess.closed. A module-level function (ngx.thread.spawn's arguments), not a
-- closure per session: the JIT's traces of one session's reader serve the next.
local function read_session(self, sess, sock)
  local rest = ""
  while true do
    local data, err = sock:receiveany(65536)
    if data then
      local text, at, tokens = rest .. data, 1, 0
      while true do
        local nl = text:find("\n", at, true)
        if not nl then break end
        tokens = tokens + self:on_line(sess, text:sub(at, nl - 1))
        at = nl + 1
      end
      rest = text:sub(at)
      if tokens > 0 then metrics.count("ds_generated_tokens_total", self.name, nil, tokens) end
    elseif err ~= "timeout" then
      break
    end
  end
  sess.closed = true
  if sess.joined then sess.ended = true end   -- another worker's session: its end is the socket's
  wake(self)
end

-- connects to sess.path and starts a reader light thread handing the session's lines to on_line -> true, or nil
-- when nothing listens there
function Cached:connect(sess)
  local sock = ffi.C.access(sess.path, 0) == 0 and ngx.socket.tcp()
  if not (sock and sock:connect("unix:" .. sess.path)) then return nil end
  sock:settimeouts(1000, 60000, 60000)
  sess.sock = sock
  sess.reader = ngx.thread.spawn(read_session, self, sess, sock)
  return true
end

-- light thread: joins another worker's session, which listens once its pool thread runs: tried while the dict still
-- names it (a session named for longer than JOIN_WAIT_S that never listened has ended: unnamed)
local function join(self, sess)
  local give_up = now() + JOIN_WAIT_S
  while not self:connect(sess) do
    local named = self.dict:get(sess.key) == sess.path
    if not named or now() >= give_up then
      if named then self.dict:delete(sess.key) end
      sess.closed, sess.ended = true, true
      break
    end
    ngx.sleep(CONNECT_RETRY_S)
  end
  wake(self)
end

-- light thread: a session this worker started, in its pool until it ends (unnamed then)
local function run_own(self, sess)
  local ok, done, err = self.session(sess.version, sess.path)
  if sess.key and self.dict:get(sess.key) == sess.path then self.dict:delete(sess.key) end
  self.dict:delete("rows:" .. sess.path)
  sess.ended = true
  if not (ok and done) then sess.failure = tostring(ok and err or done) end
  wake(self)
end

-- light thread: connects to a session this worker started once it listens
local function connect_own(self, sess)
  while not sess.ended and ffi.C.access(sess.path, 0) ~= 0 do ngx.sleep(CONNECT_RETRY_S) end
  if sess.ended or not self:connect(sess) then
    sess.closed = true   -- the session ends too: it waits for a connection that does not come
    if sess.key and self.dict:get(sess.key) == sess.path then self.dict:delete(sess.key) end
  end
  wake(self)
end

local function add(self, sess)
  sess.mine = 0
  self.sessions[#self.sessions + 1], self.by_path[sess.path] = sess, sess
  self.running = true
end

local function session_key(self, version, k) return "session:" .. self.name .. ":" .. version .. ":" .. k end

-- joins the sessions of `version` the dict names that this worker does not talk to yet (any worker's)
function Cached:discover(version)
  for k = 1, self.cfg.sessions do
    local key = session_key(self, version, k)
    local path = self.dict:get(key)
    if path and not self.by_path[path] then
      local sess = { version = version, path = path, key = key, joined = true }
      add(self, sess)
      ngx.thread.spawn(join, self, sess)
    end
  end
end

-- starts a session of `version` in this worker's pool under the first free name (unnamed if the dict is full: no
-- other worker joins it); false when every name is taken (another worker's session: discover joins it)
function Cached:start(version)
  local path = socket_path(self.name)
  for k = 1, self.cfg.sessions do
    local key = session_key(self, version, k)
    local claimed, why = self.dict:add(key, path)
    if claimed or why ~= "exists" then
      local sess = { version = version, path = path, key = claimed and key or nil }
      self.dict:set("rows:" .. path, 0)
      metrics.count("ds_generation_sessions_total", self.name)
      add(self, sess)
      ngx.thread.spawn(run_own, self, sess)
      ngx.thread.spawn(connect_own, self, sess)
      return true
    end
  end
  return false
end

-- where a waiting sequence of `version` goes: the ready session (connected, its rows known) with the fewest busy
-- rows; nil to wait: a session is starting and every ready one has at least half its rows busy, or none is ready.
-- Starts a session when every live one (ready or starting) has at least half its rows busy, fewer than
-- cfg.sessions live, and this worker's pool has room (a version's first session starts regardless).
function Cached:choose(version)
  local best, best_busy, live, starting, half = nil, math.huge, 0, false, true
  for _, sess in ipairs(self.sessions) do
    if sess.version == version and not sess.closed and not sess.ended then
      live = live + 1
      if sess.rows then
        local busy = self.dict:get("rows:" .. sess.path) or sess.mine
        if busy < best_busy then best, best_busy = sess, busy end
        half = half and 2 * busy >= sess.rows
      else
        starting = true
      end
    end
  end
  if half and not starting and live < self.cfg.sessions and (live == 0 or models.session_room())
     and self:start(version) then
    return nil
  end
  if best and (not (half and starting)) then return best end
  return nil
end

-- the session has ended: on its failure the sequences of its version not yet running elsewhere end with "error";
-- those sent to it that have no token yet go to another session (it ended idle as they came, or its worker went
-- away), the others end with "error" (a session another worker ran ended while they ran)
function Cached:end_session(sess)
  for i, x in ipairs(self.sessions) do if x == sess then table.remove(self.sessions, i); break end end
  self.by_path[sess.path] = nil
  self.running = #self.sessions > 0 or nil
  if sess.sock then sess.sock:close() end
  if sess.failure then ngx.log(ngx.ERR, self.name, ": generation session failed: ", sess.failure) end
  for _, s in ipairs(self.active) do
    if sess.failure and s.version == sess.version and (s.sent == sess or not s.sent) then
      s.error = "model step failed: " .. sess.failure
      self:finish(s, "error")
    elseif s.sent == sess and not s.done and #s.tokens > 0 then
      s.error = "the generation session ended"
      self:finish(s, "error")
    elseif s.sent == sess then
      self:release(s)
      s.sent = nil
    end
  end
end

-- lines for session sess, written at once per session and step of the loop
local function queue(out, sess, line)
  local q = out[sess]
  if not q then q = {}; out[sess] = q end
  q[#q + 1] = line
end
local function flush(out)
  for sess, lines in pairs(out) do
    if not sess.sock:send(lines) then sess.sock:close() end   -- the reader sees it closed
  end
end

-- the sequences that end here (cancelled, past their deadline) are dropped as Loop:sweep does; those a session runs
-- are cancelled there (one write per session)
function Cached:sweep()
  local out, t = {}, now()
  for _, s in ipairs(self.active) do
    local sess = s.sent
    if sess and sess.sock and not sess.closed and not s.done and (s.cancelled or t >= s.deadline) then
      queue(out, sess, "C " .. s.rid .. "\n")
    end
  end
  flush(out)
  Loop.sweep(self)
end

-- the waiting requests sent to the sessions chosen for them (sessions of their versions joined first), written at
-- once per session
function Cached:send()
  local out, seen = {}, {}
  for _, s in ipairs(self.active) do
    if not s.sent and not s.done then
      if not seen[s.version] then self:discover(s.version); seen[s.version] = true end
      local sess = self:choose(s.version)
      if sess then
        queue(out, sess, "S " .. cjson.encode { id = s.rid, ids = s.ids, opts = s.opts } .. "\n")
        s.sent, s.counted, sess.mine = sess, sess, sess.mine + 1
        self.dict:incr("rows:" .. sess.path, 1)
      end
    end
  end
  flush(out)
end

function Cached:loop()
  while not ngx.worker.exiting() or #self.active > 0 do
    for i = #self.sessions, 1, -1 do
      local sess = self.sessions[i]
      if sess.ended and sess.closed then self:end_session(sess) end
    end
    -- a worker on its way out (nginx reloads) lets new requests start their own sessions: its own drain and end
    if ngx.worker.exiting() then
      for _, sess in ipairs(self.sessions) do
        if not sess.joined and sess.key and self.dict:get(sess.key) == sess.path then self.dict:delete(sess.key) end
      end
    end
    self:sweep()
    self:send()
    self.wake:wait(1)
  end
  -- the worker exits: the sessions see their sockets close and end
  for _, sess in ipairs(self.sessions) do
    if sess.sock then ngx.thread.kill(sess.reader); sess.sock:close() end
  end
end

return M
