-- tests/serve_spec.lua: ds.serve (nginx + its Lua module, bin/ds-serve) serving the ds.save'd models of
-- examples/serve with its serve.json (the image and text adapters): predict, health, bad requests, chunked bodies,
-- batched answers bitwise equal to single ones, LeNet answered while a BERT batch computes, deadlines (503),
-- /metrics, model versions (X-Model-Version) and their reload without HUP, a broken new version refused, a missing
-- model (503), hot reload with HUP under load, stop by pid; a checkout and models inside a mode-700 directory
-- served as root and as an unprivileged user, and a refusal naming the path the workers cannot read.
-- Skipped without nginx's Lua module.
local ds = require("ds")
local cjson = require("cjson")

local MODULE = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
local have = io.open(MODULE) and os.execute("command -v nginx >/dev/null && command -v curl >/dev/null") == 0
local describe_or_skip = have and describe or pending

local http = require("serve_http")
local root, clean, sh, pick_port = http.root, http.clean, http.sh, http.pick_port
local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
local port = pick_port(0)
local prefix = dir .. "/nginx"

-- a request to the server on port `at` (curl_args: more curl options): the status, the decoded JSON reply and its
-- X-Model-Version header
local function request_at(at, method, path, body, curl_args) return http.request(dir, at, method, path, body, curl_args) end
local function request(method, path, body, curl_args) return request_at(port, method, path, body, curl_args) end
-- nil when the server on port `at` answers /health "ok", else why not: the status and each model's error
local function health_problem(at)
  local code, h = request_at(at, "GET", "/health")
  if code == 200 and h.status == "ok" then return nil end
  local why = { string.format("/health answered %s, status %s", tostring(code), tostring(h.status)) }
  for name, m in pairs(h.models or {}) do
    if not m.ok then why[#why + 1] = string.format("model %s: %s", name, tostring(m.error)) end
  end
  if h.error then why[#why + 1] = tostring(h.error) end
  return table.concat(why, "\n")
end
local function image(v)
  local t = {}
  for r = 1, 28 do t[r] = {}; for c = 1, 28 do t[r][c] = v or (r * c) % 256 end end
  return cjson.encode { image = t }
end
-- the params file a saved model's graph file names (ds.save names it by content)
local function params_of(models, name)
  return models .. "/" .. cjson.decode(io.open(models .. "/" .. name .. ".json"):read("*a")).params.file
end
-- nginx runs outside the sanitizer run (make test-asan preloads ASan into every child process)
local function serve(cmd) return http.serve(prefix, port, dir .. "/models", cmd) end
local function wait_up(at) return http.wait_up(at or port) end
local start_server = http.start_with

describe_or_skip("serving with nginx", function()
  setup(function()
    assert(os.execute(clean(string.format("cd %s && luajit examples/serve/export_models.lua %s/models --train-batches 5 >/dev/null", root, dir))) == 0)
    -- the models as exported, for the servers started from private copies (the tests below change dir/models)
    assert(os.execute(string.format("cp -r %s/models %s/exported", dir, dir)) == 0)
    -- a long batching wait for bert, so concurrent test requests surely share a model call (docs/SERVING.md)
    local cfg = cjson.decode(io.open(dir .. "/models/serve.json"):read("*a"))
    cfg.models.bert.max_wait_ms, cfg.models.bert.max_batch = 50, 16
    local f = io.open(dir .. "/models/serve.json", "wb")
    f:write(cjson.encode(cfg)); f:close()
    local up, why = start_server(function(at) port = at; return serve("start") end, prefix .. "/logs/error.log", 0)
    assert(up, "nginx did not come up: " .. tostring(why))
    -- a server that is up but cannot serve its models stops the tests here, with the server's reasons
    local problem = health_problem(port)
    assert(not problem, "nginx is up but not serving its models:\n" .. tostring(problem))
  end)
  teardown(function()
    serve("stop")
    os.execute("sleep 0.3; rm -rf " .. dir)
  end)

  it("answers /health with each model's name, format version and input specs", function()
    local code, h = request("GET", "/health")
    assert.equal(200, code)
    assert.equal("ok", h.status, health_problem(port))
    assert.equal(1, h.models.lenet.format_version)
    assert.same({ "batch", 1, 28, 28 }, h.models.lenet.inputs[1].shape)
    assert.same({ "tokens" }, h.models.bert.inputs[1].shape)
  end)

  it("predicts an image like ds.load does in this process", function()
    local code, r = request("POST", "/predict", image())
    assert.equal(200, code)
    local m = ds.load(dir .. "/models/lenet")
    local x = ds.tensor(cjson.decode(image()).image):reshape(1, 1, 28, 28) / 255
    local p = m(x):reshape(-1):totable()
    assert.equal(10, #r.probs)
    for i = 1, 10 do assert.is_true(math.abs(p[i] - r.probs[i]) < 1e-12) end
    local best = 1
    for i = 2, 10 do if p[i] > p[best] then best = i end end
    assert.equal(best, r.class)
  end)

  it("classifies text with the BERT-style model like ds.load does in this process", function()
    local text = "今天的天气真好"
    local code, r = request("POST", "/predict/bert", cjson.encode { text = text })
    assert.equal(200, code)
    assert.equal(6, #r.probs)
    assert.is_string(r.label)
    -- the exported model on packed texts: ids [CLS] chars [SEP], positions 1..n, one text {1, n}
    local vocab = cjson.decode(io.open(dir .. "/models/bert.vocab.json"):read("*a"))
    local ids, pos = { vocab["[CLS]"] }, {}
    for ch in text:gmatch("[%z\1-\127\194-\244][\128-\191]*") do ids[#ids + 1] = vocab[ch] or vocab["[UNK]"] end
    ids[#ids + 1] = vocab["[SEP]"]
    for t = 1, #ids do pos[t] = t end
    local function I(t) return ds.tensor(t, { dtype = "i64" }) end
    local p = ds.load(dir .. "/models/bert")(I(ids), I(pos), I { { 1, #ids } }):reshape(-1):totable()
    for i = 1, 6 do assert.is_true(math.abs(p[i] - r.probs[i]) < 1e-12) end
  end)

  it("answers bad requests with 400 and a JSON error naming the problem, and keeps serving", function()
    local cases = {
      { "not json at all", "not JSON" }, { "[1,2,3", "not JSON" }, { "{}", "missing field 'image'" },
      { '{"image": 5}', "must be an array" }, { '{"image": [1,2,3]}', "28x28 or 784" },
      { image(300), "0..255" }, { image():gsub("%d+", '"a"', 1), "0..255" }, { "", "empty body" },
      { '{"image": [[1]]}', "28x28 or 784" }, { string.rep("[", 5000), "not JSON" },
    }
    for _, c in ipairs(cases) do
      local code, r = request("POST", "/predict", c[1])
      assert.equal(400, code)
      assert.truthy(r.error:find(c[2], 1, true), r.error .. " lacks " .. c[2])
    end
    local code, r = request("POST", "/predict/bert", '{"text": 7}')
    assert.equal(400, code); assert.truthy(r.error:find("'text' must be a string", 1, true))
    code = request("GET", "/predict")
    assert.equal(400, code)
    code = request("POST", "/predict/nosuch", "{}")
    assert.equal(404, code)
    assert.equal(200, (request("POST", "/predict", image())))
  end)

  it("answers nginx's own rejections and non-JSON numbers with JSON errors", function()
    local function json_error(code, want_code, r)
      assert.equal(want_code, code)
      assert.is_string(r.error)
    end
    -- body over the 1 MiB limit of docs/SERVING.md: 413
    local code, r = request("POST", "/predict", string.rep(" ", 1024 * 1024 + 1))
    json_error(code, 413, r)
    assert.truthy(r.error:find("1 MiB", 1, true))
    -- just under the limit reaches the handler (and fails as JSON, not as size)
    code, r = request("POST", "/predict", string.rep(" ", 1024 * 1024 - 10) .. "[")
    json_error(code, 400, r)
    json_error(select(1, request("GET", "/nothing/here")), 404, select(2, request("GET", "/nothing/here")))
    code, r = request("GET", "/" .. string.rep("a", 20000))
    assert.truthy(code == 414 or code == 400, tostring(code)); assert.is_string(r.error)
    -- raw HTTP nginx rejects before any handler: bad Content-Length, oversized headers
    local function raw(text)
      local path = dir .. "/raw"
      local f = io.open(path, "wb"); f:write(text); f:close()
      local out = sh(string.format("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d; cat %s >&3; timeout 5 cat <&3'", port, path))
      -- the body, with or without chunked framing ("18\r\n{...}\r\n0\r\n")
      return tonumber(out:match("^HTTP/1%.%d (%d+)")), cjson.decode(out:match("\r\n\r\n[%x\r\n]-(%b{})") or "")
    end
    code, r = raw("POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\nConnection: close\r\n\r\n")
    json_error(code, 400, r)
    code, r = raw("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " .. string.rep("b", 20000) .. "\r\nConnection: close\r\n\r\n")
    json_error(code, 400, r)
    code, r = raw("BREW /predict HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert.truthy(code >= 400 and code < 500, tostring(code)); assert.is_string(r.error)
    -- numbers outside JSON's grammar
    for _, bad in ipairs { "0x10", "+1", "1.", "01", "1e400", "inf", "nan", ".5" } do
      local img = image():gsub("%[%[%d+", "[[" .. bad, 1)
      code, r = request("POST", "/predict", img)
      assert.equal(400, code, bad)
      assert.truthy(r.error:find("not JSON", 1, true), r.error)
    end
    assert.equal(200, (request("POST", "/predict", (image():gsub("%[%[%d+", "[[1.5e1", 1)))))
  end)

  it("accepts a chunked body up to the 1 MiB limit like the same body with Content-Length", function()
    local body = image()
    body = body .. string.rep(" ", 1024 * 1024 - #body)
    local code, r = request("POST", "/predict", body)
    assert.equal(200, code, r.error)
    local code2, r2 = request("POST", "/predict", body, "-H 'Transfer-Encoding: chunked'")
    assert.equal(200, code2, r2.error)
    assert.same(r.probs, r2.probs)
    local code3, r3 = request("POST", "/predict", body .. " ", "-H 'Transfer-Encoding: chunked'")
    assert.equal(413, code3)
    assert.truthy(r3.error:find("1 MiB", 1, true))
  end)

  -- POST each body at once (one curl per body, all in flight together): the replies, decoded, in order
  local function concurrently(path, bodies)
    for i, b in ipairs(bodies) do local f = io.open(dir .. "/req" .. i, "wb"); f:write(b); f:close() end
    sh(string.format("seq 1 %d | xargs -P %d -I{} curl -s --max-time 30 -o %s/resp{} -X POST --data-binary @%s/req{} http://127.0.0.1:%d%s",
      #bodies, #bodies, dir, dir, port, path))
    local out = {}
    for i = 1 , #bodies do
      local r = io.open(dir .. "/resp" .. i):read("*a")
      out[i] = assert(cjson.decode(r), r)
    end
    return out
  end
  -- a series' value in /metrics text; missing, the error says so with /health's reasons
  local function metric(text, series)
    local v = http.metric(text, series)
    if not v then error("/metrics has no series " .. series .. "; " .. (health_problem(port) or "/health is ok"), 2) end
    return v
  end
  local function metrics() return sh(string.format("curl -s --max-time 10 http://127.0.0.1:%d/metrics", port)) end
  local TEXTS = { "好", "今天的天气真好", "这家餐厅的服务太差了，我再也不来了", "听到这个消息我简直不敢相信",
    string.rep("深夜里传来奇怪的声音让我很害怕", 3), "会议改到明天下午三点举行", string.rep("终于考完试了", 12),
    "hello world", "小狗走丢了", "黑暗的走廊里好像有人在跟着我", string.rep("这本书一共有三百页", 5), "你" }

  it("answers each request of a batch bit for bit as when it is served alone (texts packed, images)", function()
    local bodies, alone = {}, {}
    for i, t in ipairs(TEXTS) do
      bodies[i] = cjson.encode { text = t }
      local code, r = request("POST", "/predict/bert", bodies[i])
      assert.equal(200, code)
      alone[i] = r.probs
    end
    local calls0 = metric(metrics(), 'ds_batch_size_count{model="bert"}')
    local batched = concurrently("/predict/bert", bodies)
    for i = 1, #TEXTS do assert.same(alone[i], batched[i].probs, "text " .. i) end
    -- the concurrent requests shared model calls (fewer calls than requests)
    local calls = metric(metrics(), 'ds_batch_size_count{model="bert"}') - calls0
    assert.is_true(calls < #TEXTS, "model calls: " .. calls)
    -- images: each alone, then all at once
    local imgs, single = {}, {}
    for i = 1, 8 do
      imgs[i] = image(i * 31)
      imgs[i] = imgs[i]:gsub("%[%[%d+", "[[" .. (i * 17) % 256, 1)
      local code, r = request("POST", "/predict", imgs[i])
      assert.equal(200, code)
      single[i] = r.probs
    end
    local many = concurrently("/predict", imgs)
    for i = 1, 8 do assert.same(single[i], many[i].probs, "image " .. i) end
  end)

  it("answers LeNet while a long BERT batch computes, and 503 with a reason past a request's deadline", function()
    local long = cjson.encode { text = string.rep("深夜里传来奇怪的声音让我很害怕", 10) }
    for i = 1, 48 do local f = io.open(dir .. "/req" .. i, "wb"); f:write(long); f:close() end
    local started = metric(metrics(), 'ds_batch_size_count{model="bert"}')
    os.remove(dir .. "/bert_done")
    local load = io.popen(clean(string.format("seq 1 48 | xargs -P 48 -I{} curl -s --max-time 60 -o /dev/null -w '%%{http_code}\n' -X POST --data-binary @%s/req{} http://127.0.0.1:%d/predict/bert; touch %s/bert_done",
      dir, port, dir)))
    -- one shell waits until a bert batch has started (the histogram counts a call when it starts), asks LeNet
    -- and says whether the BERT requests were still running: the test process's own speed (slow under
    -- make test-asan) stays out of the timing
    local img = io.open(dir .. "/img", "wb"); img:write(image()); img:close()
    local probe = sh(string.format([[
      for i in $(seq 1 300); do
        n=$(curl -s --max-time 5 http://127.0.0.1:%d/metrics | sed -n 's/^ds_batch_size_count{model="bert"} //p')
        [ "${n:-0}" -gt %d ] && break; sleep 0.01
      done
      echo "started ${n:-0}"
      curl -s --max-time 20 -o %s/resp -w 'code %%{http_code}\n' -X POST --data-binary @%s/img http://127.0.0.1:%d/predict
      [ -e %s/bert_done ] && echo "bert done" || echo "bert running"]], port, started, dir, dir, port, dir))
    assert.is_true(tonumber(probe:match("started (%d+)")) > started, probe)
    assert.equal("200", probe:match("code (%d+)"))
    assert.equal(10, #cjson.decode(io.open(dir .. "/resp"):read("*a")).probs)
    assert.truthy(probe:find("bert running", 1, true), "the BERT requests finished before the LeNet answer")
    -- a request whose deadline (1 ms) is shorter than bert's batching wait (50 ms): 503 and the reason
    local c503, d = request("POST", "/predict/bert", cjson.encode { text = "你好", timeout_ms = 1 })
    assert.equal(503, c503)
    assert.equal("deadline", d.reason)
    assert.truthy(d.error:find("deadline exceeded", 1, true))
    local codes = load:read("*a"); load:close()
    local n = 0
    for c in codes:gmatch("%d+") do assert.equal("200", c); n = n + 1 end
    assert.equal(48, n)
    local bad_code, bad = request("POST", "/predict/bert", cjson.encode { text = "x", timeout_ms = -5 })
    assert.equal(400, bad_code); assert.truthy(bad.error:find("timeout_ms", 1, true))
  end)

  it("exports Prometheus metrics per model: requests, errors by reason, batch size, queue wait and compute time", function()
    local m = metrics()
    assert.truthy(m:find("# TYPE ds_requests_total counter", 1, true))
    assert.is_true(metric(m, 'ds_requests_total{model="bert"}') >= 48)
    assert.is_true(metric(m, 'ds_errors_total{model="bert",reason="deadline"}') >= 1)
    assert.is_true(metric(m, 'ds_errors_total{model="bert",reason="bad_request"}') >= 1)
    for _, h in ipairs { "ds_batch_size", "ds_queue_wait_seconds", "ds_compute_seconds" } do
      assert.truthy(m:find("# TYPE " .. h .. " histogram", 1, true))
      for _, model in ipairs { "lenet", "bert" } do
        local prev = 0
        for le in m:gmatch(h .. '_bucket{model="' .. model .. '",le="([^"]+)"}') do
          local v = metric(m, string.format('%s_bucket{model="%s",le="%s"}', h, model, le))
          assert.is_true(v >= prev); prev = v
        end
        assert.equal(prev, metric(m, string.format('%s_count{model="%s"}', h, model)))
        assert.is_true(prev > 0)
      end
    end
  end)

  -- the model version every worker serves, once all /health answers agree (or after 10 s): version, /health
  local function settled_version(name)
    local seen, h
    for _ = 1, 100 do
      seen = {}
      for _ = 1, 6 do
        local _, hh = request("GET", "/health")
        h = hh
        seen[hh.models[name].version or "?"] = true
      end
      if next(seen, next(seen)) == nil then return next(seen), h end
      os.execute("sleep 0.1")
    end
    error("the workers do not agree on the version of " .. name)
  end

  it("names the model version in every reply and reloads new files without HUP, losing no request", function()
    local v1 = settled_version("lenet")
    assert.truthy(v1:match("^%x+$"), v1)
    local code, before, hv = request("POST", "/predict", image())
    assert.equal(200, code)
    assert.equal(v1, hv)
    local _, _, health_versions = request("GET", "/health")
    assert.truthy(health_versions:find("lenet=" .. v1, 1, true), health_versions)
    -- another version of lenet, copied over the served files (cp: not atomic) while requests flow
    assert(os.execute(clean(string.format("cd %s && luajit examples/serve/export_models.lua %s/v2 --train-batches 10 >/dev/null", root, dir))) == 0)
    local img = io.open(dir .. "/img", "wb"); img:write(image()); img:close()
    local load = io.popen(clean(string.format("for i in $(seq 1 300); do curl -s --max-time 20 -w '%%{http_code} %%header{x-model-version}\n' -X POST --data-binary @%s/img http://127.0.0.1:%d/predict; done", dir, port)))
    os.execute("sleep 0.3")
    os.execute(string.format("cp %s %s/models/ && cp %s/v2/lenet.json %s/models/lenet.json", params_of(dir .. "/v2", "lenet"), dir, dir, dir))
    local out = load:read("*a"); load:close()
    local probs_of, n, order = {}, 0, {}
    for body, c, v in out:gmatch("([^\n]*)\n(%d+) (%x*)\n") do
      n = n + 1
      assert.equal("200", c, body)
      order[#order + 1] = v
      -- a version always gives the same answer: each reply came from the version it names
      local p = cjson.decode(body).probs
      if probs_of[v] then assert.same(probs_of[v], p, "version " .. v) else probs_of[v] = p end
    end
    assert.equal(300, n)
    local v2 = settled_version("lenet")
    assert.are_not.equal(v1, v2)
    assert.same(before.probs, probs_of[v1])
    local _, after, hv2 = request("POST", "/predict", image())
    assert.equal(v2, hv2)
    assert.are_not.same(before.probs, after.probs)
    -- old ones, then new ones: both workers switch together (within a few ms), so at most a request or two of the
    -- old version follows the first of the new one
    local switched, late = false, 0
    for _, v in ipairs(order) do
      assert.is_true(v == v1 or v == v2, v)
      if v == v2 then switched = true elseif switched then late = late + 1 end
    end
    assert.is_true(switched, "no request was answered by the new version")
    assert.is_true(late <= 2, late .. " requests answered by the old version after the new one")
    local m = metrics()
    assert.is_true(metric(m, 'ds_reloads_total{model="lenet",reason="ok"}') >= 2)
  end)

  it("keeps serving the loaded version when new files do not load, and reports why in /health", function()
    local v = settled_version("lenet")
    local good = io.open(dir .. "/models/lenet.json"):read("*a")
    local f = io.open(dir .. "/models/lenet.json", "wb"); f:write(good:sub(1, 100)); f:close()
    local h
    for _ = 1, 60 do
      local _, hh = request("GET", "/health")
      h = hh
      if h.models.lenet.reload_error then break end
      os.execute("sleep 0.1")
    end
    assert.equal("degraded", h.status)
    assert.is_true(h.models.lenet.ok)
    assert.equal(v, h.models.lenet.version)
    assert.truthy(h.models.lenet.reload_error:find("JSON", 1, true), h.models.lenet.reload_error)
    local code, r, hv = request("POST", "/predict", image())
    assert.equal(200, code); assert.equal(10, #r.probs); assert.equal(v, hv)
    f = io.open(dir .. "/models/lenet.json", "wb"); f:write(good); f:close()
    for _ = 1, 60 do
      local _, hh = request("GET", "/health")
      h = hh
      if h.status == "ok" then break end
      os.execute("sleep 0.1")
    end
    assert.equal("ok", h.status, health_problem(port))
    assert.equal(v, h.models.lenet.version)
  end)

  it("reports a corrupted model in /health, answers 503 for it, and reloads on HUP without dropping requests", function()
    local _, before = request("POST", "/predict", image())
    -- corrupt bert, retrain lenet differently, then HUP while requests are in flight
    local f = io.open(params_of(dir .. "/models", "bert"), "r+b"); f:seek("set", 1000); f:write("garbage"); f:close()
    assert(os.execute(clean(string.format("cd %s && luajit examples/serve/export_models.lua %s/new --train-batches 15 >/dev/null", root, dir))) == 0)
    os.execute(string.format("mv %s %s/models/ && mv %s/new/lenet.json %s/models/lenet.json", params_of(dir .. "/new", "lenet"), dir, dir, dir))
    local img = io.open(dir .. "/img", "wb"); img:write(image()); img:close()
    local load = io.popen(clean(string.format("for i in $(seq 1 300); do curl -s --max-time 20 -o /dev/null -w '%%{http_code}\\n' -X POST --data-binary @%s/img http://127.0.0.1:%d/predict; done", dir, port)))
    os.execute("sleep 0.2")
    os.execute("kill -HUP $(cat " .. prefix .. "/logs/nginx.pid)")
    local codes = load:read("*a"); load:close()
    local n = 0
    for code in codes:gmatch("%d+") do assert.equal("200", code); n = n + 1 end
    assert.equal(300, n)
    assert(wait_up())
    os.execute("sleep 0.5")
    local code, h = request("GET", "/health")
    assert.equal(200, code)
    assert.equal("degraded", h.status)
    assert.is_false(h.models.bert.ok)
    assert.truthy(h.models.bert.error:find("checksum", 1, true) or h.models.bert.error:find("corrupt", 1, true))
    local c503, r = request("POST", "/predict/bert", cjson.encode { text = "hi" })
    assert.equal(503, c503)
    assert.truthy(r.error:find("unavailable", 1, true))
    local _, after = request("POST", "/predict", image())
    assert.are_not.same(before.probs, after.probs)
  end)

  it("keeps serving when the loaded files are truncated or overwritten in place, and reloads models copied in place", function()
    local _, before = request("POST", "/predict", image())
    local img = io.open(dir .. "/img", "wb"); img:write(image()); img:close()
    local load = io.popen(clean(string.format("for i in $(seq 1 200); do curl -s --max-time 20 -o /dev/null -w '%%{http_code}\\n' -X POST --data-binary @%s/img http://127.0.0.1:%d/predict; done", dir, port)))
    -- the workers' model came from these files: truncate them, then overwrite them with other bytes
    local params = params_of(dir .. "/models", "lenet")
    os.execute("sleep 0.2; : > " .. params .. "; : > " .. dir .. "/models/lenet.json; sleep 0.2")
    os.execute(string.format("head -c 100000 /dev/urandom > %s; sleep 0.2", params))
    local codes = load:read("*a"); load:close()
    local n = 0
    for code in codes:gmatch("%d+") do assert.equal("200", code); n = n + 1 end
    assert.equal(200, n)
    local _, same = request("POST", "/predict", image())
    assert.same(before.probs, same.probs)
    -- a new model copied in place (cp over the old names, not a rename) and a HUP
    assert(os.execute(clean(string.format("cd %s && luajit examples/serve/export_models.lua %s/copied --train-batches 25 >/dev/null", root, dir))) == 0)
    os.execute(string.format("cp %s %s/models/ && cp %s/copied/lenet.json %s/models/lenet.json", params_of(dir .. "/copied", "lenet"), dir, dir, dir))
    os.execute("kill -HUP $(cat " .. prefix .. "/logs/nginx.pid)")
    -- /health names the params file each worker serves: wait until the new workers answer
    local want = cjson.decode(io.open(dir .. "/copied/lenet.json"):read("*a")).params.file
    local code, h
    for _ = 1, 100 do
      code, h = request("GET", "/health")
      if h.models and h.models.lenet and h.models.lenet.params_file == want then break end
      os.execute("sleep 0.1")
    end
    assert.equal(200, code)
    assert.is_true(h.models.lenet.ok)
    assert.equal(want, h.models.lenet.params_file)
    local _, after = request("POST", "/predict", image())
    assert.are_not.same(before.probs, after.probs, sh("tail -n 20 " .. prefix .. "/logs/error.log"))
  end)

  -- issue 33: a clone inside a mode-700 directory (mktemp -d; root's home), served as root and as a user.
  -- Started by root, nginx runs its workers as the model directory's owner; otherwise as the user who started it.
  describe("from a checkout inside a mode-700 directory", function()
    local me = sh("id -un"):match("%S+")
    local is_root = sh("id -u"):match("%d+") == "0"
    -- the unprivileged user root runs servers as: "uid:gid" of nobody, or nil and why not
    local unprivileged = sh("getent passwd nobody"):match("^nobody:[^:]*:(%d+:%d+):")
    local no_unprivileged = not is_root and "the tests run as " .. me .. ", not root: the test above served as "
      .. "this unprivileged user; switching to another user needs root"
      or not unprivileged and "no user 'nobody' on this machine to run the server as"
    -- what a server needs of the checkout (bin/ds-serve, the Lua code, ds.h, libds) and the exported models, copied
    -- into a new mktemp -d directory (mode 700) as BASE/ds and BASE/models, owned by `owner` (user:group) if given
    local function private_copy(owner)
      local base = sh("mktemp -d"):match("%S+")
      assert(os.execute(string.format("mkdir -p %s/ds/build %s/ds/src %s/ds/bin && cp -r %s/lua %s/ds/ && "
        .. "cp %s/bin/ds-serve %s/ds/bin/ && cp %s/src/ds.h %s/ds/src/ && cp %s/build/libds.so %s/ds/build/ && "
        .. "cp -r %s/exported %s/models", base, base, base, root, base, root, base, root, base, root, base, dir, base)) == 0)
      if owner then assert(os.execute(string.format("chown -R %s %s", owner, base)) == 0) end
      assert.equal("drwx------", sh("stat -c %A " .. base):match("%S+"))
      return base
    end
    -- ds-serve CMD for the copy in base, run by `as` (a command prefix that switches user, or "")
    local function serve_copy(base, as, at, cmd)
      return sh(string.format("%s%s/ds/bin/ds-serve %s/nginx %d %s/models %s; echo \"ds-serve exit $?\"",
        as, base, base, at, base, cmd))
    end
    -- start the copy's server as `as`, check /health is ok and both models answer; stop it and remove the copy
    local function serves(base, as)
      local at
      finally(function()
        if at then serve_copy(base, as, at, "stop"); os.execute("sleep 0.3") end
        os.execute("rm -rf " .. base)
      end)
      local why
      at, why = start_server(function(p) return serve_copy(base, as, p, "start") end, base .. "/nginx/logs/error.log", 10)
      assert(at, "nginx did not come up: " .. tostring(why))
      local problem = health_problem(at)
      assert(not problem, problem)
      local code, r = request_at(at, "POST", "/predict", image())
      assert.equal(200, code)
      assert.equal(10, #r.probs)
      code, r = request_at(at, "POST", "/predict/bert", cjson.encode { text = "今天的天气真好" })
      assert.equal(200, code)
      assert.equal(6, #r.probs)
    end

    it("serves it when the user running the tests starts nginx", function()
      serves(private_copy(), "")
    end)

    it("serves it when an unprivileged user starts nginx", function()
      if no_unprivileged then pending(no_unprivileged) return end
      local uid, gid = unprivileged:match("(%d+):(%d+)")
      serves(private_copy(unprivileged), string.format("setpriv --reuid=%s --regid=%s --init-groups ", uid, gid))
    end)

    it("refuses to start, naming the path the workers cannot read and the fix", function()
      local base = private_copy()
      finally(function() os.execute("rm -rf " .. base) end)
      local blocked, fix
      if is_root then
        if not unprivileged then pending(no_unprivileged) return end
        -- root starts nginx, the models belong to an unprivileged user: the workers run as that user, who cannot
        -- enter the mode-700 directory holding the checkout
        assert(os.execute(string.format("chown -R %s %s/models", unprivileged, base)) == 0)
        blocked, fix = base .. "/ds/", "chmod o+x '" .. base .. "'"
      else
        -- a model file its owner cannot read
        assert(os.execute("chmod 000 " .. base .. "/models/lenet.json") == 0)
        blocked, fix = base .. "/models/lenet.json", "chmod u+r '" .. base .. "/models/lenet.json'"
      end
      local said = serve_copy(base, "", pick_port(20), "start")
      assert.truthy(said:find("ds-serve exit 1", 1, true), said)
      assert.truthy(said:find("who cannot read " .. blocked, 1, true), said)
      assert.truthy(said:find("Fix: " .. fix, 1, true), said)
      assert.is_nil(io.open(base .. "/nginx/logs/nginx.pid"), "nginx started: " .. said)
    end)
  end)
end)
