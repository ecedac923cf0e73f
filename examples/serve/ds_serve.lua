-- examples/serve/ds_serve.lua: nginx Lua handlers serving ds models saved by ds.save (no model code):
-- POST /predict[/name], GET /health, GET /metrics. Models run in the worker thread pool (serve_compute.lua),
-- requests are batched per model (serve_batcher.lua); the event loop only parses, queues and answers.
local cjson = require("cjson.safe")
local config = require("serve_config")
local inputs = require("serve_inputs")

local M = {}
local POOL = "ds"             -- the thread_pool of nginx.conf
local dir, threads
local settings = {}           -- name -> serve_config settings (+ vocab for text models), read by the master
local names = {}              -- model names, sorted
local loaded = {}             -- this worker: name -> {ok, info | error} from its thread VMs
local batchers = {}           -- this worker: name -> serve_batcher
local ready = false           -- this worker: every thread VM has loaded the models

local function read_json(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a"); f:close()
  return cjson.decode(s)
end

-- Master process (init_by_lua): settings and vocabularies only. ds itself is loaded by the worker threads'
-- Lua VMs: the master runs no ds code, so no OpenMP thread exists when nginx forks (TOOLCHAIN.md).
-- nthreads: the thread_pool's threads = lua_worker_thread_vm_pool_size (serve.sh renders both).
function M.init(models_dir, nthreads)
  dir, threads = models_dir, nthreads
  settings = config.read(dir)
  for name, s in pairs(settings) do
    names[#names + 1] = name
    if s.vocab then s.vocab_table = read_json(dir .. "/" .. s.vocab) end
  end
  table.sort(names)
  if #names > threads then
    error(string.format("ds_serve: %d models need %d worker threads (one call in flight per model), the pool has %d",
      #names, #names, threads), 0)
  end
end

-- every thread VM of this worker loads every model (the pool hands tasks to any free VM): `threads` loads at
-- once take `threads` distinct VMs. A model any VM failed to load is unavailable in this worker.
local function load_all(premature)
  if premature then return end
  local warm = {}
  for _, name in ipairs(names) do
    local s = settings[name]
    warm[name] = s.warm and inputs.KINDS[s.kind].shapes(s) or {}
  end
  local done = 0
  local function load_one(premature2)
    if premature2 then return end
    local ok, res = ngx.run_worker_thread(POOL, "serve_compute", "load", dir, names, warm)
    for _, name in ipairs(names) do
      local r = ok and res[name] or { ok = false, error = tostring(res) }
      if r.ok and settings[name].kind == "text" and not settings[name].vocab_table then
        r = { ok = false, error = settings[name].vocab .. " missing or malformed" }
      end
      if not loaded[name] or loaded[name].ok then loaded[name] = r end
    end
    done = done + 1
    if done == threads then
      ready = true
      for name, e in pairs(loaded) do
        if not e.ok then ngx.log(ngx.WARN, "model ", name, ": ", e.error) end
      end
    end
  end
  for _ = 1, threads do ngx.timer.at(0, load_one) end
end

-- Worker process: load the models in the thread VMs, start one batching dispatcher per model.
function M.init_worker()
  ngx.timer.at(0, load_all)
  for _, name in ipairs(names) do
    local s = settings[name]
    local b = require("serve_batcher").new(name, s, inputs.KINDS[s.kind], POOL)
    batchers[name] = b
    ngx.timer.at(0, function(premature)
      if premature then return end
      while not ready and not ngx.worker.exiting() do ngx.sleep(0.01) end
      b:loop()
    end)
  end
end

local function reply(status, tbl)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  ngx.say(cjson.encode(tbl))
  return ngx.exit(status)
end

local function bad(msg) return reply(400, { error = msg }) end

-- A worker that is still loading its models (just started, or after a reload) holds requests until it is ready
-- (at most 30 s); a request's deadline starts then. true when ready.
local function wait_ready()
  for _ = 1, 3000 do
    if ready then return true end
    ngx.sleep(0.01)
  end
  return ready
end

-- answers once this worker is ready, so "ok" means ready to serve
function M.health()
  if not wait_ready() then return reply(503, { status = "starting", error = "models are still loading" }) end
  local out = { status = "ok", models = {} }
  for _, name in ipairs(names) do
    local e, s = loaded[name], settings[name]
    if e.ok then
      out.models[name] = { ok = true, name = e.info.name, format_version = e.info.format_version,
                           params_file = e.info.params_file, inputs = e.info.inputs, max_batch = s.max_batch,
                           max_tokens = s.kind == "text" and s.max_tokens or nil, max_wait_ms = s.max_wait_ms,
                           timeout_ms = s.timeout_ms, queue_limit = s.queue_limit,
                           queued = batchers[name]:queued() }
    else
      out.models[name] = { ok = false, error = e.error }
      out.status = "degraded"
    end
  end
  return reply(200, out)
end

function M.metrics()
  ngx.header["Content-Type"] = "text/plain; version=0.0.4"
  ngx.print(require("serve_metrics").render(names))
end

-- the request's own deadline: "timeout_ms" in the body (a positive number), at most the model's timeout_ms
local function timeout_of(req, s)
  local t = req.timeout_ms
  if t == nil then return s.timeout_ms / 1000 end
  if type(t) ~= "number" or not (t > 0) then return nil, "'timeout_ms' must be a positive number of milliseconds" end
  return math.min(t, s.timeout_ms) / 1000
end

local ERROR_STATUS = { queue_full = 503, starting = 503, deadline = 503, model = 500 }

function M.predict(name)
  local s = settings[name]
  if not s then return reply(404, { error = "no model named '" .. tostring(name) .. "'" }) end
  local metrics = require("serve_metrics")
  metrics.count("ds_requests_total", name)
  if not wait_ready() then
    metrics.count("ds_errors_total", name, "starting")
    return reply(503, { error = "the worker is still loading its models", reason = "starting" })
  end
  local e = loaded[name]
  if not e.ok then
    metrics.count("ds_errors_total", name, "unavailable")
    return reply(503, { error = "model '" .. name .. "' is unavailable: " .. e.error, reason = "unavailable" })
  end
  local kind = inputs.KINDS[s.kind]
  local req, err = inputs.body_json()
  local row, timeout
  if req then row, err = kind.row(req, s.vocab_table) end
  if row then timeout, err = timeout_of(req, s) end
  if not timeout then
    metrics.count("ds_errors_total", name, "bad_request")
    return bad(err)
  end
  local p, reason, msg = batchers[name]:submit(row, timeout)
  if not p then
    metrics.count("ds_errors_total", name, reason)
    return reply(ERROR_STATUS[reason], { error = msg, reason = reason })
  end
  local best = 1
  for i = 2, #p do if p[i] > p[best] then best = i end end
  return reply(200, { label = kind.labels[best], class = best, probs = p })
end

-- same parsing and reply as /predict for an image, without the model
function M.echo()
  local req, err = inputs.body_json()
  if not req then return bad(err) end
  local row, xerr = inputs.KINDS.image.row(req)
  if not row then return bad(xerr) end
  local p = {}
  for i = 1, 10 do p[i] = 0.1 end
  return reply(200, { label = inputs.KINDS.image.labels[1], class = 1, probs = p })
end

return M
