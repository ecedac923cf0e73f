-- generator.lua: ds.generator, step-wise decoding of many requests in one running batch (continuous batching):
-- requests join a free row between two steps and leave when done; each step is one model:step over every row, each
-- row at its own position, so a request's tokens are bitwise those it gets alone (docs/GENERATION.md). With by_slot,
-- a step runs only the rows of running requests, and a request's prompt goes in one call or a few.
local errors = require("ds.errors")
local options = require("ds.options")
local Tensor = require("ds.tensor")
local autograd = require("ds.autograd")
local random = require("ds.random")
local F = require("ds.ops")
local generate = require("ds.generate")
local lazy = require("ds.lazy")
local trace = require("ds.trace")
local ffi = require("ffi")

local I64 = { dtype = "i64" }
local i64_ptr = ffi.typeof("int64_t*")

local M = {}

local Generator = {}
Generator.__index = Generator

-- ds.generator(model, {slots, by_slot = false, compile = true, max_new_tokens, temperature, top_k, top_p, min_p,
-- eos}): slots: the rows of model's KV caches (its batch); by_slot: model:step(ids (n, t) i64, pos (n) i64, slots (n)
-- i64) -> logits (n, t, V) runs the cache rows slots only, row b's t tokens at positions pos[b] .. (a decode step's
-- three inputs are the same tensors each step, rewritten in place: read them during the call); the other options are
-- the requests' defaults
function M.generator(model, opts)
  if type(model) ~= "table" or type(model.step) ~= "function" or type(model.max_len) ~= "number" then
    errors.raise("generator: model must have step(ids (B, 1) i64, pos (B) i64) -> logits (B, 1, V) and max_len "
      .. "(docs/GENERATION.md)")
  end
  local o = generate.decode_options(opts, "generator", { slots = { "integer", min = 1 }, compile = "boolean",
    by_slot = "boolean" })
  if not o.slots then errors.raise("generator: option slots (the batch the model's caches hold) is required") end
  local B = o.slots
  -- compiled: the step as one plan; without it step_fn calls model:step itself (no closure per generator: the JIT's
  -- traces through one generator's steps serve the next one over the same kind of model)
  local compiled
  if o.compile ~= false then
    compiled = lazy.compile(function(ids, pos, slots)
      if slots == nil then return model:step(ids, pos) end
      return model:step(ids, pos, slots)
    end, o.by_slot and { trace.spec({ "n", "t" }, "i64"), trace.spec({ "n" }, "i64"), trace.spec({ "n" }, "i64") }
      or { trace.spec({ B, 1 }, "i64"), trace.spec({ B }, "i64") })
  end
  return setmetatable({ model = model, defaults = o, B = B, by_slot = o.by_slot, compiled = compiled, rows = {},
    by_id = {}, last_id = 0, inputs = {}, running = {}, joining = {} }, Generator)
end

-- one model step: logits of ids (n, t) at pos (n) (in cache rows slots (n) with by_slot)
function Generator:step_fn(ids, pos, slots)
  if self.compiled then return self.compiled(ids, pos, slots) end
  if slots == nil then return self.model:step(ids, pos) end
  return self.model:step(ids, pos, slots)
end

-- the prompt as a Lua list of 1-based ids
local function ids_of(prompt)
  if Tensor.is_tensor(prompt) then
    local d = prompt:dim()
    if prompt.dtype ~= "i64" or prompt:numel() < 1 or d > 2 or (d == 2 and prompt:size(1) ~= 1) then
      errors.raise("generator:start: prompt must be an i64 tensor (T) or (1, T), or a list of token ids")
    end
    return prompt:reshape(-1):totable()
  end
  if type(prompt) ~= "table" or #prompt < 1 then
    errors.raise("generator:start: prompt must be a non-empty list of token ids or an i64 tensor")
  end
  local t = {}
  for i, v in ipairs(prompt) do
    if type(v) ~= "number" or v ~= math.floor(v) then
      errors.raise("generator:start: prompt id " .. i .. " is not an integer")
    end
    t[i] = v
  end
  return t
end

-- g:start(prompt, opts) -> id, or nil and "full" when every row is taken. prompt: a list of 1-based token ids or an
-- i64 tensor (T) / (1, T); opts: max_new_tokens, temperature, top_k, top_p, min_p, eos (the generator's by default),
-- seed (this request's own generator: the tokens ds.generate draws with this seed), stream = function(token, id)
function Generator:start(prompt, opts)
  local d = self.defaults
  local o = options.check(opts, "generator:start", { max_new_tokens = { "integer", min = 1 },
    temperature = { "number", min = 0 }, top_k = { "integer", min = 1 }, top_p = { "number", min = 0, max = 1 },
    min_p = { "number", min = 0, max = 1 }, eos = "integer", seed = "integer", stream = "function" })
  for _, k in ipairs { "max_new_tokens", "temperature", "top_k", "top_p", "min_p", "eos" } do
    if o[k] == nil then o[k] = d[k] end
  end
  local ids = ids_of(prompt)
  if #ids + o.max_new_tokens - 1 > self.model.max_len then
    errors.raise(string.format("generator:start: a prompt of %d tokens and %d new ones need %d positions; the "
      .. "model's caches hold %d (model.max_len)", #ids, o.max_new_tokens, #ids + o.max_new_tokens - 1,
      self.model.max_len))
  end
  local row
  for b = 1, self.B do if not self.rows[b] then row = b; break end end
  if not row then return nil, "full" end
  self.last_id = self.last_id + 1
  local r = { id = self.last_id, row = row, prompt = ids, fed = 0, tokens = {}, opts = o,
              rng = o.seed and ffi.new("int64_t[2]", o.seed, 0) or nil }
  self.rows[row], self.by_id[r.id] = r, r
  return r.id
end

-- the request's tokens so far (a Lua list) and whether it is done
function Generator:result(id)
  local r = self.by_id[id]
  if not r then errors.raise("generator:result: no request " .. tostring(id)) end
  return r.tokens, r.done == true
end

-- drops a request (a client gone): its row is free for the next start
function Generator:cancel(id)
  local r = self.by_id[id]
  if r and not r.done then r.done = true; self.rows[r.row] = nil end
end

-- the number of requests running
function Generator:active()
  local n = 0
  for b = 1, self.B do if self.rows[b] then n = n + 1 end end
  return n
end

-- row r's next token from its logits (1, V), drawn on its own generator state (r.rng, int64_t[2]: seed, offset) when
-- it has a seed: swapped into the global state (i64 (2)) through its data pointer for the draw
local function draw(r, logits)
  if not r.rng then return generate.pick(logits, r.opts):item() end
  local st = random.state()
  local p, own = ffi.cast(i64_ptr, st:data_ptr()), r.rng
  local seed, offset = p[0], p[1]
  p[0], p[1] = own[0], own[1]
  local tok = generate.pick(logits, r.opts):item()
  own[0], own[1] = p[0], p[1]
  p[0], p[1] = seed, offset
  return tok
end

-- row r's token tok: recorded, streamed and added to events
local function emit(self, r, tok, events)
  r.tokens[#r.tokens + 1] = tok
  r.done = #r.tokens >= r.opts.max_new_tokens or (r.opts.eos ~= nil and tok == r.opts.eos)
  if r.done then self.rows[r.row] = nil end
  if r.opts.stream then r.opts.stream(tok, r.id) end
  events[#events + 1] = { id = r.id, token = tok, done = r.done }
end

-- row r's next token from a step's logits (n, 1, V), its row i: greedy rows read one argmax over every row (exact:
-- the same as row by row), made at the step's first greedy row and kept in s (its data read while its tensor lives);
-- sampled rows draw from their row of one (n, V) view, also kept in s
local function row_token(s, r, logits, i)
  if r.opts.temperature == 0 then
    if not s.greedy then s.best = logits:argmax(-1); s.greedy = ffi.cast(i64_ptr, s.best:data_ptr()) end
    return tonumber(s.greedy[i - 1])
  end
  s.rows = s.rows or logits:reshape(logits:size(1), logits:size(3))
  return draw(r, s.rows:narrow(1, i, 1))
end

-- the step's i64 inputs for n running rows, made once per n and written in place each step: ids (n, 1), pos (n),
-- slots (n), each with its data pointer
local function slot_inputs(self, n)
  local s = self.inputs[n]
  if not s then
    local ids, pos, slots = F.zeros({ n, 1 }, I64), F.zeros({ n }, I64), F.zeros({ n }, I64)
    s = { ids = ids, pos = pos, slots = slots, ids_p = ffi.cast(i64_ptr, ids:data_ptr()),
          pos_p = ffi.cast(i64_ptr, pos:data_ptr()), slots_p = ffi.cast(i64_ptr, slots:data_ptr()) }
    self.inputs[n] = s
  end
  return s
end

-- request r's next c prompt tokens in one call (ids (1, c) at its next position); its last call's last row gives its
-- first token
local function chunk(self, r, c, events)
  local ids = F.tensor({ { unpack(r.prompt, r.fed + 1, r.fed + c) } }, I64)
  local logits = self:step_fn(ids, F.tensor({ r.fed + 1 }, I64), F.tensor({ r.row }, I64))   -- (1, c, V)
  r.fed = r.fed + c
  if r.fed == #r.prompt then emit(self, r, row_token({}, r, logits:narrow(2, c, 1), 1), events) end
end

-- A prompt of T tokens goes in as calls (1, c) of chunks of EXACT * 2^k tokens, its binary digits from EXACT up,
-- largest first, then its last T % EXACT tokens in one call (13 tokens: one call of 13; 45: 32, then 13): nothing
-- padded, at most a few calls (each streams the weights once), and plans for 1 .. EXACT - 1 tokens and the chunks.
local EXACT = 16

-- the prompts of the requests joining at this step (fresh[1 .. nf]), each in its calls
local function prompts(self, fresh, nf, events)
  for i = 1, nf do
    local r, c = fresh[i], EXACT
    while 2 * c <= #r.prompt - r.fed do c = 2 * c end
    while c >= EXACT do
      if #r.prompt - r.fed >= c then chunk(self, r, c, events) end
      c = c / 2
    end
    if r.fed < #r.prompt then chunk(self, r, #r.prompt - r.fed, events) end
  end
end

-- step with by_slot: the running requests' next tokens in one call over their rows, then the new requests' prompts
-- (prompts: their first tokens); the row lists are kept across steps (emptied after use)
function Generator:step_slots(events)
  local run, fresh, n, nf = self.running, self.joining, 0, 0
  for b = 1, self.B do
    local r = self.rows[b]
    if r and r.fed < #r.prompt then nf = nf + 1; fresh[nf] = r
    elseif r then n = n + 1; run[n] = r end
  end
  if n > 0 then
    local s = slot_inputs(self, n)
    for i = 1, n do
      local r = run[i]
      local k = #r.tokens
      s.ids_p[i - 1], s.pos_p[i - 1], s.slots_p[i - 1] = r.tokens[k], r.fed + k, r.row
    end
    local logits = self:step_fn(s.ids, s.pos, s.slots)   -- (n, 1, V)
    s.greedy, s.rows = nil, nil
    for i = 1, n do
      local r = run[i]
      run[i] = nil
      emit(self, r, row_token(s, r, logits, i), events)
    end
  end
  if nf > 0 then prompts(self, fresh, nf, events) end
  for i = 1, nf do fresh[i] = nil end
end

-- step without by_slot: every row in one call (ids (B, 1) and pos (B) rewritten in place); an idle row computes a
-- throwaway token at position 1, a request still reading its prompt feeds its next prompt token
function Generator:step_rows(events)
  local s = slot_inputs(self, self.B)
  for b = 1, self.B do
    local r = self.rows[b]
    if not r then s.ids_p[b - 1], s.pos_p[b - 1] = 1, 1
    elseif r.fed < #r.prompt then s.ids_p[b - 1], s.pos_p[b - 1] = r.prompt[r.fed + 1], r.fed + 1
    else s.ids_p[b - 1], s.pos_p[b - 1] = r.tokens[#r.tokens], r.fed + #r.tokens end
  end
  local logits = self:step_fn(s.ids, s.pos)   -- (B, 1, V)
  s.greedy, s.rows = nil, nil
  for b = 1, self.B do
    local r = self.rows[b]
    if r then
      if r.fed < #r.prompt then r.fed = r.fed + 1 end
      if r.fed == #r.prompt then emit(self, r, row_token(s, r, logits, b), events) end
    end
  end
end

-- g:step() -> events {{id, token, done}...}: one model step over every row (a request still reading its prompt
-- feeds its next prompt token; idle rows compute a throwaway token), or with by_slot the calls of step_slots; each
-- request past its prompt gains a token
function Generator:step()
  local events = {}
  autograd.no_grad(self.by_slot and self.step_slots or self.step_rows, self, events)
  return events
end

-- g:run() -> steps until no request runs; returns the number of steps
function Generator:run()
  local n = 0
  while self:active() > 0 do self:step(); n = n + 1 end
  return n
end

function M.install(ds) ds.generator = M.generator end

return M
