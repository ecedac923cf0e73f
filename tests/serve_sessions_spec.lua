-- tests/serve_sessions_spec.lua: a KV-cache model version runs several ds.generator sessions at once (serve.json
-- "sessions", default 2), each in its own pool thread with its own cache rows: concurrent requests spread over them
-- and each answer stays ds.generate's on the request alone; "sessions": 1 keeps one. Skipped without nginx's Lua
-- module.
package.path = "./examples/?.lua;" .. package.path
local ds = require("ds")
local cjson = require("cjson")
local gpt = require("char_gpt_model")
local http = require("serve_http")

local MODULE = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
local have = io.open(MODULE) and os.execute("command -v nginx >/dev/null && command -v curl >/dev/null") == 0
local describe_or_skip = have and describe or pending

-- a character GPT with KV caches (examples/char_gpt_model.lua), large enough that a request of 200 tokens runs for
-- tens of ms (concurrent requests overlap): its step ids (n, t) i64, pos (n) i64, slots (4) i64 -> logits (n, t, 12)
local KV = { vocab = 12, embed = 128, heads = 4, layers = 4, block = 256 }
local function build_kv(slots)
  ds.manual_seed(5)
  local cfg = { cache_batch = slots }
  for k, v in pairs(KV) do cfg[k] = v end
  local m = gpt.GPT(cfg)
  m:eval()
  return m
end

describe_or_skip("ds.serve KV-cache sessions", function()
  local dir = os.tmpname(); os.remove(dir)
  local models, prefix = dir .. "/models", dir .. "/nginx"
  local port
  local function request(method, path, body) return http.request(dir, port, method, path, body) end
  local function sessions(model)
    local text = http.sh(string.format("curl -s --max-time 10 http://127.0.0.1:%d/metrics", port))
    return http.metric(text, string.format('ds_generation_sessions_total{model="%s"}', model)) or 0
  end
  -- POST each body at once (one curl per body, all in flight together): the replies, decoded, in order
  local function concurrently(path, bodies)
    for i, b in ipairs(bodies) do http.write(dir .. "/req" .. i, b) end
    http.sh(string.format("seq 1 %d | xargs -P %d -I{} curl -s --max-time 60 -o %s/resp{} -X POST --data-binary "
      .. "@%s/req{} http://127.0.0.1:%d%s", #bodies, #bodies, dir, dir, port, path))
    local out = {}
    for i = 1, #bodies do out[i] = cjson.decode(http.read(dir .. "/resp" .. i)) end
    return out
  end

  setup(function()
    os.execute("mkdir -p " .. models)
    local kv = build_kv(4)
    local step = ds.compile(function(ids, pos, slots) return kv:step(ids, pos, slots:narrow(1, 1, ids:size(1))) end,
      { ds.spec({ "n", "t" }, "i64", "ids"), ds.spec({ "n" }, "i64", "pos"), ds.spec({ 4 }, "i64", "slots") })
    ds.save(step, models .. "/kv2")
    ds.save(step, models .. "/kv1")
    http.write(models .. "/serve.json", cjson.encode { models = {
      kv2 = { generate = true, kv_cache = true, max_length = KV.block, timeout_ms = 60000 },
      kv1 = { generate = true, kv_cache = true, max_length = KV.block, timeout_ms = 60000, sessions = 1 } } })
    local why
    -- one worker with a thread per model and one more: kv2's second session has room in it
    port, why = http.start(prefix, models, 40, "DS_SERVE_WORKERS=1 DS_SERVE_THREADS=3")
    assert(port, "nginx did not come up: " .. tostring(why))
  end)
  teardown(function()
    if port then http.serve(prefix, port, models, "stop") end
    os.execute("sleep 0.3; rm -rf " .. dir)
  end)

  it("spreads concurrent requests over two sessions (one with sessions = 1), each answer as ds.generate alone",
    function()
      local alone = build_kv(1)
      local bodies, wants = {}, {}
      for i = 1, 6 do
        local ids = {}
        for t = 1, 1 + i do ids[t] = (t * i + 3) % KV.vocab + 1 end
        local opts = { max_new_tokens = 200 + 5 * i }
        if i % 2 == 0 then opts.temperature, opts.top_k, opts.seed = 0.8, 6, 40 + i end
        bodies[i] = cjson.encode { ids = ids, max_tokens = opts.max_new_tokens, temperature = opts.temperature,
          top_k = opts.top_k, seed = opts.seed, stream = false }
        local out = ds.generate(alone, ds.tensor({ ids }, { dtype = "i64" }), opts):reshape(-1):totable()
        wants[i] = { unpack(out, #ids + 1) }
      end
      for _, model in ipairs { "kv2", "kv1" } do
        local before = sessions(model)
        local replies = concurrently("/generate/" .. model, bodies)
        for i = 1, 6 do assert.same(wants[i], replies[i].tokens, model .. " request " .. i) end
        -- six requests over sessions of 4 rows: a second session starts once the first has 2 rows busy
        assert.equal(model == "kv2" and 2 or 1, sessions(model) - before, model)
      end
      local _, h = request("GET", "/health")
      assert.equal(0, h.models.kv2.queued)
    end)
end)
