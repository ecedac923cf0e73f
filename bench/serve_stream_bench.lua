-- bench/serve_stream_bench.lua: streamed generation from nginx (ds.serve's POST /generate/NAME, Server-Sent Events)
-- against the same model generating in process: the character GPT of examples/char_gpt.lua (briefly trained),
-- greedy, 48 new tokens after a 13-character prompt (its block is 64); tokens/s of one stream, of 8 concurrent streams
-- (continuous batching over 8 cache rows), and of ds.generate in process (compiled step per token, and the compiled
-- loop). A served stream is timed from its request to its last event by curl's own trace (no process start-up in
-- it); every streamed answer is checked equal to the one-stream answer, and that to ds.generate's in process. The saved
-- step runs only the running requests' cache rows and takes a prompt in one call: its time per call (8 rows running,
-- 1, and a prompt; one thread as the server runs it) and a server whose caches hold one request tell what a stream
-- costs, and the CPU per token of the session's thread, of the workers' event loops and of the client (curl) where it
-- goes.
-- usage (repo root): luajit bench/serve_stream_bench.lua [PORT]   (`make serve-stream-bench`)
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;./bench/?.lua;" .. package.path
local ds = require("ds")
local cjson = require("cjson")
local char_gpt = require("char_gpt")
local CM = require("char_gpt_model")

local PORT = tonumber(arg[1]) or 8097
local N, PROMPT, STREAMS = 48, "This License ", 8   -- 13 + 48 - 1 positions: the model holds 64
local dir = os.tmpname(); os.remove(dir)
local prefix = dir .. "/ngx"
local function sh(cmd) assert(os.execute(cmd) == 0, "failed: " .. cmd) end
sh("mkdir -p " .. dir)

