-- bench/serve_stream_bench.lua: streamed generation from nginx (ds.serve's POST /generate/NAME, Server-Sent Events)
-- against the same model generating in process: the character GPT of examples/char_gpt.lua (briefly trained), greedy,
-- 48 new tokens after a 13-character prompt (its block is 64); tokens/s of one stream, of 8 concurrent streams
-- (continuous batching: the server's 2 sessions of 4 rows, serve.json "sessions"), and of ds.generate in process
-- (compiled step per token, and the compiled loop). The client is one LuaJIT process (bench/sse_client.lua: its FFI
-- over socket, poll and recv) that opens every connection, sends the requests back to back and times each stream from
-- its request to its last event (its start-up not in it): a real client runs on another machine, and with curl (a
-- process, or one curl's parallel transfers) on the same 2 cores the client cost as much CPU per token as the server's
-- session, so the bench measured curl. Every streamed answer is checked equal to the one-stream answer (its token
-- events in order, complete, and equal to its final event), and that to ds.generate's in process. The saved step runs
-- only the running requests' cache rows and takes a short prompt in one call: its time per call (8 rows running, 4, 1,
-- at a stream's mean cache position, and the prompt's; one thread as the server runs it, and two), the ratios of 8
-- streams to one those allow (one session of 8 rows on one core, two of 4 rows on two cores), and a server whose caches
-- hold one request tell what a stream costs, and the CPU per token (the scheduler's run time) of the sessions' threads,
-- of the workers' event loops and of the client where it goes.
-- usage (repo root): luajit bench/serve_stream_bench.lua [PORT]   (`make serve-stream-bench`)
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;./bench/?.lua;" .. package.path
local ds = require("ds")
local cjson = require("cjson")
local char_gpt = require("char_gpt")
local CM = require("char_gpt_model")

local PORT = tonumber(arg[1]) or 8097
-- sessions each pool thread runs before the timed runs: its plans built (~40 ms, the first) and its JIT's traces
-- settled (a pool thread's VM recorded 130-150 traces in its first 8-stream session, 10-50 in each of its next few,
-- 3-12 after ten: jit.attach over a scratch server; a server runs for hours). A round in which a pool thread ran for
-- SESSION_S CPU seconds counts as a session of it.
local WARM_SESSIONS, SESSION_S = 10, 0.002
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

-- the saved step's milliseconds per call on `threads` threads with n rows of t tokens running at cache position at
-- (of the 8-row model): a stream's steps attend to 13 .. 60 positions, at 37 on average (attention grows with it)
local function step_ms(n, t, at, threads)
  local was = ds.get_num_threads()
  ds.set_num_threads(threads)
  local m = ds.load(string.format("%s/models%d/char_gpt", dir, STREAMS))
  local x, pos = ds.ones({ n, t }, { dtype = "i64" }), ds.full({ n }, at, { dtype = "i64" })
  local rows = ds.arange(1, STREAMS + 1, { dtype = "i64" })
  for _ = 1, 20 do m(x, pos, rows) end
  local best = math.huge
  for _ = 1, 5 do
    local t0 = ds.clock()
    for _ = 1, 40 do m(x, pos, rows) end
    best = math.min(best, (ds.clock() - t0) / 40)
  end
  ds.set_num_threads(was)
  return best * 1000
end
local mid = #p + N / 2
-- a prompt's calls as ds.generator makes them (chunks of 16 * 2^k tokens, largest first, then the rest in one call:
-- the 13-character prompt is one call of 13) -> ms
local function prompt_ms(threads)
  local at, c, ms = 1, 16, 0
  while 2 * c <= #p do c = 2 * c end
  while c >= 16 do
    if #p - at + 1 >= c then ms, at = ms + step_ms(1, c, at, threads), at + c end
    c = c / 2
  end
  return ms + (at <= #p and step_ms(1, #p - at + 1, at, threads) or 0)
end
local step8, step1, prefill = step_ms(STREAMS, 1, mid, 1), step_ms(1, 1, mid, 1), prompt_ms(1)
local step4 = step_ms(STREAMS / 2, 1, mid, 1)
-- the same on two threads (the session steps on one: docs/SERVING.md)
local step8_2, prefill_2 = step_ms(STREAMS, 1, mid, 2), prompt_ms(2)
-- the ratio of 8 streams to one the step alone allows: 8 prompts and N steps of 8 rows against a prompt and N steps
-- of one row
local cap = (STREAMS * N / (N * step8 + STREAMS * prefill)) / (N / (N * step1 + prefill))
-- and two sessions of half the rows each stepping on its own core (the server's default: docs/SERVING.md)
local cap2 = (STREAMS * N / (N * step4 + STREAMS / 2 * prefill)) / (N / (N * step1 + prefill))

-- n streams at once from one client process (bench/sse_client.lua: one LuaJIT process, its FFI over socket, poll and
-- recv, every connection opened and every request sent back to back): the seconds from the first request to the
-- last event, each stream's answer (its tokens) and the client's CPU seconds over the streams (its start-up not in it)
local body = string.format('{"text": "%s", "max_tokens": %d}', PROMPT, N)
local function streams(n)
  local p = io.popen(string.format("luajit bench/sse_client.lua %d %d /generate/char_gpt '%s'", PORT, n, body))
  local res = cjson.decode(p:read("*a"))
  assert(p:close() and res, "the client failed")
  local t, answers = 0, {}
  for i, st in ipairs(res.streams) do
    assert(#st.tokens == N, "stream " .. i .. " did not end with " .. N .. " tokens")
    answers[i], t = table.concat(st.tokens, ","), math.max(t, st.last)
  end
  return t, answers, res.cpu
end

-- CPU seconds so far (the scheduler's run time, nanoseconds) of the server's worker threads: the workers' event loops
-- (each process's main thread) and the others (the pool threads: the session's steps)
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
-- (and each pool thread's, by thread id)
local function cpu()
  local master = read(prefix .. "/logs/nginx.pid"):match("%d+")
  local loops, pool, each = 0, 0, {}
  for _, pid in ipairs(ls("/proc")) do
    local st = pid:match("^%d+$") and read("/proc/" .. pid .. "/stat")
    if st and st:match("%) %S+ (%d+)") == master then
      for _, tid in ipairs(ls("/proc/" .. pid .. "/task")) do
        local t = read("/proc/" .. pid .. "/task/" .. tid .. "/schedstat")
        t = t and tonumber(t:match("^%d+")) / 1e9 or 0
        if tid == pid then loops = loops + t else pool, each[tid] = pool + t, t end
      end
    end
  end
  return { loops = loops, pool = pool, each = each }
end
-- microseconds per token of each part between two cpu() readings over `tokens` tokens, the client's `client` seconds
local function split(a, b, client, tokens)
  local us = function(s) return s * 1e6 / tokens end
  return string.format("session %.1f, event loops %.1f, client %.1f", us(b.pool - a.pool), us(b.loops - a.loops),
    us(client))
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
  -- warm: every pool thread's VM builds its plans (tens of ms) in the first session it runs and JIT-compiles its
  -- loop over its next ones, and a session starts in any pool thread of the worker its first request reached:
  -- streams (one and STREAMS in turn), each set after the last session has ended, until every pool thread has run
  -- WARM_SESSIONS (plan builds and trace recording kept out of the timed runs and the CPU per token)
  local seen, rounds = {}, 0
  for round = 1, 150 do
    rounds = round
    local before = cpu().each
    streams(many and round % 2 == 0 and STREAMS or 1)
    os.execute("sleep 0.1")   -- the session ends (50 ms idle)
    local all = true
    for tid, t in pairs(cpu().each) do
      if t - (before[tid] or 0) >= SESSION_S then seen[tid] = (seen[tid] or 0) + 1 end
      all = all and (seen[tid] or 0) >= WARM_SESSIONS
    end
    if all then break end
  end
  streams(1)
  local one, alone, client1, client8 = math.huge, nil, 0, 0
  local c0 = cpu()
  for _ = 1, 5 do
    local t, a, c = streams(1)
    one, alone, client1 = math.min(one, t), a[1], client1 + c
  end
  local c1 = cpu()
  assert(alone == want, "the served answer differs from ds.generate's in process")
  local total = math.huge
  for _ = 1, many and 3 or 0 do
    local t, a, c = streams(STREAMS)
    for i = 1, STREAMS do assert(a[i] == alone, "stream " .. i .. " of " .. STREAMS .. " differs from one alone") end
    total, client8 = math.min(total, t), client8 + c
  end
  local c2 = cpu()
  os.execute(string.format("bin/ds-serve %s %d %s stop >/dev/null; sleep 1", prefix, PORT, models_dir))
  return N / one, STREAMS * N / total, split(c0, c1, client1, 5 * N),
    many and split(c1, c2, client8, 3 * STREAMS * N), rounds
end
local one, total, cpu1, cpu8, rounds = served(dir .. "/models" .. STREAMS, true)
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
print(string.format("  CPU per token (us): one stream: %s; %d streams: %s (after %d warm-up rounds)", cpu1, STREAMS,
  cpu8, rounds))
print(string.format("  saved step per call, 1 thread, at position %d: %d rows running %.3f ms, %d rows %.3f ms, 1 row "
  .. "%.3f ms, a prompt (%d tokens) %.3f ms (a stream: %d steps and its prompt): they allow 8 streams %.2fx one in one "
  .. "session, %.2fx in two on two cores; on 2 threads: %d rows %.3f ms, a prompt %.3f ms", mid, STREAMS, step8,
  STREAMS / 2, step4, step1, #p, prefill, N, cap, cap2, STREAMS, step8_2, prefill_2))
