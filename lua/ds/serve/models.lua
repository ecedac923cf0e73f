-- serve/models.lua: the model versions one nginx worker serves, and their hot reload. A version is a hash of a
-- model's files (name.json, which names its params file by content, and its vocab if any); a timer notices
-- new files, loads them into every thread VM of the worker off the request path (one VM at a time while the others
-- serve), then switches atomically (one table reference) once all have them and the other workers are ready too.
-- Requests keep the version current when they arrived: in-flight ones finish on the old one.
local cjson = require("cjson.safe")
local semaphore = ngx and require("ngx.semaphore")
local metrics = require("ds.serve.metrics")
local util = require("ds.serve.util")

local M = {}
local POOL = "ds"             -- the thread_pool of nginx.conf
local CHECK_S = 0.5           -- how often the worker looks at the model files
local RETRY_S = 2             -- a version that failed to load is tried again after this long
local SYNC_S = 3              -- the longest a worker waits for the other workers before switching alone
local dir, threads, settings, names, adapters
local slots                   -- semaphore: thread VMs free (every ngx.run_worker_thread holds one)
local vms = {}                -- ids of this worker's thread VMs
local state = {}              -- name -> {current = {ok, version, info | error, vocab}, pending, failed}
local batchers = {}           -- name -> batcher or generation loop (their queued versions stay loaded)
local hosted = 0              -- generation sessions running in this worker's pool
M.ready = false               -- every thread VM has loaded every model (or failed)

-- the model's files now: version (12 hex digits), graph text, vocab table; or nil and why not
local function files_of(name)
  local s = settings[name]
  local graph = util.read(dir .. "/" .. name .. ".json")
  if not graph then return nil, dir .. "/" .. name .. ".json is missing or unreadable" end
  local vocab_text, vocab = "", nil
  if s.vocab then
    vocab_text = util.read(dir .. "/" .. s.vocab) or ""
    vocab = cjson.decode(vocab_text)
    if type(vocab) ~= "table" then return nil, s.vocab .. " missing or malformed" end
  end
  return { version = ngx.md5(graph .. "\0" .. vocab_text):sub(1, 12), graph = graph, vocab = vocab }
end

-- a call in the worker thread pool, once one of its VMs is free: ok, results... (as ngx.run_worker_thread)
function M.call(fn, ...)
  if not slots:wait(60) then return false, "no worker thread free for 60 s" end
  local res = { ngx.run_worker_thread(POOL, "ds.serve.compute", fn, ...) }
  slots:post(1)
  return unpack(res, 1, table.maxn(res))
end

-- the versions any thread VM must keep: current and pending ones, and those of queued or running requests
local function live()
  local out = {}
  for _, name in ipairs(names) do
    local st, keep = state[name], {}
    if st.current and st.current.version then keep[st.current.version] = true end
    if st.pending then keep[st.pending] = true end
    if batchers[name] then batchers[name]:versions(keep) end
    out[name] = keep
  end
  return out
end

-- ensure on `count` VMs at once (posted in one event-loop turn, so each takes a different free VM): the results
local function ensure_many(count, name, f, warm)
  local threads_, results = {}, {}
  for i = 1, count do
    threads_[i] = ngx.thread.spawn(M.call, "ensure", dir, name, f.version, f.graph, warm, live())
  end
  for i = 1, count do
    local _, ok, r = ngx.thread.wait(threads_[i])
    results[i] = ok and r or { ok = false, error = tostring(r) }
  end
  return results
end

-- requests queued or running in this worker
local function busy()
  for _, b in pairs(batchers) do if b:queued() > 0 or b.running then return true end end
  return false
end

-- a reload's loads in one VM of the whole server at a time (every worker's VMs share the host's cores: two loads
-- at once on two cores would stall every request for their length); the lock lapses if its holder dies
local LOCK_S = 10
local function with_load_lock(fn, ...)
  local dict, key = ngx.shared.ds_metrics, "reload-lock"
  while not dict:add(key, ngx.worker.pid(), LOCK_S) and not ngx.worker.exiting() do ngx.sleep(0.002) end
  local res = { pcall(fn, ...) }
  dict:delete(key)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- load version f into every thread VM of this worker: info, or nil and the error. At start all VMs load at once
