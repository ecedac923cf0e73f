-- tests/generate_spec.lua: ds.generate and ds.generation_loop: greedy decoding equals a hand-written token-by-token
-- loop over model:step; compile = true (a compiled step per token) and the default (the compiled graph loop, or the
-- compiled step when streaming) give the eager loop's bits; the graph loop eagerly ==
-- compiled == loaded bitwise (greedy, and sampled for the same seed, with top-k, top-p and eos); the stream callback
-- sees every token; use_cache = false agrees; ds.generator's rows joining and leaving a running batch each equal the
-- request alone (greedy and sampled with a seed each; every row a step, or by slot: the running rows only, a prompt in
-- one call); refusals.
local ds = require("ds")
local H = require("helpers")
package.path = "./examples/?.lua;" .. package.path
local CM = require("char_gpt_model")

local V = 11
local function i64(v) return ds.tensor(v, { dtype = "i64" }) end
local function model(cache_batch)
  ds.manual_seed(5)
  return CM.GPT({ vocab = V, embed = 16, heads = 2, layers = 2, block = 24, cache_batch = cache_batch })
end
local SPECS = { ds.spec({ 1, "t" }, "i64"), ds.spec({}, "i64") }
local dir = H.tmp_dir()

-- greedy continuation by hand: the prompt through model:step at once, then one token at a time
local function by_hand(m, prompt, n)
  return ds.no_grad(function()
    local T = prompt:size(2)
    local tok = m:step(prompt, i64({ 1 })):narrow(2, T, 1):reshape(prompt:size(1), V):argmax(-1, true)
    local out = { tok }
    for p = T + 1, T + n - 1 do
      tok = m:step(tok, i64({ p })):reshape(prompt:size(1), V):argmax(-1, true)
      out[#out + 1] = tok
    end
    return ds.cat({ prompt, ds.cat(out, 2) }, 2)
  end)
end

-- the loop's tokens eagerly, compiled, and loaded from disk (same model weights, fresh caches each time)
local function three_ways(opts, prompt, seed, name)
  local eager = { ds.generation_loop(model(), opts)(prompt, seed) }
  local cg = ds.compile(ds.generation_loop(model(), opts), SPECS)
  local compiled = { cg(prompt, seed) }
  ds.save(cg, dir .. "/" .. name)
  local loaded = { ds.load(dir .. "/" .. name)(prompt, seed) }
  return eager, compiled, loaded
end

local function assert_same3(e, c, l)
  for i = 1, 2 do
    assert(H.bitwise(e[i], c[i]), "compiled result " .. i .. ": " .. tostring(e[i]) .. " vs " .. tostring(c[i]))
    assert(H.bitwise(e[i], l[i]), "loaded result " .. i .. ": " .. tostring(e[i]) .. " vs " .. tostring(l[i]))
  end
end

describe("ds.generate", function()
  local prompt = i64({ { 3, 1, 4, 1, 5 } })

  it("greedy: equals the hand-written token-by-token loop; the stream sees each token as it comes", function()
    local seen = {}
    local out = ds.generate(model(), prompt, { max_new_tokens = 9,
      stream = function(ids) seen[#seen + 1] = ids[1] end })
    assert(H.bitwise(by_hand(model(), prompt, 9), out))
    assert.same({ 1, 14 }, out:size())
    local gen = {}
    for j = 6, 14 do gen[#gen + 1] = out[1][j]:item() end
    assert.same(gen, seen)
  end)

  it("compile = true: a compiled model:step per token; the same bits greedy, sampled and with eos, streamed", function()
    local eos = ds.generate(model(), prompt, { max_new_tokens = 9 })[1][8]:item()   -- the third generated token
    for _, o in ipairs { { max_new_tokens = 9 }, { max_new_tokens = 9, temperature = 0.8, top_k = 6, seed = 3 },
                         { max_new_tokens = 9, eos = eos } } do
      local seen = {}
      o.stream = function(ids) seen[#seen + 1] = ids[1] end
      o.compile = false
      local c = ds.generate(model(), prompt, o)
      local eager_seen = seen
      seen = {}
      o.compile = true
      local m = model()
      local compiled = ds.generate(m, prompt, o)
      assert(H.bitwise(c, compiled))
      assert.same(eager_seen, seen)
      assert(H.bitwise(c, ds.generate(m, prompt, o)))   -- the compiled step is kept for the model and its batch
    end
    H.raises(function() ds.generate(model(), prompt, { compile = true, use_cache = false }) end,
      "generate: compile = true compiles model:step")
  end)

  it("by default: the compiled graph loop (no stream) or step (stream), the eager loop's bits; seeded or not", function()
    local eos = ds.generate(model(), prompt, { max_new_tokens = 9, compile = false })[1][8]:item()
    local SAMPLE = { max_new_tokens = 9, temperature = 0.8, top_k = 6, top_p = 0.9 }
    for _, o in ipairs { { max_new_tokens = 9 }, { max_new_tokens = 9, temperature = 0.8, top_k = 6, seed = 3 },
                         { max_new_tokens = 12, eos = eos }, { max_new_tokens = 9, temperature = 1.1, eos = eos,
                         seed = 4 }, SAMPLE } do
      -- without a seed the draws continue the generator's stream: each call starts from the same state
      local function from(seed, compile)
        ds.manual_seed(11)
        local m = model()
        ds.manual_seed(seed)
        o.compile = compile
        return ds.generate(m, prompt, o), ds.get_rng_state()
      end
      local e, e_rng = from(21, false)
      local c, c_rng = from(21, nil)
      assert(H.bitwise(e, c), tostring(e) .. " vs " .. tostring(c))
      assert(H.bitwise(e_rng, c_rng))   -- the generator moved on as eagerly
      local seen = {}
      o.stream = function(ids) seen[#seen + 1] = ids[1] end
      local s = from(21, nil)
      o.stream = nil
      assert(H.bitwise(e, s))
      assert.equal(e:size(2) - 5, #seen)
    end
    -- the compiled loop is kept per model and options: a second prompt length plans again, same bits as eagerly
    local m = model()
    local short = i64({ { 2, 7 } })
    ds.generate(m, prompt, { max_new_tokens = 6 })
    assert(H.bitwise(ds.generate(model(), short, { max_new_tokens = 6, compile = false }),
      ds.generate(m, short, { max_new_tokens = 6 })))
    H.raises(function() ds.generate(model(), prompt, { max_new_tokens = 30 }) end, "generate", "caches hold 24")
  end)

  it("without the cache (model(ids) over the whole sequence) gives the same greedy tokens", function()
    local a = ds.generate(model(), prompt, { max_new_tokens = 9 })
    local b = ds.generate(model(), prompt, { max_new_tokens = 9, use_cache = false })
    assert.same(a:totable(), b:totable())
  end)

  it("the graph loop: greedy eager == compiled == loaded bitwise, one compiled graph for any prompt length", function()
    local e, c, l = three_ways({ max_new_tokens = 8 }, prompt, i64(0), "greedy")
    assert_same3(e, c, l)
    assert(H.bitwise(ds.generate(model(), prompt, { max_new_tokens = 8 }):narrow(2, 6, 8), e[1]))
    local cg = ds.compile(ds.generation_loop(model(), { max_new_tokens = 4 }), SPECS)
    for _, p in ipairs { { { 2 } }, { { 2, 7, 1 } }, { { 9, 9, 9, 9, 9, 9 } } } do
      assert(H.bitwise(cg(i64(p), i64(0)), by_hand(model(), i64(p), 4):narrow(2, #p[1] + 1, 4)))
    end
  end)

  it("sampled (temperature, top-k, top-p): the same seed gives the same tokens eagerly, compiled and loaded", function()
    local opts = { max_new_tokens = 10, temperature = 0.8, top_k = 6, top_p = 0.9 }
    local e, c, l = three_ways(opts, prompt, i64(42), "sampled")
    assert_same3(e, c, l)
    local g = ds.generate(model(), prompt, { max_new_tokens = 10, temperature = 0.8, top_k = 6, top_p = 0.9,
      seed = 42 })
    assert(H.bitwise(g:narrow(2, 6, 10), e[1]))
    local other = ds.generate(model(), prompt, { max_new_tokens = 10, temperature = 0.8, top_k = 6, top_p = 0.9,
      seed = 43 })
    assert.is_false(H.bitwise(g, other))   -- another seed, another continuation (fixed seeds: deterministic)
  end)

  it("a batch of prompts: each row's greedy tokens are the row's alone; a row done at eos repeats it", function()
    local two = i64({ { 3, 1, 4 }, { 2, 7, 1 } })
    local both = ds.generate(model(2), two, { max_new_tokens = 7 })
    for r = 1, 2 do
      assert(H.bitwise(both:narrow(1, r, 1), ds.generate(model(1), two:narrow(1, r, 1), { max_new_tokens = 7 })))
    end
    local cg = ds.compile(ds.generation_loop(model(2), { max_new_tokens = 7 }), { ds.spec({ 2, "t" }, "i64"),
      ds.spec({}, "i64") })
    assert(H.bitwise(both:narrow(2, 4, 7), (cg(two, i64(0)))))
    local eos = both[1][5]:item()                                  -- row 1's second token
    local stopped = ds.generate(model(2), two, { max_new_tokens = 7, eos = eos }):totable()
    for r = 1, 2 do
      local done = false
      for j = 4, #stopped[r] do
        assert.equal(done and eos or both[r][j]:item(), stopped[r][j])
        done = done or stopped[r][j] == eos
      end
    end
  end)

  it("eos: a row that draws it is done and repeats it; the loop stops when all rows are done", function()
    local free = ds.generate(model(), prompt, { max_new_tokens = 12 })
    local eos = free[1][8]:item()   -- the third generated token
    local first = 8
    for j = 6, 8 do if free[1][j]:item() == eos then first = j; break end end
    local out = ds.generate(model(), prompt, { max_new_tokens = 12, eos = eos })
    assert.same({ 1, first }, out:size())
    local e, c, l = three_ways({ max_new_tokens = 12, eos = eos }, prompt, i64(0), "eos")
    assert_same3(e, c, l)
    assert.equal(first - 5, e[2]:item())
  end)

  it("refuses what it cannot do, naming the call", function()
    H.raises(function() ds.generate(model(), prompt, { max_tokens = 3 }) end, "generate", "unknown option 'max_tokens'")
    H.raises(function() ds.generate(model(), ds.tensor({ { 1, 2 } }), {}) end, "generate: prompt_ids must be an i64")
    H.raises(function() ds.generate({}, prompt, {}) end, "generate", "step")
    H.raises(function() ds.generate(model(), prompt, { max_new_tokens = 30 }) end, "model's caches hold 24")
    H.raises(function() ds.generation_loop(model(), { temperature = 1 })(prompt, ds.tensor(1.5)) end,
      "generation_loop: seed must be an integer or an i64 tensor")
  end)
end)

describe("ds.generator (continuous batching)", function()
  local prompts = { { 3, 1, 4, 1, 5 }, { 2, 7 }, { 9, 9, 9, 1, 2, 3, 4 }, { 5 } }

  -- each prompt's 6 tokens from ds.generate alone (a model whose caches hold one row)
  local function alone(o, i)
    local g = ds.generate(model(1), i64({ prompts[i] }), { max_new_tokens = 6, temperature = o.temperature,
      top_k = o.top_k, seed = o.temperature and 100 + i or nil })
    return g:narrow(2, #prompts[i] + 1, 6):reshape(-1):totable()
  end

  for _, o in ipairs { {}, { temperature = 0.8, top_k = 6 }, { by_slot = true },
                       { temperature = 0.8, top_k = 6, by_slot = true } } do
    it((o.temperature and "sampled (a seed per request)" or "greedy")
      .. (o.by_slot and ", by slot (running rows only, prompts in one call)" or "")
      .. ": requests joining and leaving a running batch of 3 rows each get their tokens alone", function()
      local gen = ds.generator(model(3), { slots = 3, max_new_tokens = 6, temperature = o.temperature,
        top_k = o.top_k, by_slot = o.by_slot })
      local ids, streamed = {}, {}
      local function start(i)
        return gen:start(prompts[i], { seed = 100 + i, stream = function(tok, id)
          streamed[id] = streamed[id] or {}
          table.insert(streamed[id], tok)
        end })
      end
      ids[1] = start(1)
      gen:step(); gen:step()
      ids[2], ids[3] = start(2), start(3)
      local none, why = gen:start(prompts[4])
      assert.is_nil(none); assert.equal("full", why)
      local steps = 0
      while gen:active() > 0 do
        gen:step(); steps = steps + 1
        if not ids[4] then ids[4] = start(4) end   -- joins once a row is free
      end
      for i = 1, 4 do
        local toks, done = gen:result(ids[i])
        assert.is_true(done)
        assert.same(alone(o, i), toks)
        assert.same(toks, streamed[ids[i]])
      end
    end)
  end

  for _, by_slot in ipairs { false, true } do
  it("a cancelled request leaves its row; eos ends a request early; bad arguments are refused"
    .. (by_slot and " (by slot)" or ""), function()
    local gen = ds.generator(model(2), { slots = 2, max_new_tokens = 5, by_slot = by_slot })
    local a = gen:start({ 3, 1 })
    local b = gen:start(i64({ 4, 4, 4 }))
    gen:step()
    gen:cancel(a)
    assert.equal(1, gen:active())
    local c = gen:start({ 3, 1 })
    gen:run()
    local free = ds.generate(model(1), i64({ { 3, 1 } }), { max_new_tokens = 5 }):narrow(2, 3, 5):reshape(-1):totable()
    assert.same(free, (gen:result(c)))
    local stop = ds.generator(model(2), { slots = 2, max_new_tokens = 5, eos = free[2], by_slot = by_slot })
    local d = stop:start({ 3, 1 })
    stop:run()
    assert.same(free[1] == free[2] and { free[1] } or { free[1], free[2] }, (stop:result(d)))
    assert.is_true(select(2, gen:result(b)))
    H.raises(function() ds.generator(model(2), {}) end, "generator", "slots")
    H.raises(function() gen:start({}) end, "generator:start", "non-empty")
    H.raises(function() gen:start({ 1 }, { max_new_tokens = 40 }) end, "generator:start", "caches hold 24")
    H.raises(function() gen:start({ 1 }, { top = 3 }) end, "generator:start", "unknown option 'top'")
  end)
  end

  it("by slot: a step runs only the running rows, a prompt is one call (eager: the cache rows of idle slots stay "
    .. "untouched)", function()
    local m = model(3)
    local calls = {}
    local counted = { max_len = m.max_len, step = function(_, ids, pos, slots)
      calls[#calls + 1] = { ids:size(1), ids:size(2), slots:totable() }
      return m:step(ids, pos, slots)
    end }
    local gen = ds.generator(counted, { slots = 3, max_new_tokens = 3, by_slot = true, compile = false })
    local id = gen:start({ 3, 1, 4, 1, 5 })
    assert.equal(3, gen:run())
    assert.same({ { 1, 5, { 1 } }, { 1, 1, { 1 } }, { 1, 1, { 1 } } }, calls)   -- 5 prompt tokens: one call
    assert.same(ds.generate(model(1), i64({ { 3, 1, 4, 1, 5 } }), { max_new_tokens = 3 }):narrow(2, 6, 3)
      :reshape(-1):totable(), (gen:result(id)))
    local rows = m.blocks[1].cache.k_cache:reshape(3, -1)
    assert.is_true(rows:narrow(1, 2, 2):eq(0):all():item())
    assert.is_false(rows:narrow(1, 1, 1):eq(0):all():item())
  end)

  it("by slot: a prompt of 16 tokens or more goes in chunks of 16 * 2^k and its last T % 16 tokens, each answer as "
    .. "alone", function()
    local m = model(3)
    local calls = {}
    local counted = { max_len = m.max_len, step = function(_, ids, pos, slots)
      calls[#calls + 1] = { ids:size(1), ids:size(2), pos:totable(), slots:totable() }
      return m:step(ids, pos, slots)
    end }
    local long = {}
    for i = 1, 19 do long[i] = i % 7 + 1 end
    local ask = { long, prompts[2], prompts[3] }   -- 19, 2 and 7 tokens
    for _, compile in ipairs { false, true } do
      calls = {}
      local gen = ds.generator(compile and model(3) or counted, { slots = 3, max_new_tokens = 4, by_slot = true,
        compile = compile })
      local ids = { gen:start(ask[1]), gen:start(ask[2]), gen:start(ask[3]) }
      gen:step()
      if not compile then   -- row 1: 16 at 1, then 3 at 17; rows 2 and 3: one call each
        assert.same({ { 1, 16, { 1 }, { 1 } }, { 1, 3, { 17 }, { 1 } }, { 1, 2, { 1 }, { 2 } },
          { 1, 7, { 1 }, { 3 } } }, calls)
      end
      gen:run()
      for i = 1, 3 do
        local want = ds.generate(model(1), i64({ ask[i] }), { max_new_tokens = 4 })
        assert.same(want:narrow(2, #ask[i] + 1, 4):reshape(-1):totable(), (gen:result(ids[i])), "prompt " .. i)
      end
    end
  end)
end)

describe("ds.generate's compiled caches", function()
  it("do not keep a model alive: a model dropped after ds.generate (compiled loop and step) is collected", function()
    local gone = setmetatable({}, { __mode = "v" })
    do
      local m = model()
      gone[1] = m
      ds.generate(m, i64({ { 3, 1 } }), { max_new_tokens = 3 })                   -- the compiled graph loop
      ds.generate(m, i64({ { 3, 1 } }), { max_new_tokens = 3, compile = true })   -- the compiled step
      assert.is_not_nil(gone[1])
    end
    collectgarbage(); collectgarbage()
    assert.is_nil(gone[1], "the model is still reachable after ds.generate")
  end)
end)
