-- serve/batcher.lua: dynamic batching of one model in one nginx worker. Requests queue with the model version
-- current when they arrived; a dispatcher (a timer's light thread) takes the oldest and up to max_batch - 1 more
-- of its version and key (within max_tokens for rows that count tokens) once the oldest has waited max_wait_ms
-- (at once when max_batch are queued, or when a model call just finished), runs them as one call in the worker
-- thread pool (off the event loop) and wakes each request with its rows of the outputs.
local semaphore = ngx and require("ngx.semaphore")
local metrics = require("ds.serve.metrics")
local tensor = require("ds.serve.tensor")

local M = {}
local Batcher = {}
Batcher.__index = Batcher

-- name: the model; cfg: its settings (serve/config.lua); adapter: its input adapter (batch: rows, cfg -> model
-- inputs); run(version, inputs) -> ok, outputs {{dtype, shape, bytes}}, seconds (one call in a worker thread).
-- seen: one batch per input shape run (warms a new version's plans before it serves).
function M.new(name, cfg, adapter, run)
  return setmetatable({ name = name, cfg = cfg, pack = adapter.batch, run = run, queue = {},
                        head = 1, tail = 0, seen = {},
                        wake = semaphore.new(0), full = semaphore.new(0), collecting = false }, Batcher)
end

function Batcher:queued() return self.tail - self.head + 1 end

-- adds the versions of queued and running requests to the set `into`
function Batcher:versions(into)
  for i = self.head, self.tail do into[self.queue[i].version] = true end
  if self.running then into[self.running] = true end
end

local function now() ngx.update_time(); return ngx.now() end

-- Queue one row for `version` and wait for its answer: its rows of the outputs {{dtype, shape, bytes}} (all of
-- each output for a row.whole), or nil, reason, message
-- with reason "queue_full" or "deadline" (503) or "model" (500). timeout: seconds from now.
function Batcher:submit(row, timeout, version)
  local n = self:queued()
  if n >= self.cfg.queue_limit then
    return nil, "queue_full", string.format("model '%s' has %d requests waiting (queue_limit)", self.name, n)
  end
  local item = { row = row, version = version, sema = semaphore.new(0), arrived = now() }
  self.tail = self.tail + 1
  self.queue[self.tail] = item
  if self.wake:count() < 1 then self.wake:post(1) end
  if self.collecting and n + 1 >= self.cfg.max_batch and self.full:count() < 1 then self.full:post(1) end
  if not item.sema:wait(timeout) then
    item.cancelled = true          -- a dispatcher that has not taken it yet skips it
    return nil, "deadline", string.format("deadline exceeded: no answer from model '%s' within %g ms", self.name,
      timeout * 1000)
  end
  if item.err then return nil, "model", item.err end
  return item.result
end

-- the oldest live request and the next ones of its version and row key (in arrival order) while the batch has at
-- most max_batch requests and, for rows that count tokens, at most max_tokens tokens; out of the queue
function Batcher:take()
  local items, rest, tokens = {}, {}, 0
  for i = self.head, self.tail do
    local it = self.queue[i]
    self.queue[i] = nil
    if not it.cancelled then
      local n = it.row.tokens or 0
      if #items == 0 or (it.version == items[1].version and it.row.key == items[1].row.key
                         and #items < self.cfg.max_batch and tokens + n <= self.cfg.max_tokens) then
        items[#items + 1] = it
        tokens = tokens + n
      else
        rest[#rest + 1] = it
      end
    end
  end
  for i, it in ipairs(rest) do self.queue[i] = it end
  self.head, self.tail = 1, #rest
  return items
end

-- run the next batch as one model call, answer each of its requests
function Batcher:run_batch()
  local items = self:take()
  if #items == 0 then return end
  local start = now()
  local rows = {}
  for i, it in ipairs(items) do
    rows[i] = it.row
    metrics.observe("ds_queue_wait_seconds", self.name, start - it.arrived)
  end
  metrics.observe("ds_batch_size", self.name, #items)
  local inputs = self.pack(rows, self.cfg)
  self.running = items[1].version
  local ok, outputs, secs = self.run(self.running, inputs)
  self.running = nil
  if ok and outputs then
    local shape = {}
    for i, inp in ipairs(inputs) do shape[i] = table.concat(inp.shape, "x") end
    self.seen[table.concat(shape, ",")] = inputs
    metrics.observe("ds_compute_seconds", self.name, secs)
    -- each request's rows of every output with a row per batch row (an output without one goes to all whole)
    local first = 1
    for _, it in ipairs(items) do
      local n, mine = it.row.n or 1, {}
      for k, t in ipairs(outputs) do
        mine[k] = (it.row.whole or #t.shape == 0 or t.shape[1] < first + n - 1) and t or tensor.rows(t, first, n)
      end
      it.result = mine
      first = first + n
    end
  else
    local err = "model run failed: " .. tostring(ok and secs or outputs)
    ngx.log(ngx.ERR, self.name, ": ", err)
    for _, it in ipairs(items) do it.err = err end
  end
  for _, it in ipairs(items) do it.sema:post(1) end
end

-- the dispatcher: runs until the worker exits with nothing queued (wakes at least every second to notice)
function Batcher:loop()
  while not ngx.worker.exiting() or self:queued() > 0 do
    if self:queued() <= 0 then
      self.wake:wait(1)
    else
      local left = self.queue[self.head].arrived + self.cfg.max_wait_ms / 1000 - now()
      if left > 0 and self:queued() < self.cfg.max_batch then
        self.collecting = true
        self.full:wait(left)
        self.collecting = false
      end
      self:run_batch()
    end
  end
end

return M
