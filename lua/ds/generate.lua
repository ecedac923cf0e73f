-- generate.lua: ds.generate and ds.generation_loop: autoregressive decoding through a model's KV caches as one graph
-- loop (ds.while_loop: the model step, the sampling and the stop condition inside), the same ops eagerly, traced,
-- compiled and loaded; or token by token through a compiled step (docs/GENERATION.md: the model contract).
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local Tensor = require("ds.tensor")
local S = require("ds.shape")
local autograd = require("ds.autograd")
local random = require("ds.random")
local F = require("ds.ops.common").functions
local Fn = require("ds.nn.functional")
local control = require("ds.control")
local trace = require("ds.trace")
local lazy = require("ds.lazy")

local M = {}

local DECODE = { max_new_tokens = { "integer", min = 1 }, temperature = { "number", min = 0 },
                 top_k = { "integer", min = 1 }, top_p = { "number", min = 0, max = 1 },
                 min_p = { "number", min = 0, max = 1 }, eos = "integer" }

-- the decoding options of opname, checked (extra: more allowed options), with their defaults
function M.decode_options(opts, opname, extra)
  local allowed = {}
  for k, v in pairs(DECODE) do allowed[k] = v end
  for k, v in pairs(extra or {}) do allowed[k] = v end
  local o = options.check(opts, opname, allowed)
  o.max_new_tokens = o.max_new_tokens or 20
  o.temperature = o.temperature or 0
  return o
end

function M.sampled(o) return o.temperature > 0 end

-- the next token of each row: logits (B, V) -> (B, 1) i64, 1-based (greedy at temperature 0)
function M.pick(logits, o)
  return Fn.sample_logits(logits, { temperature = o.temperature, top_k = o.top_k, top_p = o.top_p, min_p = o.min_p })
end

local function check_model(model, opname)
  if type(model) ~= "table" or type(model.step) ~= "function" then
    errors.raise(opname .. ": model must have a method step(ids (B, t) i64, pos (1) i64) -> logits (B, t, V) "
      .. "(docs/GENERATION.md)")
  end
  if type(model.max_len) ~= "number" then
    errors.raise(opname .. ": model.max_len (the positions its KV caches hold) must be a number")
  end
end

local function check_prompt(prompt, opname)
  if not Tensor.is_tensor(prompt) or prompt.dtype ~= "i64" or #prompt._shape ~= 2 then
    errors.raise(string.format("%s: prompt_ids must be an i64 tensor (batch, length) of 1-based token ids, got %s",
      opname, Tensor.is_tensor(prompt) and (prompt.dtype .. " " .. S.str(prompt._shape)) or type(prompt)))
  end
end

-- logits of model:step, checked: (B, t, V)
local function step(model, ids, pos, opname)
  local logits = model:step(ids, pos)
  if not Tensor.is_tensor(logits) or #logits._shape ~= 3 then
    errors.raise(string.format("%s: model:step must return logits (batch, t, vocab), got %s", opname,
      Tensor.is_tensor(logits) and S.str(logits._shape) or type(logits)))
  end
  return logits
end

-- the decoding graph of model: loop(prompt (B, T) i64, seed () i64) -> tokens (B, N) i64, count () i64.
-- The prompt runs through the caches at once (positions 1..T), then a while_loop draws token after token
-- (at most N = max_new_tokens) until every row has drawn eos; rows that are done repeat eos. With
-- temperature > 0 and a seed, ds's generator is reseeded with it first (as ds.manual_seed(seed)). on_token(tok (B, 1)):
-- called per token when the loop runs eagerly (not while tracing).
function M.loop(model, opts, on_token)
  check_model(model, "generation_loop")
  local o = M.decode_options(opts, "generation_loop")
  local N, eos = o.max_new_tokens, o.eos
  local function emit(tok) if on_token and not state.trace then on_token(tok) end end
  return function(prompt, seed)
    check_prompt(prompt, "generation_loop")
    if type(seed) == "number" then seed = F.tensor(seed, { dtype = "i64" }) end
    if seed ~= nil and (not Tensor.is_tensor(seed) or seed.dtype ~= "i64" or S.numel(seed._shape) ~= 1) then
      errors.raise("generation_loop: seed must be an integer or an i64 tensor of one element")
    end
    local B, T = prompt._shape[1], prompt._shape[2]
    if type(T) == "number" and T + N - 1 > model.max_len then
      errors.raise(string.format("generation_loop: a prompt of %d tokens and %d new ones need %d positions; the "
        .. "model's caches hold %d (model.max_len)", T, N, T + N - 1, model.max_len))
    end
    return autograd.no_grad(function()
      if M.sampled(o) and seed ~= nil then   -- the generator's state {seed, offset 0}
        random.state():copy_(F.cat({ seed:reshape(1), F.zeros({ 1 }, { dtype = "i64" }) }))
      end
      local logits = step(model, prompt, F.ones({ 1 }, { dtype = "i64" }), "generation_loop")   -- (B, T, V)
      local V = logits._shape[3]
      local tok = M.pick(logits:narrow(2, T, 1):reshape(B, V), o)                            -- (B, 1)
      emit(tok)
      local out = F.zeros({ B, N }, { dtype = "i64" }):index_copy(2, F.ones({ 1 }, { dtype = "i64" }), tok)
      local done = eos and tok:eq(eos) or F.zeros({ B, 1 }, { dtype = "bool" })              -- (B, 1)
      local pos = F.arange(T + 1, T + 2, { dtype = "i64" })                                   -- (1) the next position
      local count = F.ones({}, { dtype = "i64" })
      local _, out_, _, _, count_ = control.while_loop(
        function(_, _, d, _, n) return F.logical_and(n:lt(N), F.logical_not(d:all())) end,
        function(t, acc, d, p, n)
          local nxt = M.pick(step(model, t, p, "generation_loop"):reshape(B, V), o)
          if eos then
            nxt = F.where(d, F.full({ B, 1 }, eos, { dtype = "i64" }), nxt)
            d = F.logical_or(d, nxt:eq(eos))
          end
          emit(nxt)
          return nxt, acc:index_copy(2, (n + 1):reshape(1), nxt), d, p + 1, n + 1
        end, { tok, out, done, pos, count })
      return out_, count_
    end)
  end
