-- examples/serve/ds_serve.lua: nginx Lua handlers serving ds models saved by ds.save (no model code):
-- POST /predict[/name], GET /health, GET /metrics. Models run in the worker thread pool (serve_compute.lua) in
-- the versions serve_models.lua loads and reloads; requests are batched per model (serve_batcher.lua); the event
-- loop only parses, queues and answers. Every reply of a model names its version (X-Model-Version).
local cjson = require("cjson.safe")
local config = require("serve_config")
local inputs = require("serve_inputs")
local models = require("serve_models")

local M = {}
local dir, threads
local settings = {}           -- name -> serve_config settings, read by the master
local names = {}              -- model names, sorted
local batchers = {}           -- this worker: name -> serve_batcher

-- Master process (init_by_lua): settings only. ds itself is loaded by the worker threads' Lua VMs: the master
-- runs no ds code, so no OpenMP thread exists when nginx forks (TOOLCHAIN.md).
-- nthreads: the thread_pool's threads = lua_worker_thread_vm_pool_size (serve.sh renders both).
function M.init(models_dir, nthreads)
  dir, threads = models_dir, nthreads
  settings = config.read(dir)
  for name in pairs(settings) do names[#names + 1] = name end
  table.sort(names)
  if #names > threads then
    error(string.format("ds_serve: %d models need %d worker threads (one call in flight per model), the pool has %d",
      #names, #names, threads), 0)
  end
end

-- Worker process: load the models in the thread VMs and watch their files (serve_models.lua), start one
-- batching dispatcher per model.
function M.init_worker()
  models.start(dir, threads, settings, names)
  for _, name in ipairs(names) do
    local s = settings[name]
    local b = require("serve_batcher").new(name, s, inputs.KINDS[s.kind], function(version, batch)
      return models.run(name, version, batch)
    end)
    batchers[name] = b
    models.attach(name, b)
    ngx.timer.at(0, function(premature)
      if premature then return end
      while not models.ready and not ngx.worker.exiting() do ngx.sleep(0.01) end
      b:loop()
    end)
  end
end

-- version: the model version the reply comes from (header X-Model-Version), if any
local function reply(status, tbl, version)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  if version then ngx.header["X-Model-Version"] = version end
  ngx.say(cjson.encode(tbl))
  return ngx.exit(status)
end

local function bad(msg) return reply(400, { error = msg }) end

-- A worker that is still loading its models (just started, or after a reload) holds requests until it is ready
-- (at most 30 s); a request's deadline starts then. true when ready.
local function wait_ready()
  for _ = 1, 3000 do
    if models.ready then return true end
    ngx.sleep(0.01)
  end
  return models.ready
end

-- answers once this worker is ready, so "ok" means ready to serve
function M.health()
  if not wait_ready() then return reply(503, { status = "starting", error = "models are still loading" }) end
  local out, versions = { status = "ok", models = {} }, {}
  for _, name in ipairs(names) do
    local e, s, failed = models.current(name), settings[name], models.failed(name)
    if e.ok then
      out.models[name] = { ok = true, version = e.version, name = e.info.name,
                           format_version = e.info.format_version, params_file = e.info.params_file,
                           inputs = e.info.inputs, max_batch = s.max_batch,
                           max_tokens = s.kind == "text" and s.max_tokens or nil, max_wait_ms = s.max_wait_ms,
                           timeout_ms = s.timeout_ms, queue_limit = s.queue_limit,
                           queued = batchers[name]:queued() }
      versions[#versions + 1] = name .. "=" .. e.version
      -- new files that did not load: the version above keeps serving
      if failed then out.models[name].reload_error, out.status = failed.error, "degraded" end
    else
      out.models[name] = { ok = false, error = e.error }
      out.status = "degraded"
    end
  end
  return reply(200, out, table.concat(versions, ","))
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
  local kind = inputs.KINDS[s.kind]
  local req, err = inputs.body_json()
  -- the version current now answers this request, even if another one takes over while it waits
  local e = models.current(name)
  if not e.ok then
    metrics.count("ds_errors_total", name, "unavailable")
    return reply(503, { error = "model '" .. name .. "' is unavailable: " .. e.error, reason = "unavailable" })
  end
  local row, timeout
  if req then row, err = kind.row(req, e.vocab_table) end
  if row then timeout, err = timeout_of(req, s) end
  if not timeout then
    metrics.count("ds_errors_total", name, "bad_request")
    return reply(400, { error = err }, e.version)
  end
  local p, reason, msg = batchers[name]:submit(row, timeout, e.version)
  if not p then
    metrics.count("ds_errors_total", name, reason)
    return reply(ERROR_STATUS[reason], { error = msg, reason = reason }, e.version)
  end
  local best = 1
  for i = 2, #p do if p[i] > p[best] then best = i end end
  return reply(200, { label = kind.labels[best], class = best, probs = p }, e.version)
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
