-- tests/serve_generic_spec.lua: ds.serve serving models of a user's own architecture with configuration only (no
-- Lua of theirs on the server): a 2-layer MLP with three named inputs (f32, f32, i64) and two outputs through the
-- generic JSON contract (nested arrays and base64, batched requests bitwise equal to single ones, clear 400s), and
-- a small step model through POST /generate: tokens streamed as Server-Sent Events equal to the greedy loop in
-- this process, continuous batching (requests joining a running generation get the same bits as alone), per-
-- request limits (max_tokens, eos, max_length, deadline) and cancellation when the client goes away.
-- Skipped without nginx's Lua module.
package.path = "./examples/?.lua;" .. package.path
local ds = require("ds")
local cjson = require("cjson")
local gpt = require("char_gpt_model")
local ffi = require("ffi")
local http = require("serve_http")
local nn, F = ds.nn, ds.F

local MODULE = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
local have = io.open(MODULE) and os.execute("command -v nginx >/dev/null && command -v curl >/dev/null") == 0
local describe_or_skip = have and describe or pending

local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir .. "/models")
local models, prefix = dir .. "/models", dir .. "/nginx"
local port

-- little-endian bytes <-> base64 (RFC 4648), for the requests and to compare replies bit for bit
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function b64(s)
  return ((s:gsub(".", function(c)
    local bits, b = "", c:byte()
    for i = 8, 1, -1 do bits = bits .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and "1" or "0") end
    return bits
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return B64:sub(c + 1, c + 1)
  end) .. ({ "", "==", "=" })[#s % 3 + 1])
end
local function unb64(s)
  s = s:gsub("[^%w%+/=]", "")
  return (s:gsub(".", function(x)
    if x == "=" then return "" end
    local r, f = "", (B64:find(x, 1, true) - 1)
    for i = 6, 1, -1 do r = r .. (f % 2 ^ i - f % 2 ^ (i - 1) > 0 and "1" or "0") end
    return r
  end):gsub("%d%d%d?%d?%d?%d?%d?%d?", function(x)
    if #x ~= 8 then return "" end
    local c = 0
    for i = 1, 8 do c = c + (x:sub(i, i) == "1" and 2 ^ (8 - i) or 0) end
    return string.char(c)
  end))
end
local function bytes_of(t)
  t = t:contiguous()
  return ffi.string(t:data_ptr(), t:numel() * t:element_size())
end

-- the user's model: features (batch, 4) f32, extra (batch, 3) f32, bucket (batch) i64 -> probs (batch, 2) and a
-- score (batch)
local function build_mlp()
  ds.manual_seed(31)
  local a, b, emb, head = nn.Linear(4, 16), nn.Linear(3, 16), nn.Embedding(5, 16), nn.Linear(16, 2)
  local function mlp(features, extra, bucket)
    local h = F.relu(a(features) + b(extra) + emb(bucket))
    return F.softmax(head(h), -1), h:sum(2)
  end
  return ds.compile(mlp, { ds.spec({ "batch", 4 }, "f32", "features"), ds.spec({ "batch", 3 }, "f32", "extra"),
    ds.spec({ "batch" }, "i64", "bucket") }, { convert = false })
end

-- a step model on packed sequences (docs/SERVING.md "Streamed generation"): ids, pos (tokens) i64 and seg (seqs, 2)
-- i64 -> logits (seqs, 12) of each sequence's last token
local V, H, POSITIONS = 12, 32, 256
local function build_gen(seed)
  ds.manual_seed(seed or 7)
  local emb, pemb = nn.Embedding(V, H), nn.Embedding(POSITIONS, H)
  local q, k, v, o = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, V)
  local function step(ids, pos, seg)
    local x = emb(ids) + pemb(pos)
    local function heads(t) return t:reshape(t:size(1), 4, H / 4) end
    local ctx = F.segment_attention(heads(q(x)), heads(k(x)), heads(v(x)), seg, seg)
    local y = x + ctx:reshape(ctx:size(1), H)
    return o(y:index_select(1, seg:select(2, 1) + seg:select(2, 2) - 1))
  end
  return ds.compile(step, { ds.spec({ "tokens" }, "i64", "ids"), ds.spec({ "tokens" }, "i64", "pos"),
    ds.spec({ "seqs", 2 }, "i64", "seg") }, { convert = false })
end

-- a character GPT with KV caches (examples/char_gpt_model.lua) whose compiled step is served by ds.generator:
-- step(ids (n, t) i64, pos (n) i64, slots (4) i64) -> logits (n, t, 12), ids row b in cache row slots[b] (the reload
-- test serves the older form step(ids (4, 1) i64, pos (4) i64) -> logits (4, 1, 12)), the caches graph state
local KV = { vocab = 12, embed = 32, heads = 2, layers = 2, block = 256 }
local function build_kv(slots, seed)
  ds.manual_seed(seed or 11)
  local cfg = { cache_batch = slots }
  for k, v in pairs(KV) do cfg[k] = v end
  local m = gpt.GPT(cfg)
  m:eval()
  return m
end

-- the greedy loop in this process on the loaded step model, each step on the sequence alone: tokens, logits
local function greedy(m, ids, n, eos)
  local seq, tokens, logits = {}, {}, {}
  for i, x in ipairs(ids) do seq[i] = x end
  for _ = 1, n do
    local pos = {}
    for t = 1, #seq do pos[t] = t end
    local I = function(t) return ds.tensor(t, { dtype = "i64" }) end
    local row = m(I(seq), I(pos), I { { 1, #seq } }):reshape(-1):totable()
    local best = 1
    for j = 2, #row do if row[j] > row[best] then best = j end end
    tokens[#tokens + 1], logits[#logits + 1], seq[#seq + 1] = best, row[best], best
    if best == eos then break end
  end
  return tokens, logits
end

-- a plug-in adapter (the "adapter" setting names its module, found on DS_SERVE_LUA_PATH): {"rows": [[4 features,
-- 3 extra, bucket], ...]} -> the MLP's inputs through the generic contract; reply {"probs": rows of output 1}
local PLUGIN = [[
local tensor = require("ds.serve.tensor")
local M = {}
function M.row(req, model, settings)
  if type(req.rows) ~= "table" or #req.rows == 0 then return nil, "'rows' must be a list of rows of 8 numbers" end
  local x = { features = {}, extra = {}, bucket = {} }
  for i, r in ipairs(req.rows) do
    if type(r) ~= "table" or #r ~= 8 then return nil, "row " .. i .. " must have 8 numbers" end
    x.features[i], x.extra[i], x.bucket[i] = { r[1], r[2], r[3], r[4] }, { r[5], r[6], r[7] }, r[8]
  end
  return tensor.row({ inputs = x }, model, settings)
end
M.batch = tensor.batch
function M.reply(outputs) return { probs = tensor.encode(outputs[1]) } end
return M
]]

-- the events of an SSE reply: a list of decoded `data:` payloads
local function events(text)
  local out = {}
  for payload in text:gmatch("data: ([^\n]*)\n\n") do out[#out + 1] = cjson.decode(payload) end
  return out
end

describe_or_skip("ds.serve with a user's own models (configuration only)", function()
  local mlp_file, gen_file
  local function request(method, path, body, args, raw) return http.request(dir, port, method, path, body, args, raw) end
  local function metrics() return http.sh(string.format("curl -s --max-time 10 http://127.0.0.1:%d/metrics", port)) end
  -- POST each body at once (one curl per body, all in flight together): the raw replies, in order
  local function concurrently(path, bodies)
    for i, b in ipairs(bodies) do http.write(dir .. "/req" .. i, b) end
    http.sh(string.format("seq 1 %d | xargs -P %d -I{} curl -s -N --max-time 60 -o %s/resp{} -X POST --data-binary @%s/req{} http://127.0.0.1:%d%s",
      #bodies, #bodies, dir, dir, port, path))
    local out = {}
    for i = 1, #bodies do out[i] = http.read(dir .. "/resp" .. i) end
    return out
  end

  setup(function()
    ds.save(build_mlp(), models .. "/mlp")
    ds.save(build_gen(), models .. "/gen")
    ds.save(build_mlp(), models .. "/rows")   -- the same MLP, served through a plug-in adapter
    -- the decoding loop of docs/GENERATION.md as one saved graph (a while_loop, the caches its state): a model
    -- like any other for the generic contract
    local one = build_kv(1)
    ds.save(ds.compile(ds.generation_loop(one, { max_new_tokens = 10 }),
      { ds.spec({ 1, "t" }, "i64", "prompt"), ds.spec({}, "i64", "seed") }), models .. "/loop")
    local kv = build_kv(4)
    ds.save(ds.compile(function(ids, pos, slots) return kv:step(ids, pos, slots:narrow(1, 1, ids:size(1))) end,
      { ds.spec({ "n", "t" }, "i64", "ids"), ds.spec({ "n" }, "i64", "pos"), ds.spec({ 4 }, "i64", "slots") }),
      models .. "/kv")
    os.execute("mkdir -p " .. dir .. "/lua/plug")
    http.write(dir .. "/lua/plug/rows.lua", PLUGIN)
    mlp_file, gen_file = ds.load(models .. "/mlp"), ds.load(models .. "/gen")
    local vocab = {}
    for i, ch in ipairs { "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l" } do vocab[ch] = i end
    http.write(models .. "/gen.vocab.json", cjson.encode(vocab))
    -- the whole configuration: mlp needs none (a long batching wait only so that the test's concurrent requests
    -- surely share calls); gen is a step model with its vocab
    http.write(models .. "/serve.json", cjson.encode { models = {
      mlp = { max_wait_ms = 50, warm = true }, rows = { adapter = "plug.rows" },
      gen = { generate = true, max_length = POSITIONS, max_batch = 8, vocab = "gen.vocab.json", timeout_ms = 20000,
              max_wait_ms = 50 },
      kv = { generate = true, kv_cache = true, max_length = KV.block, timeout_ms = 20000 } } })
    local why
    -- one nginx worker: concurrent generations surely meet in the same running batch
    port, why = http.start(prefix, models, 30, "DS_SERVE_WORKERS=1 DS_SERVE_THREADS=5 DS_SERVE_LUA_PATH=" .. dir .. "/lua/?.lua")
    assert(port, "nginx did not come up: " .. tostring(why))
  end)
  teardown(function()
    if port then http.serve(prefix, port, models, "stop") end
    os.execute("sleep 0.3; rm -rf " .. dir)
  end)

  it("describes the model by its specs in /health", function()
    local code, h = request("GET", "/health")
    assert.equal(200, code)
    assert.equal("ok", h.status)
    assert.same({ { name = "features", dtype = "f32", shape = { "batch", 4 } },
                  { name = "extra", dtype = "f32", shape = { "batch", 3 } },
                  { name = "bucket", dtype = "i64", shape = { "batch" } } }, h.models.mlp.inputs)
    assert.equal("tensor", h.models.mlp.adapter)
    assert.is_true(h.models.mlp.warm)
    assert.is_nil(h.models.mlp.warm_error)
    assert.is_true(h.models.gen.generate)
  end)

  local X = { features = { { 1, 2, 3, 4 }, { 0, -1, 0.5, 2 } }, extra = { { 1, 0, 0 }, { 0.25, 0.5, 0.75 } },
              bucket = { 3, 5 } }
  local function local_outputs(x)
    return { mlp_file(ds.tensor(x.features), ds.tensor(x.extra), ds.tensor(x.bucket, { dtype = "i64" })) }
  end

  it("answers named inputs as nested arrays with every output as nested arrays", function()
    local code, r, version = request("POST", "/predict/mlp", cjson.encode { inputs = X })
    assert.equal(200, code, r.error)
    assert.truthy(version:match("^%x+$"))
    local want = local_outputs(X)
    local probs, score = want[1]:totable(), want[2]:totable()
    for i = 1, 2 do
      for j = 1, 2 do assert.is_true(math.abs(r.outputs.output1[i][j] - probs[i][j]) < 1e-12) end
      assert.is_true(math.abs(r.outputs.output2[i] - score[i]) < 1e-12 * math.abs(score[i]) + 1e-12)
    end
  end)

  it("answers base64 inputs and outputs (little-endian, dtype and shape) bit for bit", function()
    local want = local_outputs(X)
    local inputs = {
      features = { dtype = "f32", shape = { 2, 4 }, base64 = b64(bytes_of(ds.tensor(X.features))) },
      extra = X.extra,
      bucket = { dtype = "i64", shape = { 2 }, base64 = b64(bytes_of(ds.tensor(X.bucket, { dtype = "i64" }))) } }
    local code, r = request("POST", "/predict/mlp", cjson.encode { inputs = inputs, encoding = "base64" })
    assert.equal(200, code, r.error)
    assert.same({ 2, 2 }, r.outputs.output1.shape)
    assert.equal("f32", r.outputs.output1.dtype)
    assert.equal(bytes_of(want[1]), unb64(r.outputs.output1.base64))
    assert.equal(bytes_of(want[2]), unb64(r.outputs.output2.base64))
  end)

  it("batches concurrent requests of several rows, each answered bit for bit as alone", function()
    local bodies, alone = {}, {}
    for i = 1, 8 do
      local x = { features = {}, extra = {}, bucket = {} }
      for r = 1, 1 + i % 3 do
        x.features[r] = { i, -r, i * r / 7, 1 / i }
        x.extra[r] = { r / 3, i / 5, -1 }
        x.bucket[r] = (i + r) % 5 + 1
      end
      bodies[i] = cjson.encode { inputs = x, encoding = "base64" }
      local code, r = request("POST", "/predict/mlp", bodies[i])
      assert.equal(200, code, r.error)
      alone[i] = r.outputs
      assert.equal(bytes_of(local_outputs(x)[1]), unb64(r.outputs.output1.base64))
    end
    local calls0 = http.metric(metrics(), 'ds_batch_size_count{model="mlp"}')
    local replies = concurrently("/predict/mlp", bodies)
    for i = 1, 8 do assert.same(alone[i], cjson.decode(replies[i]).outputs, "request " .. i) end
    local calls = http.metric(metrics(), 'ds_batch_size_count{model="mlp"}') - calls0
    assert.is_true(calls < 8, "model calls: " .. calls)
  end)

  it("serves a model through a plug-in adapter named in serve.json", function()
    local code, r = request("POST", "/predict/rows", cjson.encode { rows = { { 1, 2, 3, 4, 1, 0, 0, 3 },
      { 0, -1, 0.5, 2, 0.25, 0.5, 0.75, 5 } } })
    assert.equal(200, code, r.error)
    local want = local_outputs(X)[1]:totable()
    for i = 1, 2 do for j = 1, 2 do assert.is_true(math.abs(r.probs[i][j] - want[i][j]) < 1e-12) end end
    code, r = request("POST", "/predict/rows", cjson.encode { rows = { { 1, 2 } } })
    assert.equal(400, code)
    assert.equal("row 1 must have 8 numbers", r.error)
  end)

  it("serves a saved decoding loop (a graph loop over KV caches) by its specs, one request at a time", function()
    local _, h = request("GET", "/health")
    assert.same({ { name = "prompt", dtype = "i64", shape = { 1, "t" } }, { name = "seed", dtype = "i64", shape = {} } },
      h.models.loop.inputs)
    local want = ds.generate(build_kv(1), ds.tensor({ { 3, 1, 4 } }, { dtype = "i64" }), { max_new_tokens = 10 })
    local code, r = request("POST", "/predict/loop", cjson.encode { inputs = { prompt = { { 3, 1, 4 } }, seed = 1 } })
    assert.equal(200, code, r.error)
    assert.same({ unpack(want:reshape(-1):totable(), 4) }, r.outputs.output1[1])
    assert.equal(10, r.outputs.output2)
  end)

  it("answers bad requests with 400 and an error naming the input and the problem", function()
    local function with(patch)
      local x = { features = X.features, extra = X.extra, bucket = X.bucket }
      for k, v in pairs(patch) do x[k] = v end
      return cjson.encode { inputs = x }
    end
    local cases = {
      { "{}", "missing field 'inputs'" },
      { cjson.encode { inputs = { features = X.features, extra = X.extra } }, "missing input 'bucket'" },
      { with { nope = { 1 } }, "no input named 'nope'" },
      { with { features = { { 1, 2, 3 }, { 1, 2, 3 } } }, "input 'features': dim 2 must be 4, got 3" },
      { with { features = { { 1, 2, 3, 4 }, { 1, 2, 3 } } }, "input 'features' is ragged" },
      { with { extra = { { 1, 0, 0 } } }, "input 'extra': dim 1 is 'batch' = 2 in another input, got 1" },
      { with { bucket = { 1.5, 2 } }, "input 'bucket': entry 1 (1.5) is not a i64 value" },
      { with { features = { { 1, 2, "x", 4 }, { 1, 2, 3, 4 } } }, "entry 3 (x) is not a f32 value" },
      { with { features = { dtype = "f64", shape = { 2, 4 }, base64 = "AAAA" } }, "dtype must be \"f32\", got f64" },
      { with { features = { dtype = "f32", shape = { 2, 4 }, base64 = "AAAA" } }, "3 bytes of base64 data, shape and dtype need 32" },
      { cjson.encode { inputs = X, encoding = "hex" }, "'encoding' must be" },
      { cjson.encode { inputs = X, extra_field = 1 }, "unknown field 'extra_field'" },
      { "[1,", "not JSON" },
    }
    for _, c in ipairs(cases) do
      local code, r = request("POST", "/predict/mlp", c[1])
      assert.equal(400, code, c[1])
      assert.truthy(r.error:find(c[2], 1, true), r.error .. " lacks " .. c[2])
    end
    assert.equal(404, (request("POST", "/generate/mlp", "{}")))
    assert.equal(404, (request("POST", "/predict/gen", "{}")))
    assert.equal(404, (request("POST", "/predict", "{}")))   -- several models, no default in serve.json
  end)

  it("streams generated tokens as Server-Sent Events, equal to the greedy loop on the sequence alone", function()
    local code, text, version = request("POST", "/generate/gen", cjson.encode { ids = { 3, 1, 4 }, max_tokens = 12 },
      "-N", true)
    assert.equal(200, code)
    local _, h = request("GET", "/health")
    assert.equal(h.models.gen.version, version)
    local ev = events(text)
    local want, want_logits = greedy(gen_file, { 3, 1, 4 }, 12)
    assert.equal(13, #ev)
    for k = 1, 12 do
      assert.equal(k, ev[k].index)
      assert.equal(want[k], ev[k].token)
      assert.is_true(math.abs(want_logits[k] - ev[k].logit) < 1e-12 * math.abs(want_logits[k]) + 1e-12)
      assert.equal(string.char(96 + want[k]), ev[k].text)
    end
    assert.is_true(ev[13].done)
    assert.equal("length", ev[13].reason)
    assert.same(want, ev[13].tokens)
    -- the same request as text, not streamed: one JSON reply
    local c2, r = request("POST", "/generate/gen", cjson.encode { text = "cad", max_tokens = 12, stream = false })
    assert.equal(200, c2)
    assert.same(want, r.tokens)
    local chars = {}
    for k, t in ipairs(want) do chars[k] = string.char(96 + t) end
    assert.equal(table.concat(chars), r.text)
  end)

  it("batches generations continuously: requests join a running generation and get the bits they get alone", function()
    local bodies, alone = {}, {}
    for i = 1, 6 do
      local ids = {}
      for t = 1, i * 5 do ids[t] = (t * i) % V + 1 end
      -- the first request is long, the others join it while it runs and leave before it ends
      bodies[i] = cjson.encode { ids = ids, max_tokens = i == 1 and POSITIONS - 5 or 10 + i * 3 }
      local code, text = request("POST", "/generate/gen", bodies[i], "-N", true)
      assert.equal(200, code)
      alone[i] = events(text)
    end
    local hist = metrics()
    local ones0 = http.metric(hist, 'ds_batch_size_bucket{model="gen",le="1"}')
    local steps0 = http.metric(hist, 'ds_batch_size_count{model="gen"}')
    for i, b in ipairs(bodies) do http.write(dir .. "/req" .. i, b) end
    -- the long one first; once its first token is out, the others at once
    local long = io.popen(http.clean(string.format("curl -s -N --max-time 60 -o %s/resp1 -X POST --data-binary @%s/req1 http://127.0.0.1:%d/generate/gen & "
      .. "until grep -q -a token %s/resp1 2>/dev/null; do sleep 0.002; done; echo first; wait", dir, dir, port, dir)))
    assert.equal("first", long:read("*l"))
    http.sh(string.format("seq 2 6 | xargs -P 5 -I{} curl -s -N --max-time 60 -o %s/resp{} -X POST --data-binary @%s/req{} http://127.0.0.1:%d/generate/gen",
      dir, dir, port))
    long:read("*a"); long:close()
    for i = 1, 6 do
      local got = events(http.read(dir .. "/resp" .. i))
      local k = 1
      while k <= #got and cjson.encode(got[k]) == cjson.encode(alone[i][k] or {}) do k = k + 1 end
      assert.same(alone[i], got, string.format("request %d: event %d of %d (alone %d): %s vs %s", i, k, #got,
        #alone[i], cjson.encode(got[k] or {}), cjson.encode(alone[i][k] or {})))
    end
    hist = metrics()
    local shared = (http.metric(hist, 'ds_batch_size_count{model="gen"}') - steps0)
      - (http.metric(hist, 'ds_batch_size_bucket{model="gen",le="1"}') - ones0)
    assert.is_true(shared > 0, "no step ran more than one sequence")
  end)

  it("ends a generation at eos, at the model's max_length and at the request's deadline", function()
    local want = greedy(gen_file, { 2, 2 }, 40)
    local eos = want[5]
    local first = 1
    while want[first] ~= eos do first = first + 1 end
    local _, r = request("POST", "/generate/gen", cjson.encode { ids = { 2, 2 }, max_tokens = 40, eos = eos, stream = false })
    assert.equal("eos", r.reason)
    assert.equal(first, r.count)
    local long = {}
    for t = 1, POSITIONS - 3 do long[t] = t % V + 1 end
    _, r = request("POST", "/generate/gen", cjson.encode { ids = long, max_tokens = 50, stream = false })
    assert.equal("max_length", r.reason)
    assert.equal(3, r.count)
    local code, text = request("POST", "/generate/gen", cjson.encode { ids = { 1 }, max_tokens = 250, timeout_ms = 30 }, "-N", true)
    assert.equal(200, code)
    local ev = events(text)
    assert.equal("deadline", ev[#ev].reason)
    assert.is_true(ev[#ev].count < 250)
    code, r = request("POST", "/generate/gen", cjson.encode { ids = long, max_tokens = 0 })
    assert.equal(400, code); assert.truthy(r.error:find("max_tokens", 1, true))
    code, r = request("POST", "/generate/gen", cjson.encode { ids = { 1, 0 } })
    assert.equal(400, code); assert.truthy(r.error:find("entry 2", 1, true))
    code, r = request("POST", "/generate/gen", cjson.encode { text = "az" })
    assert.equal(400, code); assert.truthy(r.error:find("not in the vocab", 1, true))
  end)

  it("generates with a KV-cache model in a ds.generator session: each request as ds.generate alone", function()
    local alone = build_kv(1)
    local function want(ids, opts)
      local out = ds.generate(alone, ds.tensor({ ids }, { dtype = "i64" }), opts):reshape(-1):totable()
      return { unpack(out, #ids + 1) }
    end
    -- greedy, streamed
    local code, text = request("POST", "/generate/kv", cjson.encode { ids = { 3, 1, 4 }, max_tokens = 10 }, "-N", true)
    assert.equal(200, code)
    local ev = events(text)
    assert.same(want({ 3, 1, 4 }, { max_new_tokens = 10 }), ev[#ev].tokens)
    assert.equal("length", ev[#ev].reason)
    assert.equal(11, #ev)
    -- six at once over four cache rows (two wait for a free row), greedy and sampled with seeds
    local bodies, wants = {}, {}
    for i = 1, 6 do
      local ids = {}
      for t = 1, 2 + i do ids[t] = (t * i) % KV.vocab + 1 end
      local opts = { max_new_tokens = 8 + 2 * i }
      if i % 2 == 0 then opts.temperature, opts.top_k, opts.seed = 0.9, 5, 100 + i end
      bodies[i] = cjson.encode { ids = ids, max_tokens = opts.max_new_tokens, temperature = opts.temperature,
        top_k = opts.top_k, seed = opts.seed, stream = false }
      wants[i] = want(ids, opts)
    end
    local replies = concurrently("/generate/kv", bodies)
    for i = 1, 6 do assert.same(wants[i], cjson.decode(replies[i]).tokens, "request " .. i) end
    -- the model's positions: a prompt 8 shorter leaves room for 9 new ones
    local long = {}
    for t = 1, KV.block - 8 do long[t] = t % KV.vocab + 1 end
    local _, r = request("POST", "/generate/kv", cjson.encode { ids = long, max_tokens = 30, stream = false })
    assert.equal("max_length", r.reason)
    assert.equal(9, r.count)
    assert.same(want(long, { max_new_tokens = 9 }), r.tokens)
    code, r = request("POST", "/generate/gen", cjson.encode { ids = { 1 }, temperature = 0.5 })
    assert.equal(400, code); assert.truthy(r.error:find("sampling needs a kv_cache model", 1, true))
    code, r = request("POST", "/generate/kv", cjson.encode { ids = { 1 }, top_k = 0.5 })
    assert.equal(400, code); assert.equal("'top_k' must be an integer >= 1", r.error)
    code, r = request("POST", "/generate/kv", cjson.encode { ids = { 1 }, temperature = -1 })
    assert.equal(400, code); assert.equal("'temperature' must be a number >= 0", r.error)
  end)

  it("reloads new files of step models without HUP: requests then get the new version's tokens", function()
    local function version(name)
      local _, h = request("GET", "/health")
      return h.models[name].version
    end
    local old = { gen = version("gen"), kv = version("kv") }
    -- new weights saved elsewhere, then copied over the served files (params first, then the graph file)
    local new = dir .. "/new"
    os.execute("mkdir -p " .. new)
    local gen2 = build_gen(8)
    ds.save(gen2, new .. "/gen")
    local kv2 = build_kv(4, 12)   -- the older step form: every cache row each step
    ds.save(ds.compile(function(ids, pos) return kv2:step(ids, pos) end,
      { ds.spec({ 4, 1 }, "i64", "ids"), ds.spec({ 4 }, "i64", "pos") }), new .. "/kv")
    for _, name in ipairs { "gen", "kv" } do
      local params = cjson.decode(http.read(new .. "/" .. name .. ".json")).params.file
      os.execute(string.format("cp %s/%s %s/ && cp %s/%s.json %s/%s.json", new, params, models, new, name, models, name))
    end
    for _, name in ipairs { "gen", "kv" } do
      local v
      for _ = 1, 100 do
        v = version(name)
        if v ~= old[name] then break end
        os.execute("sleep 0.1")
      end
      assert.are_not.equal(old[name], v, name .. " kept its version")
    end
    local _, r, v = request("POST", "/generate/gen", cjson.encode { ids = { 3, 1, 4 }, max_tokens = 12, stream = false })
    assert.equal(version("gen"), v)
    assert.same((greedy(ds.load(models .. "/gen"), { 3, 1, 4 }, 12)), r.tokens)
    _, r = request("POST", "/generate/kv", cjson.encode { ids = { 3, 1, 4 }, max_tokens = 10, stream = false })
    local alone = ds.generate(build_kv(1, 12), ds.tensor({ { 3, 1, 4 } }, { dtype = "i64" }), { max_new_tokens = 10 })
    assert.same({ unpack(alone:reshape(-1):totable(), 4) }, r.tokens)
  end)

  for _, model in ipairs { "gen", "kv" } do
    it("cancels a generation when its client goes away (" .. model .. ")", function()
      local function series(name) return string.format('%s{model="%s"%s}', name, model,
        name == "ds_generations_total" and ',reason="cancelled"' or "") end
      local before = metrics()
      local cancelled0 = http.metric(before, series("ds_generations_total")) or 0
      local tokens0 = http.metric(before, series("ds_generated_tokens_total"))
      -- send the request and close the connection at once: the client is gone before its generation can end (a
      -- client that waited for the first token could see a fast model finish all its tokens before it closed)
      local body = cjson.encode { ids = { 1, 2, 3 }, max_tokens = 200 }
      http.write(dir .. "/gen_req", string.format("POST /generate/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s",
        model, #body, body))
      http.sh(string.format("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d; cat %s/gen_req >&3; exec 3<&-'", port, dir))
      local now, cancelled
      for _ = 1, 50 do
        os.execute("sleep 0.1")
        now = metrics()
        cancelled = http.metric(now, series("ds_generations_total")) or 0
        if cancelled > cancelled0 then break end
      end
      assert.equal(cancelled0 + 1, cancelled)
      local generated = http.metric(now, series("ds_generated_tokens_total")) - tokens0
      assert.is_true(generated < 200, generated .. " tokens generated for the cancelled request")
      local _, h = request("GET", "/health")
      assert.equal(0, h.models[model].queued)
    end)
  end
end)
