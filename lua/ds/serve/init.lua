-- serve/init.lua: ds.serve, nginx Lua handlers serving the ds.save'd models of a directory (no model code):
-- POST /predict[/name] (an input adapter turns the request into the model's inputs, serve/tensor.lua),
-- POST /generate/name (streamed tokens of a step model, serve/generate.lua), GET /health, GET /metrics.
-- Models run in the worker thread pool (serve/compute.lua) in the versions serve/models.lua loads and reloads;
-- requests are batched per model (serve/batcher.lua); the event loop only parses, queues and answers. Every reply
-- of a model names its version (X-Model-Version). serve/nginx.lua writes the configuration that calls these.
local cjson = require("cjson.safe").new()
local config = require("ds.serve.config")
local body = require("ds.serve.body")
local models = require("ds.serve.models")
local metrics = require("ds.serve.metrics")
local batcher = require("ds.serve.batcher")
local generate = require("ds.serve.generate")
local tensor = require("ds.serve.tensor")
local image = require("ds.serve.image")
local text = require("ds.serve.text")
cjson.encode_number_precision(14)   -- the most lua-cjson writes: every f32 exactly (f64: use base64)

local M = {}
local dir, threads, default
local settings = {}           -- name -> settings (serve/config.lua), read by the master
local names = {}              -- model names, sorted
local adapters = {}           -- name -> input adapter
local queues = {}             -- this worker: name -> batcher, or generation loop for generate models
local BUILTIN = { ["ds.serve.tensor"] = tensor, ["ds.serve.image"] = image, ["ds.serve.text"] = text }

-- Master process (init_by_lua): settings and adapters only. ds itself is loaded by the worker threads' Lua VMs:
-- the master runs no ds code, so no OpenMP thread exists when nginx forks (TOOLCHAIN.md).
-- nthreads: the thread_pool's threads = lua_worker_thread_vm_pool_size (serve/nginx.lua writes both).
function M.init(models_dir, nthreads)
  dir, threads = models_dir, nthreads
  settings, names, default = config.read(dir)
  if #names == 0 then error("ds.serve: no models in " .. dir .. " (NAME.json graph files, or serve.json)", 0) end
  if #names > threads then
    error(string.format("ds.serve: %d models need %d worker threads (one call in flight per model), the pool has %d",
      #names, #names, threads), 0)
  end
  for _, name in ipairs(names) do
    local mod = settings[name].adapter_module
    -- a plug-in adapter is any Lua file on the package path returning the adapter interface (serve/tensor.lua),
    -- run once here in the master (the workers inherit it)
    local ok, a = pcall(function()
      if BUILTIN[mod] then return BUILTIN[mod] end
      local path, err = package.searchpath(mod, package.path)
      if not path then error(err, 0) end
      return assert(loadfile(path))(mod)
    end)
    if not ok or type(a) ~= "table" or type(a.row) ~= "function" or type(a.batch) ~= "function"
      or type(a.reply) ~= "function" then
      error(string.format("ds.serve: model %s: adapter '%s' %s", name, mod,
        ok and "is not a table with row, batch and reply functions" or ("does not load: " .. tostring(a))), 0)
    end
    if settings[name].warm and not a.shapes then
      error(string.format("ds.serve: model %s: warm needs an adapter with shapes ('%s' has none)", name, mod), 0)
    end
    adapters[name] = a
  end
end

-- Worker process: load the models in the thread VMs and watch their files (serve/models.lua), start one
-- batching dispatcher (or generation loop) per model.
function M.init_worker()
  models.start(dir, threads, settings, names, adapters)
  for _, name in ipairs(names) do
    local s = settings[name]
    local q
    if s.kv_cache then
      q = generate.cached(name, s, function(version, key) return models.session(name, version, key) end)
    elseif s.generate then
      q = generate.new(name, s, function(version, seqs) return models.step(name, version, seqs) end)
    else
      q = batcher.new(name, s, adapters[name], function(version, batch) return models.run(name, version, batch) end)
    end
    queues[name] = q
    models.attach(name, q)
    ngx.timer.at(0, function(premature)
      if premature then return end
      while not models.ready and not ngx.worker.exiting() do ngx.sleep(0.01) end
      q:loop()
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
  local out, versions = { status = "ok", models = {}, default = default }, {}
  for _, name in ipairs(names) do
    local e, s, failed = models.current(name), settings[name], models.failed(name)
    if e.ok then
      out.models[name] = { ok = true, version = e.version, name = e.info.name,
                           format_version = e.info.format_version, params_file = e.info.params_file,
                           inputs = e.info.inputs, adapter = s.adapter, generate = s.generate or nil,
                           max_batch = s.max_batch, max_tokens = s.max_tokens, max_wait_ms = s.max_wait_ms,
                           max_length = s.generate and s.max_length or nil, kv_cache = s.kv_cache or nil,
                           timeout_ms = s.timeout_ms, queue_limit = s.queue_limit, queued = queues[name]:queued(),
                           warm = s.warm, warm_error = e.info.warm_error }
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
  ngx.print(metrics.render(names))
end

-- the request's own deadline: "timeout_ms" in the body (a positive number), at most the model's timeout_ms
local function timeout_of(req, s)
  local t = req.timeout_ms
  if t == nil then return s.timeout_ms / 1000 end
  if type(t) ~= "number" or not (t > 0) then return nil, "'timeout_ms' must be a positive number of milliseconds" end
  return math.min(t, s.timeout_ms) / 1000
end

local ERROR_STATUS = { queue_full = 503, starting = 503, deadline = 503, model = 500 }

-- the checks every model request starts with: settings, version entry (or it has replied with an error)
local function admit(name, route)
  local s = settings[name]
  if not s or (route == "generate") ~= (s.generate == true) then
    local what = not s and "no model named '" .. tostring(name) .. "'"
      or s.generate and "model '" .. name .. "' generates: POST /generate/" .. name
      or "model '" .. name .. "' does not generate: POST /predict/" .. name
    return reply(404, { error = what })
  end
  metrics.count("ds_requests_total", name)
  if not wait_ready() then
    metrics.count("ds_errors_total", name, "starting")
    return reply(503, { error = "the worker is still loading its models", reason = "starting" })
  end
  -- the version current now answers this request, even if another one takes over while it waits
  local e = models.current(name)
  if not e.ok then
    metrics.count("ds_errors_total", name, "unavailable")
    return reply(503, { error = "model '" .. name .. "' is unavailable: " .. e.error, reason = "unavailable" })
  end
  return s, e
end

function M.predict(name)
  name = name or default
  if not name then return reply(404, { error = "no default model: POST /predict/NAME (serve.json's \"default\")" }) end
  local s, e = admit(name, "predict")
  local req, err = body.body_json()
  local row, timeout
  if req then row, err = adapters[name].row(req, e, s) end
  if row then timeout, err = timeout_of(req, s) end
  if not timeout then
    metrics.count("ds_errors_total", name, "bad_request")
    return reply(400, { error = err }, e.version)
  end
  local outputs, reason, msg = queues[name]:submit(row, timeout, e.version)
  if not outputs then
    metrics.count("ds_errors_total", name, reason)
    return reply(ERROR_STATUS[reason], { error = msg, reason = reason }, e.version)
  end
  return reply(200, adapters[name].reply(outputs, req, e, s), e.version)
end

local GEN_FIELDS = { ids = true, text = true, max_tokens = true, timeout_ms = true, stream = true, eos = true }
-- sampling, for KV-cache models (ds.generator's request options): name -> its check, and what it must be
local function integer(v) return v == math.floor(v) and math.abs(v) < 2 ^ 53 end
local SAMPLING = { temperature = function(v) return v >= 0 end, top_k = function(v) return integer(v) and v >= 1 end,
                   top_p = function(v) return v >= 0 and v <= 1 end, min_p = function(v) return v >= 0 and v <= 1 end,
                   seed = integer }
local SAMPLING_RANGE = { temperature = "a number >= 0", top_k = "an integer >= 1", top_p = "a number in 0..1",
                         min_p = "a number in 0..1", seed = "an integer" }

-- a generation request -> {ids, max_new, eos, stream, opts (KV-cache models: ds.generator's start options),
-- capped (max_new was cut to the model's max_length)}, or nil and what is wrong. e.vocab (char -> id) lets a
-- request give "text" instead of "ids".
local function gen_request(req, e, s)
  for k in pairs(req) do
    if not GEN_FIELDS[k] and not (s.kv_cache and SAMPLING[k]) then
      return nil, string.format("unknown field '%s' (ids or text, max_tokens, timeout_ms, stream, eos%s)", tostring(k),
        s.kv_cache and ", temperature, top_k, top_p, min_p, seed" or "; sampling needs a kv_cache model")
    end
    local v = req[k]
    if SAMPLING[k] and not (type(v) == "number" and SAMPLING[k](v)) then
      return nil, string.format("'%s' must be %s", k, SAMPLING_RANGE[k])
    end
  end
  local ids = req.ids
  if req.text ~= nil then
    if ids ~= nil then return nil, "give 'ids' or 'text', not both" end
    if not e.vocab then return nil, "model has no vocab: give 'ids'" end
    if type(req.text) ~= "string" or #req.text == 0 then return nil, "'text' must be a non-empty string" end
    ids = {}
    for ch in req.text:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
      if not e.vocab[ch] then return nil, string.format("'text': %q is not in the vocab", ch) end
      ids[#ids + 1] = e.vocab[ch]
    end
  end
  if type(ids) ~= "table" or #ids == 0 then return nil, "missing field 'ids' (a non-empty list of token ids)" end
  for i, v in ipairs(ids) do
    if type(v) ~= "number" or v < 1 or v ~= math.floor(v) or v >= 2 ^ 53 then
      return nil, string.format("'ids': entry %d (%s) is not a token id (an integer >= 1)", i, tostring(v))
    end
  end
  if #ids >= s.max_length then
    return nil, string.format("'ids' has %d tokens: the model takes at most %d with the generated ones", #ids,
      s.max_length)
  end
  local max_new = req.max_tokens or s.max_length
  if type(max_new) ~= "number" or max_new < 1 or max_new ~= math.floor(max_new) then
    return nil, "'max_tokens' must be a positive integer"
  end
  local eos = req.eos or s.eos
  if eos ~= nil and (type(eos) ~= "number" or eos ~= math.floor(eos)) then return nil, "'eos' must be a token id" end
  if req.stream ~= nil and type(req.stream) ~= "boolean" then return nil, "'stream' must be true or false" end
  local g = { ids = ids, max_new = max_new, eos = eos, stream = req.stream ~= false }
  if s.kv_cache then
    -- the generator's caches hold max_length positions: prompt + new tokens - 1 (the last one is not fed)
    if #ids + max_new - 1 > s.max_length then g.max_new, g.capped = s.max_length - #ids + 1, true end
    g.opts = { max_new_tokens = g.max_new, eos = eos }
    for k in pairs(SAMPLING) do g.opts[k] = req[k] end
  end
  return g
end

-- the vocab (char -> id) inverted once per version: {text = id -> its text, json = id -> that text as a JSON string}
local inverse = setmetatable({}, { __mode = "k" })
local function vocab_of(e)
  if not e.vocab then return nil end
  local inv = inverse[e]
  if not inv then
    inv = { text = {}, json = {} }
    for ch, i in pairs(e.vocab) do inv.text[i], inv.json[i] = ch, cjson.encode(ch) end
    inverse[e] = inv
  end
  return inv
end
local function token_text(e, id)
  local inv = vocab_of(e)
  return inv and inv.text[id]
end

-- token k of a stream as a Server-Sent Event: data: {"index", "token"[, "logit"][, "text"]} (written out, no table
-- and no cjson.encode of one per token: this runs per token and stream)
local function token_event(e, k, tok, logit)
  local inv = vocab_of(e)
  local text = inv and inv.json[tok]
  return 'data: {"index":' .. k .. ',"token":' .. tok .. (logit and ',"logit":' .. cjson.encode(logit) or "")
    .. (text and ',"text":' .. text or "") .. "}\n\n"
end

-- POST /generate/name: {"ids": [...] or "text": "...", "max_tokens", "timeout_ms", "eos", "stream"}. Streamed
-- (default) as Server-Sent Events over a chunked reply: one `data: {"index", "token", "logit"[, "text"]}` per
-- token as it is produced, then `data: {"done": true, "reason", "tokens", "count"}`; with "stream": false one
-- JSON reply at the end. A client that goes away cancels its sequence at the next step.
function M.generate(name)
  local s, e = admit(name, "generate")
  local req, err = body.body_json()
  local g, timeout
  if req then g, err = gen_request(req, e, s) end
  if g then timeout, err = timeout_of(req, s) end
  if not timeout then
    metrics.count("ds_errors_total", name, "bad_request")
    return reply(400, { error = err }, e.version)
  end
  local seq = { ids = g.ids, max_new = g.max_new, eos = g.eos, opts = g.opts, capped = g.capped, version = e.version,
                deadline = ngx.now() + timeout }
  local ok, reason, msg = queues[name]:submit(seq)
  if not ok then
    metrics.count("ds_errors_total", name, reason)
    return reply(ERROR_STATUS[reason], { error = msg, reason = reason }, e.version)
  end
  local queue = queues[name]
  ngx.on_abort(function() queue:cancel(seq, "cancelled") end)
  if g.stream then
    ngx.status = 200
    ngx.header["Content-Type"] = "text/event-stream"
    ngx.header["Cache-Control"] = "no-cache"
    ngx.header["X-Model-Version"] = e.version
    ngx.header["X-Accel-Buffering"] = "no"
    ngx.send_headers()
  end
  local sent = 0
  while true do
    local left = seq.deadline - ngx.now()
    if left <= 0 or not seq.sema:wait(left) then
      if not seq.done then queue:cancel(seq, "deadline") end
    end
    if g.stream then
      local events = {}
      for k = sent + 1, #seq.tokens do
        events[#events + 1] = token_event(e, k, seq.tokens[k], seq.logits[k])
      end
      sent = #seq.tokens
      local stop = seq.done or seq.cancelled
      if stop then
        events[#events + 1] = "data: " .. cjson.encode { done = true, reason = stop, error = seq.error,
          tokens = seq.tokens, count = #seq.tokens } .. "\n\n"
      end
      if #events > 0 then
        ngx.print(table.concat(events))
        local fine = ngx.flush(true)
        if not fine then queue:cancel(seq, "cancelled") end   -- the client went away
      end
      if stop then return ngx.exit(200) end
    elseif seq.done or seq.cancelled then
      if seq.cancelled == "cancelled" then return ngx.exit(499) end
      local text
      if e.vocab then
        local parts = {}
        for k, t in ipairs(seq.tokens) do parts[k] = token_text(e, t) or "" end
        text = table.concat(parts)
      end
      return reply(200, { tokens = seq.tokens, logits = #seq.logits > 0 and seq.logits or nil, text = text,
        reason = seq.done or seq.cancelled, error = seq.error, count = #seq.tokens }, e.version)
    end
  end
end

-- the same strict JSON parse as /predict and a fixed reply, without a model
function M.echo()
  local req, err = body.body_json()
  if not req then return reply(400, { error = err }) end
  local p = {}
  for i = 1, 10 do p[i] = 0.1 end
  return reply(200, { label = "echo", class = 1, probs = p })
end

return M