end

-- ds.generation_loop(model, opts) -> loop(prompt (B, T) i64, seed () i64) -> tokens (B, max_new_tokens) i64, count ()
-- i64: decoding as one graph loop (model:step, the sampling and the eos test in a while_loop), to ds.compile with specs
-- ds.spec({B, "t"}, "i64"), ds.spec({}, "i64") and ds.save; opts: max_new_tokens, temperature, top_k, top_p, min_p, eos
function M.generation_loop(model, opts) return M.loop(model, opts) end

-- the prompt ids and the first count generated ones: (B, T + count)
local function joined(prompt, tokens, count)
  return F.cat({ prompt, tokens:narrow(2, 1, count) }, 2)
end

-- decoding in Lua, token by token, by the graph loop's rules (its draws in its order, eos): logits_of(n, ids, tok) ->
-- (B, V) the logits of generated token n given the ids so far (B, T + n - 1) and the last token tok (B, 1)
local function token_by_token(model, prompt, o, stream, logits_of)
  local B, T = prompt._shape[1], prompt._shape[2]
  if T + o.max_new_tokens - 1 > model.max_len then
    errors.raise(string.format("generate: a prompt of %d tokens and %d new ones need %d positions; the model's "
      .. "caches hold %d (model.max_len)", T, o.max_new_tokens, T + o.max_new_tokens - 1, model.max_len))
  end
  return autograd.no_grad(function()
    if M.sampled(o) and o.seed then random.manual_seed(o.seed) end
    local ids, tok, done = prompt, nil, nil
    for n = 1, o.max_new_tokens do
      local nxt = M.pick(logits_of(n, ids, tok), o)
      if o.eos then
        if done then nxt = F.where(done, F.full({ B, 1 }, o.eos, { dtype = "i64" }), nxt) end
        done = done and F.logical_or(done, nxt:eq(o.eos)) or nxt:eq(o.eos)
      end
      if stream then stream(nxt) end
      ids, tok = F.cat({ ids, nxt }, 2), nxt
      if done and done:all():item() then break end
    end
    return ids
  end)
end

-- the last position's logits (B, V) of logits (B, t, V)
local function last(logits)
  return logits:narrow(2, logits._shape[2], 1):reshape(logits._shape[1], logits._shape[3])
end

-- without the caches: model(ids) (model:forward: ids (B, T) -> logits (B, T, V)) over the whole sequence per token
local function uncached(model, prompt, o, stream)
  if type(model.forward) ~= "function" then
    errors.raise("generate: use_cache = false calls model(ids) -> logits (B, T, V); the model has no forward")
  end
  return token_by_token(model, prompt, o, stream, function(_, ids) return last(model(ids)) end)
end

-- The compiled caches below are keyed weakly by the model; their functions reach the model through a weak
-- reference only (a value that held the model would keep its key, and so the model, alive for good: LuaJIT's weak
-- tables are not ephemerons).
local function weak_ref(model) return setmetatable({ model }, { __mode = "v" }) end

-- model:step compiled once per model and batch B for ids (B, t) at positions (1): a plan for the prompt's length,
-- one for single tokens
local compiled_steps = setmetatable({}, { __mode = "k" })
local function compiled_step(model, B)
  local per = compiled_steps[model] or {}
  compiled_steps[model] = per
  if not per[B] then
    local ref = weak_ref(model)
    per[B] = lazy.compile(function(ids, pos) return ref[1]:step(ids, pos) end,
      { trace.spec({ B, "t" }, "i64"), trace.spec({ 1 }, "i64") })
  end
  return per[B]
