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
-- over a Unix socket the session listens on (serve/session.lua) instead of one thread call per step: this loop
-- joins the running session of the oldest waiting request's version (any worker's: the shared dict ds_generate
-- names its socket), or starts one in this worker's pool; it writes each request (and cancellation) as a line, and
-- a reader light thread wakes on each line of tokens the session writes after a step and hands the tokens to their
-- requests at once (no polling on either side). The requests of every worker share one session's rows.
local Cached = setmetatable({}, { __index = Loop })
Cached.__index = Cached
local CONNECT_RETRY_S = 0.001   -- the session listens once its pool thread runs: checked this often till then
local JOIN_WAIT_S = 10          -- how long a worker waits for another worker's session to listen (its CONNECT_S)
local next_id, sessions = 0, 0
pcall(ffi.cdef, "int access(const char *path, int mode);")

-- name, cfg as M.new; session(version, path) -> ok, true, steps | error (models.session)
function M.cached(name, cfg, session)
  return setmetatable({ name = name, cfg = cfg, session = session, active = {}, seen = {}, wake = semaphore.new(0),
                        by_rid = {}, dict = ngx.shared.ds_generate }, Cached)
end

-- seq as Loop:submit, with opts (ds.generator's start options: max_new_tokens, eos, temperature, top_k, top_p,
-- min_p, seed): sent to the session of its version by the loop
function Cached:submit(seq)
  local ok, reason, msg = Loop.submit(self, seq)
  if not ok then return nil, reason, msg end
  next_id = next_id + 1
  seq.rid = next_id
  self.by_rid[seq.rid] = seq
  return seq
end

-- as Loop:finish; the loop then drops it from the running ones
function Cached:finish(seq, reason)
  Loop.finish(self, seq, reason)
  self.by_rid[seq.rid] = nil
  if self.wake:count() < 1 then self.wake:post(1) end
end

-- the socket of a new session: in nginx's temp directory (/tmp if that path is too long for a socket address)
local function socket_path(name)
  sessions = sessions + 1
  local file = string.format("ds-gen-%d-%d-%s.sock", ngx.worker.pid(), sessions, name)
  local path = ngx.config.prefix() .. "temp/" .. file
  return #path < 108 and path or "/tmp/" .. file
end

-- a line of the session: "rid token 0|1" or "rid ! error" -> 1 when it gave a request a token, else 0 (plain finds,
-- no patterns: this runs per token)
function Cached:on_line(line)
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
        tokens = tokens + self:on_line(text:sub(at, nl - 1))
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
  if self.wake:count() < 1 then self.wake:post(1) end
end

-- connects to sess.path and starts a reader light thread handing the session's lines to on_line -> true, or nil
-- when nothing listens there (sess.closed: the reader has stopped)
function Cached:connect(sess)
  local sock = ffi.C.access(sess.path, 0) == 0 and ngx.socket.tcp()
  if not (sock and sock:connect("unix:" .. sess.path)) then return nil end
  sock:settimeouts(1000, 60000, 60000)
  sess.sock = sock
  sess.reader = ngx.thread.spawn(read_session, self, sess, sock)
  return true
end

-- joins the session of the oldest waiting sequence's version if one runs or starts (in any worker), else claims
-- the version in the shared dict (one session per version for every worker: workers whose requests come at once
-- do not each start their own), starts it in a pool thread and connects to it; the dict names its socket while it runs
function Cached:start_session()
  local version = self.active[1].version
  local key = "session:" .. self.name .. ":" .. version
  local mine = socket_path(self.name)
  while true do
    local claimed, why = self.dict:add(key, mine)
    if claimed or why ~= "exists" then break end   -- a full dict: this session goes unnamed (no other worker joins)
    local path = self.dict:get(key)
    if path then
      -- another worker's session: it listens once its pool thread runs, so wait while the dict still names it
      local sess, give_up = { version = version, path = path, joined = true }, now() + JOIN_WAIT_S
      while true do
        if self:connect(sess) then self.sess, self.running = sess, version; return end
        if self.dict:get(key) ~= path or now() >= give_up then break end
        ngx.sleep(CONNECT_RETRY_S)
      end
      if self.dict:get(key) == path then self.dict:delete(key) end   -- it has ended
    end
  end
  local sess = { version = version, path = mine }
  self.sess, self.running = sess, version
  ngx.thread.spawn(function()
    local ok, done, err = self.session(version, sess.path)
    if self.dict:get(key) == sess.path then self.dict:delete(key) end
    sess.ended = true
    if not (ok and done) then sess.failure = tostring(ok and err or done) end
    if self.wake:count() < 1 then self.wake:post(1) end
  end)
  while not sess.ended and ffi.C.access(sess.path, 0) ~= 0 do ngx.sleep(CONNECT_RETRY_S) end
  if sess.ended or not self:connect(sess) then
    sess.closed = true   -- the session ends too: it waits for a connection that does not come
    if self.dict:get(key) == sess.path then self.dict:delete(key) end
    return
  end
  sess.key = key
end

-- the session has ended: on a failure the sequences of its version end with "error"; those sent to it that have no
-- token yet go to the next session (it ended idle as they came, or its worker went away), the others end with
-- "error" (a session another worker ran ended while they ran)
function Cached:end_session()
  local sess = self.sess
  self.sess, self.running = nil, nil
  if sess.sock then sess.sock:close() end
  if sess.failure then ngx.log(ngx.ERR, self.name, ": generation session failed: ", sess.failure) end
  for _, s in ipairs(self.active) do
    if sess.failure and s.version == sess.version then
      s.error = "model step failed: " .. sess.failure
      self:finish(s, "error")
    elseif s.sent == sess and not s.done and #s.tokens > 0 then
      s.error = "the generation session ended"
      self:finish(s, "error")
    elseif s.sent == sess then
      s.sent = nil
    end
  end
end

-- the sequences that end here (cancelled, past their deadline) are dropped as Loop:sweep does; those the session
-- runs are cancelled there (one write)
function Cached:sweep()
  local sess, out, t = self.sess, {}, now()
  for _, s in ipairs(self.active) do
    if s.sent and s.sent == sess and not s.done and (s.cancelled or t >= s.deadline) then
      out[#out + 1] = "C " .. s.rid .. "\n"
    end
  end
  if #out > 0 and not sess.sock:send(out) then sess.sock:close() end   -- the reader sees it closed
  Loop.sweep(self)
end

-- the requests not yet sent to the session of their version, written at once
function Cached:send()
  local sess, out = self.sess, {}
  for _, s in ipairs(self.active) do
    if not s.sent and s.version == sess.version then
      out[#out + 1] = "S " .. cjson.encode { id = s.rid, ids = s.ids, opts = s.opts } .. "\n"
      s.sent = sess
    end
  end
  if #out > 0 and not sess.sock:send(out) then sess.sock:close() end
end

function Cached:loop()
  while not ngx.worker.exiting() or #self.active > 0 do
    if self.sess and self.sess.ended and self.sess.closed then self:end_session() end
    -- a worker on its way out (nginx reloads) lets new requests start their own session: this one drains and ends
    if ngx.worker.exiting() and self.sess and self.sess.key then self.dict:delete(self.sess.key) end
    self:sweep()
    if #self.active > 0 and not self.sess then self:start_session() end
    if self.sess and self.sess.sock and not self.sess.closed then self:send() end
    self.wake:wait(1)
  end
  -- the worker exits: the session sees its socket close and ends
  if self.sess and self.sess.sock then ngx.thread.kill(self.sess.reader); self.sess.sock:close() end
end

return M
