-- bench/serve_stream_bench.lua: streamed generation from nginx (ds.serve's POST /generate/NAME, Server-Sent Events)
-- against the same model generating in process: the character GPT of examples/char_gpt.lua (briefly trained),
-- greedy, 48 new tokens after a 13-character prompt (its block is 64); tokens/s of one stream, of 8 concurrent streams (continuous
-- batching over 8 cache rows), and of ds.generate in process (compiled step per token, and the compiled loop).
-- usage (repo root): luajit bench/serve_stream_bench.lua [PORT]   (`make serve-stream-bench`)
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;./bench/?.lua;" .. package.path
local ds = require("ds")
local char_gpt = require("char_gpt")
local CM = require("char_gpt_model")

local PORT = tonumber(arg[1]) or 8097
local N, PROMPT, STREAMS = 48, "This License ", 8   -- 13 + 48 - 1 positions: the model holds 64
local dir = os.tmpname(); os.remove(dir)
local models, prefix = dir .. "/models", dir .. "/ngx"
assert(os.execute("mkdir -p " .. models) == 0)
local function sh(cmd) assert(os.execute(cmd) == 0, "failed: " .. cmd) end

-- one training run, saved for the server (8 cache rows) and loaded in process (1 row)
local ids, chars, id = char_gpt.encode(char_gpt.corpus())
local trained = char_gpt.train(ids, #chars, { steps = 50, batch = 16 })
ds.save_state(trained:state_dict(), dir .. "/w.safetensors")
sh(string.format("luajit examples/serve/export_gpt_stream.lua %s --weights %s/w.safetensors --slots %d >/dev/null",
  models, dir, STREAMS))

-- in process: the same weights, caches for one request
local model = CM.GPT({ vocab = #chars, cache_batch = 1 })
model:load_state_dict(ds.load_state(dir .. "/w.safetensors"))
model:eval()
local p = {}
for ch in PROMPT:gmatch(".") do p[#p + 1] = id[ch] end
local prompt = ds.tensor({ p }, { dtype = "i64" })
local function rate(opts)
  ds.generate(model, prompt, opts)   -- plans built and warmed
  local t0 = ds.clock()
  for _ = 1, 3 do ds.generate(model, prompt, opts) end
  return 3 * N / (ds.clock() - t0)
end
local step_rate = rate({ max_new_tokens = N, compile = true })
local loop_rate = rate({ max_new_tokens = N })

-- served: one stream, then 8 at once (each a curl reading the whole event stream)
sh(string.format("bin/ds-serve %s %d %s start >/dev/null", prefix, PORT, models))
local ok = false
for _ = 1, 100 do
  if os.execute(string.format("curl -sf http://127.0.0.1:%d/health >/dev/null", PORT)) == 0 then ok = true; break end
  os.execute("sleep 0.1")
end
assert(ok, "the server did not come up")
local body = string.format('{"text": "%s", "max_tokens": %d}', PROMPT, N)
local curl = string.format("curl -sN -o /dev/null -d '%s' http://127.0.0.1:%d/generate/char_gpt", body, PORT)
sh(curl)   -- warm: the session and its plan
local t0 = ds.clock()
for _ = 1, 3 do sh(curl) end
local one = 3 * N / (ds.clock() - t0)
local many = {}
for i = 1, STREAMS do many[i] = curl .. " &" end
t0 = ds.clock()
sh("(" .. table.concat(many, " ") .. " wait)")
local total = STREAMS * N / (ds.clock() - t0)
os.execute(string.format("bin/ds-serve %s %d %s stop >/dev/null", prefix, PORT, models))
os.execute("rm -rf " .. dir)

print(string.format("char GPT greedy, %d new tokens, ds %d threads; tokens/s", N, ds.get_num_threads()))
print(string.format("  in process, compiled step per token   %8.0f", step_rate))
print(string.format("  in process, compiled decoding loop    %8.0f", loop_rate))
print(string.format("  served, one stream                     %8.0f  (%.2fx the in-process loop: target >= 0.8x; %.2fx the step)",
  one, one / loop_rate, one / step_rate))
print(string.format("  served, %d concurrent streams (total)   %8.0f  (%.2fx one stream; target >= 3x)", STREAMS, total,
  total / one))
