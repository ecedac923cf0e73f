-- serve/generate.lua: streamed generation with continuous batching, one loop per step model in one nginx worker.
-- A request's sequence joins the running batch between two steps and leaves it when it ends (max tokens, eos,
-- the model's max_length, its deadline, or its client gone); each step is one call of the step model on every
-- running sequence of one version (at most max_batch of them, max_tokens tokens in all) in the worker thread pool.
-- The step (serve/compute.lua) computes every sequence's row on its own, so each answer is bitwise the answer the
-- same request gets alone.
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
-- through the shared dict ds_generate instead of one thread call per step: a request is pushed to its version's
-- queue, the session takes it into a free row between two steps and pushes its tokens back; this loop moves them
-- to the requests and starts a session whenever requests wait and none runs.
local Cached = setmetatable({}, { __index = Loop })
Cached.__index = Cached
local POLL_S = 0.001
local next_id = 0

-- name, cfg as M.new; session(version, key) -> ok, true, steps | error (models.session)
function M.cached(name, cfg, session)
  return setmetatable({ name = name, cfg = cfg, session = session, active = {}, seen = {}, wake = semaphore.new(0),
                        dict = ngx.shared.ds_generate }, Cached)
end

-- the shared-dict key of a version's session
function Cached:key(version) return string.format("gen:%d:%s:%s", ngx.worker.pid(), self.name, version) end

-- seq as Loop:submit, with opts (ds.generator's start options: max_new_tokens, eos, temperature, top_k, top_p,
-- min_p, seed): queued for the session of its version
function Cached:submit(seq)
  local ok, reason, msg = Loop.submit(self, seq)
  if not ok then return nil, reason, msg end
  next_id = next_id + 1
  seq.rid = next_id
  local added, err = self.dict:rpush(self:key(seq.version) .. ":q", cjson.encode { id = seq.rid, ids = seq.ids,
    opts = seq.opts })
  if not added then
    self.active[#self.active] = nil
    return nil, "queue_full", "the generation queue is full: " .. tostring(err)
  end
  return seq
end

-- a sequence that ends here (cancelled, deadline): the session drops it at its next step; what it pushed for it
-- until then expires
local function cancel(self, seq)
  if not seq.rid then return end
  local key = self:key(seq.version)
  self.dict:set(key .. ":c:" .. seq.rid, true, 60)
  self.dict:expire(key .. ":o:" .. seq.rid, 60)
end

-- moves the tokens the session pushed to their sequences; ends those that are done
function Cached:collect()
  for _, s in ipairs(self.active) do
    local out = self:key(s.version) .. ":o:" .. s.rid
    local got = false
    while not s.done do
      local item = self.dict:lpop(out)
      if not item then break end
      local m = cjson.decode(item)
      got = true
      if m.error then
        s.error = "model step failed: " .. m.error
        self:finish(s, "error")
      else
        s.tokens[#s.tokens + 1] = m.token
        metrics.count("ds_generated_tokens_total", self.name)
        if m.done then
          self:finish(s, s.eos and m.token == s.eos and "eos" or s.capped and "max_length" or "length")
        end
      end
    end
    if s.done then self.dict:delete(out) end
    if got and not s.done then s.sema:post(1) end
  end
end

-- runs the session of the oldest waiting sequence's version in a light thread
function Cached:start_session()
  local version = self.active[1].version
  self.running = version
  ngx.thread.spawn(function()
    local ok, done, err = self.session(version, self:key(version))
    self.running = nil
    if not (ok and done) then
      local why = tostring(ok and err or done)
      ngx.log(ngx.ERR, self.name, ": generation session failed: ", why)
      for _, s in ipairs(self.active) do
        if s.version == version and not s.done then s.error = "model step failed: " .. why; self:finish(s, "error") end
      end
    end
    if self.wake:count() < 1 then self.wake:post(1) end
  end)
end

function Cached:loop()
  while not ngx.worker.exiting() or #self.active > 0 do
    for _, s in ipairs(self.active) do if s.cancelled or ngx.now() >= s.deadline then cancel(self, s) end end
    self:sweep()
    if #self.active == 0 then
      self.wake:wait(1)
    else
      if not self.running then self:start_session() end
      ngx.sleep(POLL_S)
      self:collect()
    end
  end
end

return M
