-- examples/serve/export_gpt_stream.lua: the character GPT of examples/char_gpt.lua served with streamed generation:
-- its decode step with KV caches for SLOTS requests compiled and saved (over the cache rows it is given: a prompt in
-- one call, the running requests' tokens in one call), the characters as a vocab, and the serve.json that makes it a
-- KV-cache step model (docs/SERVING.md "KV caches"); no serving code.
-- usage: luajit examples/serve/export_gpt_stream.lua OUT_DIR [--weights W.safetensors] [--slots N] [--steps N]
--   W: char_gpt.lua --out DIR's char_gpt_weights.safetensors; without it, N training steps here (default 100)
--   bin/ds-serve /tmp/ngx 8089 OUT_DIR start
--   curl -N -d '{"text": "This License ", "max_tokens": 80}' http://127.0.0.1:8089/generate/char_gpt
--   (Server-Sent Events, one per character: data: {"index":1,"token":..,"text":"s"}; add "temperature": 0.8,
--   "top_k": 20, "seed": 1 to sample)
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;" .. package.path
local ds = require("ds")
local cjson = require("cjson")
local char_gpt = require("char_gpt")
local CM = require("char_gpt_model")

local out = arg[1] or error("usage: export_gpt_stream.lua OUT_DIR [--weights W] [--slots N] [--steps N]", 0)
local weights, slots, steps = nil, 8, 100
local i = 2
while i <= #arg do
  if arg[i] == "--weights" then weights = arg[i + 1]
  elseif arg[i] == "--slots" then slots = tonumber(arg[i + 1])
  elseif arg[i] == "--steps" then steps = tonumber(arg[i + 1])
  else error("unknown argument " .. arg[i] .. " (--weights W, --slots N, --steps N)", 0) end
  i = i + 2
end
os.execute("mkdir -p '" .. out .. "'")

local ids, chars, id = char_gpt.encode(char_gpt.corpus())
local state
if weights then
  state = ds.load_state(weights)
else
  local trained = char_gpt.train(ids, #chars, { steps = steps, batch = 16 })
  state = trained:state_dict()
end
-- the same weights in a model whose KV caches hold `slots` rows (caches are not in the state)
local model = CM.GPT({ vocab = #chars, cache_batch = slots })
model:load_state_dict(state)
model:eval()
-- step(ids (n, t) i64, pos (n) i64, slots (SLOTS) i64) -> logits (n, t, vocab): ids row b in cache row slots[b],
-- its t tokens at positions pos[b] .. (slots: every cache row, those of ids first); the caches written in place,
-- graph state
ds.save(ds.compile(function(x, pos, rows) return model:step(x, pos, rows:narrow(1, 1, x:size(1))) end,
  { ds.spec({ "n", "t" }, "i64", "ids"), ds.spec({ "n" }, "i64", "pos"), ds.spec({ slots }, "i64", "slots") }),
  out .. "/char_gpt")
local f = assert(io.open(out .. "/char_gpt.vocab.json", "wb"))
f:write(cjson.encode(id)); f:close()
f = assert(io.open(out .. "/serve.json", "wb"))
f:write(cjson.encode { models = { char_gpt = { generate = true, kv_cache = true, vocab = "char_gpt.vocab.json",
  max_length = model.max_len, timeout_ms = 60000 } } })
f:close()
print(string.format("saved char_gpt (%d characters, caches for %d requests) and serve.json to %s", #chars, slots, out))