end

-- through a compiled model:step per token (the same bits as eagerly: its plans call the eager kernels)
local function stepped(model, prompt, o, stream)
  local run, T = compiled_step(model, prompt._shape[1]), prompt._shape[2]
  return token_by_token(model, prompt, o, stream, function(n, _, tok)
    if n == 1 then return last(run(prompt, F.ones({ 1 }, { dtype = "i64" }))) end
    return last(run(tok, F.tensor({ T + n - 1 }, { dtype = "i64" })))
  end)
end

-- the decoding options of the graph loop
local function loop_decode(o)
  return { max_new_tokens = o.max_new_tokens, temperature = o.temperature, top_k = o.top_k, top_p = o.top_p,
           min_p = o.min_p, eos = o.eos }
end

-- the graph loop compiled once per model (and train/eval mode), batch, decoding options and seeding (at most
-- MAX_LOOPS kept per model):
-- loop(prompt (B, t)[, seed ()]) -> tokens, count; its plan (one per prompt length) runs every trip in C
local MAX_LOOPS = 16
local compiled_loops = setmetatable({}, { __mode = "k" })
local function compiled_loop(model, o, B, seeded)
  local decode, key = loop_decode(o), { B, seeded and 1 or 0, model.training and 1 or 0 }
  for _, k in ipairs { "max_new_tokens", "temperature", "top_k", "top_p", "min_p", "eos" } do
    key[#key + 1] = decode[k] and string.format("%.17g", decode[k]) or "-"
  end
  key = table.concat(key, ",")
  local per = compiled_loops[model]
  if not per or (not per[key] and per.n >= MAX_LOOPS) then per = { n = 0 }; compiled_loops[model] = per end
  if not per[key] then
    M.loop(model, decode)   -- the model and options checked now
    local ref = weak_ref(model)
    per[key] = seeded and lazy.compile(function(p, seed) return M.loop(ref[1], decode)(p, seed) end,
      { trace.spec({ B, "t" }, "i64"), trace.spec({}, "i64") })
      or lazy.compile(function(p) return M.loop(ref[1], decode)(p) end, { trace.spec({ B, "t" }, "i64") })
    per.n = per.n + 1
  end
  return per[key]
end

-- through the compiled graph loop (the same bits as eagerly: its plans call the eager kernels)
local function looped(model, prompt, o)
  local T = prompt._shape[2]
  if T + o.max_new_tokens - 1 > model.max_len then
    errors.raise(string.format("generate: a prompt of %d tokens and %d new ones need %d positions; the model's "
      .. "caches hold %d (model.max_len)", T, o.max_new_tokens, T + o.max_new_tokens - 1, model.max_len))
  end
  local seeded = M.sampled(o) and o.seed ~= nil
  local run = compiled_loop(model, o, prompt._shape[1], seeded)
  local tokens, count
  if seeded then tokens, count = run(prompt, F.tensor(o.seed, { dtype = "i64" })) else tokens, count = run(prompt) end
  return joined(prompt, tokens, count:item())
end

-- ds.generate(model, prompt_ids (B, T) i64, opts) -> ids (B, T + n) i64: the prompt and the n <= max_new_tokens
-- generated tokens. opts: max_new_tokens (20), temperature (0: greedy), top_k, top_p, min_p, eos, seed (reseeds
-- ds's generator first; none: its current stream), stream = function(ids) called per token with a Lua list of each
-- row's token, compile (default: compiled, the fastest way with the same tokens: the graph loop compiled once per
-- model, batch and options, every token in C; with stream, model:step compiled and run per token from Lua; true:
-- always the compiled step per token; false: eagerly), use_cache (true; false: model(ids) over the whole sequence
-- per token)
function M.generate(model, prompt, opts)
  local o = M.decode_options(opts, "generate", { seed = "integer", stream = "function", use_cache = "boolean",
    compile = "boolean" })
  check_prompt(prompt, "generate")
  local stream = o.stream and function(tok) o.stream(tok:reshape(-1):totable()) end
  if o.use_cache == false then
    if o.compile then
      errors.raise("generate: compile = true compiles model:step, which use_cache = false does not call")
    end
    return uncached(model, prompt, o, stream)
  end
  check_model(model, "generate")
  if o.compile or (o.compile == nil and stream) then return stepped(model, prompt, o, stream) end
  if o.compile == nil then return autograd.no_grad(function() return looped(model, prompt, o) end) end
  local decode = loop_decode(o)
  local tokens, count = M.loop(model, decode, stream)(prompt, o.seed and F.tensor(o.seed, { dtype = "i64" }))
  return joined(prompt, tokens, count:item())
end

function M.install(ds)
  ds.generate = M.generate
  ds.generation_loop = M.generation_loop
end

return M
