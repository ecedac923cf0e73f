-- bench/char_gpt_bench.lua: tokens/s of the 4-layer character GPT (examples/char_gpt_model.lua, 0.8M parameters) in
-- ds and in PyTorch 1.13 (bench/torch/char_gpt.py, the same model with its own KV cache), each in its own process,
-- side by side: training (batch 32 x 64, AdamW) eagerly and compiled; greedy generation at batch 1 without the cache,
-- with it eagerly (ds.generate), with a compiled step called per token ({compile = true}), by the compiled decoding
-- loop (ds.generation_loop) and that loop saved and loaded; ds.generator with 8 requests in 8 rows.
-- usage (repo root): luajit bench/char_gpt_bench.lua [--steps 50] [--tokens 200] [--reps 3] [--threads 2] [--no-torch]
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;" .. package.path
local args = { steps = 50, batch = 32, tokens = 200, reps = 3, threads = 2, torch = true, child = false }
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--steps" or a == "--batch" or a == "--tokens" or a == "--reps" or a == "--threads" then
    args[a:sub(3)] = tonumber(arg[i + 1]) or error("char_gpt_bench: " .. a .. " takes a number", 0); i = i + 1
  elseif a == "--no-torch" then args.torch = false
  elseif a == "--child" then args.child = true
  else error("char_gpt_bench: unknown argument " .. a, 0) end
  i = i + 1
end

local V, T, MAXLEN, PROMPT, ROWS = 65, 64, 256, 8, 8

-- the measured run of ds: one RESULT line of tokens/s
local function child()
  local ds = require("ds")
  local CM = require("char_gpt_model")
  local F = ds.F
  ds.set_num_threads(args.threads)
  local B, n, reps = args.batch, args.tokens, args.reps
  if PROMPT + n - 1 > MAXLEN then error("char_gpt_bench: --tokens is at most " .. (MAXLEN - PROMPT + 1), 0) end
  local function rate(fn, tokens)
    fn() -- warm-up (plans built, memory touched)
    local t0 = ds.clock()
    for _ = 1, reps do fn() end
    return tokens * reps / (ds.clock() - t0)
  end
  local r = {}

  -- training: eager, then compiled (from the same weights; the compiled step's first call traces and plans)
  for _, compiled in ipairs { false, true } do
    ds.manual_seed(1)
    local model = CM.GPT({ vocab = V, block = MAXLEN })
    local opt = ds.optim.AdamW(model:parameters(), { lr = 2e-3, weight_decay = 0.01 })
    local function step(x, y)
      opt:zero_grad()
      local loss = F.cross_entropy(model(x):reshape(-1, V), y:reshape(-1))
      loss:backward()
      opt:step()
      return loss
    end
    if compiled then step = ds.compile(step, { ds.spec({ B, T }, "i64"), ds.spec({ B, T }, "i64") }) end
    local function one()
      local ids = ds.randint(1, V + 1, { B, T + 1 })
      step(ids:narrow(2, 1, T):contiguous(), ids:narrow(2, 2, T):contiguous()):item()
    end
    one()
    local t0 = ds.clock()
    for _ = 1, args.steps do one() end
    r[compiled and "train_compiled" or "train_eager"] = args.steps * B * T / (ds.clock() - t0)
  end

  -- generation, batch 1, greedy
  ds.manual_seed(2)
  local model = CM.GPT({ vocab = V, block = MAXLEN })
  local prompt = ds.randint(1, V + 1, { 1, PROMPT })
  r.gen_no_cache = rate(function() ds.generate(model, prompt, { max_new_tokens = n, use_cache = false }) end, n)
  r.gen_cache = rate(function() ds.generate(model, prompt, { max_new_tokens = n, compile = false }) end, n)
  r.gen_compiled_step = rate(function() ds.generate(model, prompt, { max_new_tokens = n, compile = true }) end, n)
  local loop = ds.compile(ds.generation_loop(model, { max_new_tokens = n }),
    { ds.spec({ 1, "t" }, "i64"), ds.spec({}, "i64") })
  local seed = ds.tensor(0, { dtype = "i64" })
  r.gen_loop = rate(function() loop(prompt, seed) end, n)
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  ds.save(loop, dir .. "/loop")
  local loaded = ds.load(dir .. "/loop")
  r.gen_loaded_loop = rate(function() loaded(prompt, seed) end, n)
  os.execute("rm -rf " .. dir)

  -- continuous batching: 8 requests in 8 rows, n tokens each (their prompts fed through the batched step)
  ds.manual_seed(2)
  local rows = CM.GPT({ vocab = V, block = MAXLEN, cache_batch = ROWS })
  local gen = ds.generator(rows, { slots = ROWS, max_new_tokens = n })
  r.generator_8 = rate(function()
    for _ = 1, ROWS do gen:start(prompt) end
    gen:run()
  end, ROWS * n)
  local parts = {}
  for _, k in ipairs { "train_eager", "train_compiled", "gen_no_cache", "gen_cache", "gen_compiled_step", "gen_loop",
                       "gen_loaded_loop", "generator_8" } do
    parts[#parts + 1] = string.format("%s=%.1f", k, r[k])
  end
  print("RESULT " .. table.concat(parts, " "))
end

if args.child then return child() end

local function run(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  local line = out:match("RESULT[^\n]*")
  if not line then error("no result from: " .. cmd .. "\n" .. out, 0) end
  local r = {}
  for k, v in line:gmatch("([%w_]+)=([%d%.]+)") do r[k] = tonumber(v) end
  return r
end

local env = string.format("OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d", args.threads, args.threads)
local common = string.format("--steps %d --batch %d --tokens %d --reps %d --threads %d", args.steps, args.batch,
  args.tokens, args.reps, args.threads)
local d = run(string.format("%s luajit bench/char_gpt_bench.lua --child %s", env, common))
local t = args.torch and run(string.format("%s /usr/bin/python3 bench/torch/char_gpt.py %s", env, common)) or {}

print(string.format("4-layer char GPT (0.8M parameters), %d threads: training batch %d x %d (%d steps), greedy "
  .. "generation of %d tokens after %d at batch 1 (%d runs); tokens/s", args.threads, args.batch, T, args.steps,
  args.tokens, PROMPT, args.reps))
print(string.format("%-44s %12s %12s %8s", "", "ds", "PyTorch", "ratio"))
local function row(name, dk, tk, note)
  local ratio = (t[tk] and d[dk]) and string.format("%.2fx", d[dk] / t[tk]) or "-"
  print(string.format("%-44s %12.0f %12s %8s%s", name, d[dk], t[tk] and string.format("%.0f", t[tk]) or "-", ratio,
    note or ""))
end
row("train, eager", "train_eager", "train_eager")
row("train, compiled step (PyTorch eager)", "train_compiled", "train_eager", "  target >= 1.4x")
row("generate, no cache", "gen_no_cache", "gen_no_cache")
row("generate, KV cache, eager (ds.generate)", "gen_cache", "gen_cache")
row("generate, KV cache, {compile = true}", "gen_compiled_step", "gen_cache")
row("generate, compiled decoding loop", "gen_loop", "gen_cache", "  target >= 2x")
row("generate, decoding loop saved and loaded", "gen_loaded_loop", "gen_cache")
row("ds.generator, 8 requests in 8 rows (total)", "generator_8", "gen_cache")
print(string.format("ds.generator 8 rows / compiled step alone: %.2fx (target for 8 streams >= 3x)",
  d.generator_8 / d.gen_compiled_step))