-- one training run, saved for the servers (caches for 8 requests, and for 1) and loaded in process (1 row)
local ids, chars, id = char_gpt.encode(char_gpt.corpus())
local trained = char_gpt.train(ids, #chars, { steps = 50, batch = 16 })
ds.save_state(trained:state_dict(), dir .. "/w.safetensors")
for _, slots in ipairs { STREAMS, 1 } do
  sh(string.format("luajit examples/serve/export_gpt_stream.lua %s/models%d --weights %s/w.safetensors --slots %d "
    .. ">/dev/null", dir, slots, dir, slots))
end

-- in process: the same weights, caches for one request
local model = CM.GPT({ vocab = #chars, cache_batch = 1 })
model:load_state_dict(ds.load_state(dir .. "/w.safetensors"))
model:eval()
local p = {}
for ch in PROMPT:gmatch(".") do p[#p + 1] = id[ch] end
local prompt = ds.tensor({ p }, { dtype = "i64" })
local function rate(opts)   -- best of 5, as the served streams
  ds.generate(model, prompt, opts)   -- plans built and warmed
  local best = math.huge
  for _ = 1, 5 do
    local t0 = ds.clock()
    ds.generate(model, prompt, opts)
    best = math.min(best, ds.clock() - t0)
  end
  return N / best
end
local step_rate = rate({ max_new_tokens = N, compile = true })
local loop_rate = rate({ max_new_tokens = N })
local want = table.concat({ unpack(ds.generate(model, prompt, { max_new_tokens = N }):reshape(-1):totable(), #p + 1) },
  ",")

-- the saved step's milliseconds per call on one thread with n rows of t tokens running (of the 8-row model)
local function step_ms(n, t)
  local threads = ds.get_num_threads()
  ds.set_num_threads(1)
  local m = ds.load(string.format("%s/models%d/char_gpt", dir, STREAMS))
  local x, pos = ds.ones({ n, t }, { dtype = "i64" }), ds.ones({ n }, { dtype = "i64" })
  local rows = ds.arange(1, STREAMS + 1, { dtype = "i64" })
  for _ = 1, 20 do m(x, pos, rows) end
  local best = math.huge
  for _ = 1, 5 do
    local t0 = ds.clock()
    for _ = 1, 40 do m(x, pos, rows) end
    best = math.min(best, (ds.clock() - t0) / 40)
  end
  ds.set_num_threads(threads)
  return best * 1000
end
local step8, step1, prefill = step_ms(STREAMS, 1), step_ms(1, 1), step_ms(1, 16)

-- seconds of a curl trace line "HH:MM:SS.micro ..."
local function stamp(line)
  local h, m, s = line:match("^(%d+):(%d+):([%d.]+) ")
  return h and (h * 3600 + m * 60 + s) or nil
end

-- n streams at once from one curl (parallel transfers, every connection opened at once): the seconds from the first
-- request to the last event and each stream's final event (the whole answer)
local body = string.format('{"text": "%s", "max_tokens": %d}', PROMPT, N)
local function streams(n)
  local urls, outs = {}, {}
  for i = 1, n do
    urls[i] = string.format("http://127.0.0.1:%d/generate/char_gpt", PORT)
    outs[i] = string.format("-o %s/out%d", dir, i)
  end
  sh(string.format("curl -sfN -Z --parallel-immediate --parallel-max %d --trace-time --trace-ascii %s/trace -d '%s' "
    .. "%s %s 2>/dev/null", n, dir, body, table.concat(urls, " "), table.concat(outs, " ")))
  local first, last = math.huge, -math.huge   -- the trace's first line (connecting) and last data received
  for line in io.lines(dir .. "/trace") do
    local t = stamp(line)
    if t then
      first = math.min(first, t)
      if line:find("<= Recv data", 1, true) then last = math.max(last, t) end
    end
  end
  local t = last - first
  if t < 0 then t = t + 86400 end   -- past midnight
  assert(t > 0 and t < 3600, "curl's trace has no request and reply times")
  local answers = {}
  for i = 1, n do
    local final
    for line in io.lines(string.format("%s/out%d", dir, i)) do
      if line:find('"done":true', 1, true) then final = cjson.decode(line:sub(7)) end
    end
    assert(final and final.count == N, "stream " .. i .. " did not end with " .. N .. " tokens")
    answers[i] = table.concat(final.tokens, ",")
  end
  return t, answers
end

-- CPU seconds so far of the server's worker threads: the workers' event loops (each process's main thread) and the
-- others (the pool threads: the session's steps), and of this process's finished children (curl, the client)
local TICK = 1 / tonumber(io.popen("getconf CLK_TCK"):read("*l"))
local function ticks(stat)   -- utime + stime of a /proc stat line
  local f = {}
  for w in stat:match("%) (.*)$"):gmatch("%S+") do f[#f + 1] = w end
  return tonumber(f[12]) + tonumber(f[13]), f
end
local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return text
end
local function ls(dir)
  local p, names = io.popen("ls " .. dir), {}
  for name in p:lines() do names[#names + 1] = name end
  p:close()
  return names
end
local function cpu()
  local master = read(prefix .. "/logs/nginx.pid"):match("%d+")
  local loops, pool = 0, 0
  for _, pid in ipairs(ls("/proc")) do
    local st = pid:match("^%d+$") and read("/proc/" .. pid .. "/stat")
    if st and st:match("%) %S+ (%d+)") == master then
      for _, tid in ipairs(ls("/proc/" .. pid .. "/task")) do
        local t = read("/proc/" .. pid .. "/task/" .. tid .. "/stat")
        t = t and ticks(t) or 0
        if tid == pid then loops = loops + t else pool = pool + t end
      end
    end
  end
  local _, me = ticks(read("/proc/self/stat"))
  return { loops = loops * TICK, pool = pool * TICK, client = (tonumber(me[14]) + tonumber(me[15])) * TICK }
end
-- microseconds per token of each part between two cpu() readings over `tokens` tokens
local function split(a, b, tokens)
  local us = function(k) return (b[k] - a[k]) * 1e6 / tokens end
  return string.format("session %.0f, event loops %.0f, curl %.0f (its start-up in it)", us("pool"), us("loops"),
    us("client"))
end

-- a server on models_dir: one stream (best of 5), then STREAMS at once (best of 3; each answer the one stream's);
-- the CPU per token of each part over those runs
local function served(models_dir, many)
  sh(string.format("bin/ds-serve %s %d %s start >/dev/null", prefix, PORT, models_dir))
  local ok = false
  for _ = 1, 100 do
    if os.execute(string.format("curl -sf http://127.0.0.1:%d/health >/dev/null", PORT)) == 0 then ok = true; break end
    os.execute("sleep 0.1")
  end
  assert(ok, "the server did not come up")
  -- warm: each worker's session and its plan (built on a thread VM's first call; the streams spread over workers)
  for _ = 1, many and 2 or 0 do streams(STREAMS) end
  streams(1)
  local one, alone = math.huge, nil
  local c0 = cpu()
  for _ = 1, 5 do
    local t, a = streams(1)
    one, alone = math.min(one, t), a[1]
  end
  local c1 = cpu()
  assert(alone == want, "the served answer differs from ds.generate's in process")
  local total = math.huge
  for _ = 1, many and 3 or 0 do
    local t, a = streams(STREAMS)
    for i = 1, STREAMS do assert(a[i] == alone, "stream " .. i .. " of " .. STREAMS .. " differs from one alone") end
    total = math.min(total, t)
  end
  local c2 = cpu()
  os.execute(string.format("bin/ds-serve %s %d %s stop >/dev/null; sleep 1", prefix, PORT, models_dir))
  return N / one, STREAMS * N / total, split(c0, c1, 5 * N), many and split(c1, c2, 3 * STREAMS * N)
end
local one, total, cpu1, cpu8 = served(dir .. "/models" .. STREAMS, true)
local one1 = served(dir .. "/models1", false)
os.execute("rm -rf " .. dir)

print(string.format("char GPT greedy, %d new tokens after %d, ds %d threads; tokens/s", N, #p, ds.get_num_threads()))
print(string.format("  in process, compiled step per token   %8.0f", step_rate))
print(string.format("  in process, compiled decoding loop    %8.0f", loop_rate))
print(string.format("  served, one stream                     %8.0f  (%.2fx the in-process loop: target >= 0.8x; "
  .. "%.2fx the step)", one, one / loop_rate, one / step_rate))
print(string.format("  served, %d concurrent streams (total)   %8.0f  (%.2fx one stream; target >= 3x; each answer "
  .. "as alone)", STREAMS, total, total / one))
print(string.format("  served, one stream, caches for 1       %8.0f  (%.2fx the in-process loop)", one1,
  one1 / loop_rate))
print(string.format("  CPU per token (us; 10 ms ticks): one stream: %s; %d streams: %s", cpu1, STREAMS, cpu8))
print(string.format("  saved step per call, 1 thread: %d rows running %.3f ms, 1 row %.3f ms, a prompt (16 tokens) "
  .. "%.3f ms (a stream: %d steps, its prompt one)", STREAMS, step8, step1, prefill, N))