-- (nothing to serve yet). Later one VM at a time while requests wait or run, so the others serve them; the pool
-- hands out the VM freed last, so a VM that already has f comes back: then, when idle or after a second of trying,
-- every free VM at once (posted together, each takes a different VM).
local function load_everywhere(name, f, warm)
  local have, missing, info = {}, #vms, nil
  local first, since = #vms == 0, ngx.now()
  while first or missing > 0 do
    local all = first or not busy() or ngx.now() - since > 1
    local count = first and threads or all and math.max(1, slots:count()) or 1
    local results = first and ensure_many(count, name, f, warm) or with_load_lock(ensure_many, count, name, f, warm)
    for _, r in ipairs(results) do
      if not r.ok then return nil, r.error end
      if first then vms[#vms + 1] = r.vm; missing = missing + 1 end
      if not have[r.vm] then have[r.vm], missing = true, missing - 1 end
      info = r.info or info
    end
    first = false
    if missing > 0 then ngx.sleep(0.002); ngx.update_time() end   -- let a busy VM come back
  end
  return info
end

-- the batches a version's plans are compiled for before it serves: at start every shape if the settings say warm,
-- on a reload one batch per shape the worker has run (so the new version loads no faster than it has to)
local function warm_batches(name, at_start, f)
  local s = settings[name]
  if at_start then
    if not s.warm then return {} end
    -- the input specs as the graph file declares them (a file that does not parse fails to load anyway)
    local doc = cjson.decode(f.graph)
    local specs = {}
    for i, inp in ipairs(type(doc) == "table" and type(doc.inputs) == "table" and doc.inputs or {}) do
      specs[i] = { name = inp.name, dtype = inp.dtype, shape = inp.shape }
    end
    return adapters[name].shapes(s, specs)
  end
  local out = {}
  for _, inputs in pairs(batchers[name].seen) do out[#out + 1] = inputs end
  return out
end

-- every worker has loaded `version` of `name`, or SYNC_S passed: switch then, so the workers change together
local function wait_for_others(name, version)
  local dict, key = ngx.shared.ds_metrics, "ready:" .. name .. ":" .. version
  dict:incr(key, 1, 0, 60)
  local deadline = ngx.now() + SYNC_S
  while (dict:get(key) or 0) < ngx.worker.count() and ngx.now() < deadline and not ngx.worker.exiting() do
    ngx.sleep(0.005)
    ngx.update_time()
  end
end

-- look at one model's files; load and switch to a new version
local function check(name, at_start)
  local st = state[name]
  local f, err = files_of(name)
  local cur = st.current
  if f and cur and cur.version == f.version then st.failed = nil; return end
  -- the files of the last failure (the same version, or the same reason nothing could be read): retried later
  local failure = f and f.version or err
  if st.failed and st.failed.key == failure and ngx.now() - st.failed.at < RETRY_S then return end
  local info
  if f then
    st.pending = f.version          -- kept by every VM until the switch
    info, err = load_everywhere(name, f, warm_batches(name, at_start, f))
  end
  if not info then
    st.pending = nil
    st.failed = { key = failure, version = f and f.version, error = err, at = ngx.now() }
    if at_start or not (cur and cur.ok) then st.current = { ok = false, error = err } end
    if not at_start then metrics.count("ds_reloads_total", name, "failed") end
    ngx.log(ngx.WARN, "model ", name, ": ", err)
    return
  end
  if not at_start then wait_for_others(name, f.version) end
  st.current, st.failed, st.pending = { ok = true, version = f.version, info = info, vocab = f.vocab }, nil, nil
  if not at_start then metrics.count("ds_reloads_total", name, "ok") end
end

local function watch(premature)
  if premature then return end
  for _, name in ipairs(names) do check(name, not M.ready) end
  M.ready = true
  ngx.timer.at(CHECK_S, watch)
end

-- Worker start: load every model into every thread VM, then watch the files.
-- model_adapters: name -> input adapter (its shapes warm the plans at start)
function M.start(models_dir, nthreads, model_settings, model_names, model_adapters)
  dir, threads, settings, names, adapters = models_dir, nthreads, model_settings, model_names, model_adapters
  slots = semaphore.new(threads)
  for _, name in ipairs(names) do state[name] = {} end
  ngx.timer.at(0, watch)
end

function M.attach(name, batcher) batchers[name] = batcher end

-- the version requests to `name` get now: {ok, version, info | error, vocab}
function M.current(name) return state[name].current end

-- the last reload that failed (the previous version keeps serving): {version, error}, or nil
function M.failed(name) return state[name].failed end

-- a batch of `name` on `version` in a thread VM: ok, outputs, seconds (as compute.run)
function M.run(name, version, inputs) return M.call("run", name, version, inputs, live()) end

-- a generation step of `name` on `version` in a thread VM: ok, {tokens, logits}, seconds (as compute.step)
function M.step(name, version, seqs) return M.call("step", name, version, seqs, live()) end

-- a generation session of the KV-cache step model `name` on `version` in a thread VM, until it has been idle: ok,
-- true, steps (as compute.session)
function M.session(name, version, key)
  hosted = hosted + 1
  local res = { M.call("session", name, version, key, settings[name].max_length, live()) }
  hosted = hosted - 1
  return unpack(res, 1, table.maxn(res))
end

-- whether this worker's pool may take one more generation session: each other model keeps a thread
function M.session_room() return hosted < threads - #names + 1 end

return M
