-- examples/char_gpt.lua: a 4-layer character-level GPT (0.8M parameters, examples/char_gpt_model.lua) trained on the
-- license texts every Debian system has (/usr/share/common-licenses), eagerly and with the train step compiled (the
-- same losses bit for bit); then text generated with ds.generate (with and without the KV cache), by the decoding
-- loop compiled (ds.generation_loop: one graph) and by that loop saved and loaded again: greedy and sampled; the
-- weights saved (ds.save_state) and loaded into a model with caches for two rows.
--   luajit examples/char_gpt.lua [--steps N] [--batch B] [--generate N] [--out DIR] [--threads N]
package.path = "./examples/?.lua;" .. package.path
local ds = require("ds")
local CM = require("char_gpt_model")
local F = ds.F

local LICENSES = "/usr/share/common-licenses"
local NAMES = { "Apache-2.0", "Artistic", "BSD", "CC0-1.0", "GFDL-1.2", "GFDL-1.3", "GPL-1", "GPL-2", "GPL-3",
                "LGPL-2", "LGPL-2.1", "LGPL-3", "MPL-1.1", "MPL-2.0" }
local PROMPT = "This License "

-- the license texts of this system, concatenated (those of NAMES that exist)
local function corpus()
  local parts = {}
  for _, name in ipairs(NAMES) do
    local f = io.open(LICENSES .. "/" .. name, "rb")
    if f then parts[#parts + 1] = f:read("*a"); f:close() end
  end
  if #parts == 0 then error("char_gpt: no license texts under " .. LICENSES, 0) end
  return table.concat(parts, "\n")
end

-- text -> ids (1-based, i64 (n)), the sorted characters, char -> id
local function encode(text)
  local seen, chars = {}, {}
  for c in text:gmatch(".") do
    if not seen[c] then seen[c] = true; chars[#chars + 1] = c end
  end
  table.sort(chars)
  local id = {}
  for i, c in ipairs(chars) do id[c] = i end
  local ids = {}
  for i = 1, #text do ids[i] = id[text:sub(i, i)] end
  return ds.tensor(ids, { dtype = "i64" }), chars, id
end

local function decode(ids, chars)
  local out = {}
  for i, k in ipairs(ids) do out[i] = chars[k] end
  return table.concat(out)
end

-- random windows of the text: x (B, T) and the next characters y (B, T)
local function batch(ids, B, T)
  local starts = ds.randint(1, ids:numel() - T + 1, { B, 1 })
  local idx = (starts + ds.arange(T, { dtype = "i64" })):reshape(-1)
  return ids:index_select(1, idx):reshape(B, T), ids:index_select(1, idx + 1):reshape(B, T)
end

-- a model (caches for cache_batch rows), its AdamW optimizer and its train step (x, y) -> loss, compiled for
-- (batch, block) if opts.compile
local function setup(vocab, opts)
  ds.manual_seed(opts.seed or 7)
  local model = CM.GPT({ vocab = vocab, block = opts.block or 64, cache_batch = opts.cache_batch or 1 })
  local opt = ds.optim.AdamW(model:parameters(), { lr = opts.lr or 2e-3, weight_decay = 0.01 })
  local function step(x, y)
    opt:zero_grad()
    local loss = F.cross_entropy(model(x):reshape(-1, vocab), y:reshape(-1))
    loss:backward()
    opt:step()
    return loss
  end
  if opts.compile then
    local B, T = opts.batch or 32, opts.block or 64
    step = ds.compile(step, { ds.spec({ B, T }, "i64", "x"), ds.spec({ B, T }, "i64", "y") })
  end
  return model, step
end

-- train for opts.steps steps on batches drawn from seed 100: the model and the losses (Lua numbers)
local function train(ids, vocab, opts)
  local model, step = setup(vocab, opts)
  ds.manual_seed(100)
  local losses = {}
  for i = 1, opts.steps do
    local x, y = batch(ids, opts.batch or 32, opts.block or 64)
    losses[i] = step(x, y):item()
  end
  return model, losses
end

-- the generations of model after prompt (a (1, T) i64 tensor), n tokens each, as token lists: greedy with and
-- without the cache, through a compiled step, by the compiled loop and by the loop saved to dir and loaded; sampled (temperature 0.8, top-k 20,
-- seed 1) eagerly, compiled and loaded. stream(token): each token of the first generation as it comes.
local function generations(model, prompt, n, dir, stream)
  local T = prompt:size(2)
  local function tail(ids) return ids:narrow(2, T + 1, ids:size(2) - T):reshape(-1):totable() end
  local function counted(tokens, count) return tokens:narrow(2, 1, count:item()):reshape(-1):totable() end
  local specs = { ds.spec({ 1, "t" }, "i64", "prompt"), ds.spec({}, "i64", "seed") }
  local sampling = { temperature = 0.8, top_k = 20 }
  local r = {}
  r.greedy = tail(ds.generate(model, prompt, { max_new_tokens = n, stream = stream and function(t) stream(t[1]) end }))
  r.greedy_no_cache = tail(ds.generate(model, prompt, { max_new_tokens = n, use_cache = false }))
  r.greedy_compiled_step = tail(ds.generate(model, prompt, { max_new_tokens = n, compile = true }))
  local greedy_loop = ds.compile(ds.generation_loop(model, { max_new_tokens = n }), specs)
  r.greedy_compiled = counted(greedy_loop(prompt, ds.tensor(0, { dtype = "i64" })))
  ds.save(greedy_loop, dir .. "/char_gpt_greedy")
  r.greedy_loaded = counted(ds.load(dir .. "/char_gpt_greedy")(prompt, ds.tensor(0, { dtype = "i64" })))
  r.sampled = tail(ds.generate(model, prompt, { max_new_tokens = n, temperature = sampling.temperature,
    top_k = sampling.top_k, seed = 1 }))
  local sampled_loop = ds.compile(ds.generation_loop(model, { max_new_tokens = n, temperature = sampling.temperature,
    top_k = sampling.top_k }), specs)
  r.sampled_compiled = counted(sampled_loop(prompt, ds.tensor(1, { dtype = "i64" })))
  ds.save(sampled_loop, dir .. "/char_gpt_sampled")
  r.sampled_loaded = counted(ds.load(dir .. "/char_gpt_sampled")(prompt, ds.tensor(1, { dtype = "i64" })))
  return r
end

-- the whole example: opts {steps, batch, generate, out, stream}; returns {eager_losses, compiled_losses, chars,
-- generations (token lists), params}
local function run(opts)
  local ids, chars, id = encode(corpus())
  local o = { steps = opts.steps, batch = opts.batch, block = 64 }
  local _, eager_losses = train(ids, #chars, o)
  o.compile = true
  local model, compiled_losses = train(ids, #chars, o)
  local p = {}
  for i = 1, #PROMPT do p[i] = id[PROMPT:sub(i, i)] end
  os.execute("mkdir -p '" .. opts.out .. "'")
  local stream = opts.stream and function(t) opts.stream(chars[t]) end
  local prompt = ds.tensor({ p }, { dtype = "i64" })
  local gens = generations(model, prompt, opts.generate, opts.out, stream)
  -- the weights saved and loaded into a new model whose caches hold two rows (caches are not in the state_dict)
  ds.save_state(model:state_dict(), opts.out .. "/char_gpt_weights.safetensors")
  local two = CM.GPT({ vocab = #chars, block = o.block, cache_batch = 2 })
  two:load_state_dict((ds.load_state(opts.out .. "/char_gpt_weights.safetensors")))
  local rows = ds.generate(two, ds.cat({ prompt, prompt }), { max_new_tokens = opts.generate })
  gens.reloaded_rows = rows:narrow(2, #PROMPT + 1, opts.generate):totable()
  return { eager_losses = eager_losses, compiled_losses = compiled_losses, chars = chars, generations = gens,
           params = CM.count(model), text_bytes = ids:numel() }
end

local function parse_args(argv)
  local o = { steps = 1000, batch = 32, generate = 50, out = "out/char_gpt", threads = nil }
  local i = 1
  while i <= #argv do
    local a, v = argv[i], argv[i + 1]
    if a == "--steps" or a == "--batch" or a == "--generate" or a == "--threads" then
      o[a:sub(3)] = tonumber(v) or error("char_gpt: " .. a .. " takes a number", 0)
    elseif a == "--out" then o.out = v or error("char_gpt: --out takes a directory", 0)
    else
      error("char_gpt: unknown argument " .. a .. " (--steps N, --batch B, --generate N, --out DIR, --threads N)", 0)
    end
    i = i + 2
  end
  if o.generate + #PROMPT > 64 then
    error("char_gpt: --generate is at most " .. (64 - #PROMPT) .. " (64 positions)", 0)
  end
  return o
end

local function same(a, b) return table.concat(a, ",") == table.concat(b, ",") end

local function main(argv)
  local o = parse_args(argv)
  if o.threads then ds.set_num_threads(o.threads) end
  io.write("greedy text, streamed as generated: ", PROMPT)
  o.stream = function(c) io.write(c); io.flush() end
  local t0 = ds.clock()
  local r = run(o)
  print()
  local n = #r.eager_losses
  print(string.format("%d parameters, %d characters of license text, %d steps of batch %d: loss %.4f -> %.4f (eager) "
    .. "and %.4f -> %.4f (compiled), %s (%.1f s in all)", r.params, r.text_bytes, n, o.batch, r.eager_losses[1],
    r.eager_losses[n], r.compiled_losses[1], r.compiled_losses[n],
    same(r.eager_losses, r.compiled_losses) and "bitwise equal" or "DIFFERENT", ds.clock() - t0))
  local g = r.generations
  print("greedy, without the cache:   " .. PROMPT .. decode(g.greedy_no_cache, r.chars))
  print(string.format("greedy eager == compiled step == compiled loop == loaded loop: %s",
    tostring(same(g.greedy, g.greedy_compiled_step) and same(g.greedy, g.greedy_compiled)
    and same(g.greedy, g.greedy_loaded))))
  print(string.format("weights saved, loaded into a model with 2 cache rows: both rows greedy as before: %s",
    tostring(same(g.reloaded_rows[1], g.greedy) and same(g.reloaded_rows[2], g.greedy))))
  print("sampled (t 0.8, top-k 20, seed 1): " .. PROMPT .. decode(g.sampled, r.chars))
  print(string.format("sampled eager == compiled loop == loaded loop: %s", tostring(same(g.sampled, g.sampled_compiled)
    and same(g.sampled, g.sampled_loaded))))
  print("saved decoding loops: " .. o.out .. "/char_gpt_greedy.json, " .. o.out .. "/char_gpt_sampled.json")
end

if arg and arg[0] and arg[0]:match("char_gpt%.lua$") then main(arg) end
return { corpus = corpus, encode = encode, decode = decode, batch = batch, setup = setup, train = train,
         generations = generations, run = run, PROMPT = PROMPT }
