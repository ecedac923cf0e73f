-- examples/char_gpt_model.lua: a character-level GPT (pre-norm blocks, GELU MLP, learned positions) with KV caches,
-- in the shape ds.generate expects (docs/GENERATION.md): forward(ids) for training, step(ids, pos) for decoding.
-- Used by examples/char_gpt.lua, bench/char_gpt_bench.lua and tests/char_gpt_spec.lua.
local ds = require("ds")
local nn = ds.nn

local M = {}

M.DEFAULTS = { vocab = 65, embed = 128, heads = 4, layers = 4, block = 64, cache_batch = 1 }

local Block = nn.Module:extend("GPTBlock")

-- cfg: {embed, heads, block (the longest sequence), cache_batch (rows the KV cache holds)}
function Block:init(cfg)
  local E = cfg.embed
  self.E, self.H, self.hd = E, cfg.heads, E / cfg.heads
  self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
  self.qkv, self.proj = nn.Linear(E, 3 * E), nn.Linear(E, E)
  self.fc, self.out = nn.Linear(E, 4 * E), nn.Linear(4 * E, E)
  self.cache = nn.KVCache(cfg.cache_batch, cfg.heads, cfg.block, self.hd)
end

-- x (B, t, E) -> q, k, v (B, H, t, hd)
function Block:heads(x)
  local B, t = x:size(1), x:size(2)
  local qkv = self.qkv(self.ln1(x)):reshape(B, t, 3, self.H, self.hd)
  return qkv:select(3, 1):transpose(2, 3), qkv:select(3, 2):transpose(2, 3), qkv:select(3, 3):transpose(2, 3)
end

-- x (B, t, E), a (B, H, t, hd) the attention's result -> (B, t, E)
function Block:finish(x, a)
  x = x + self.proj(a:transpose(2, 3):reshape(x:size(1), x:size(2), self.E))
  return x + self.out(self.fc(self.ln2(x)):gelu())
end

-- the full causal pass: x (B, T, E) -> (B, T, E)
function Block:forward(x)
  local q, k, v = self:heads(x)
  return self:finish(x, ds.scaled_dot_product_attention(q, k, v, { is_causal = true }))
end

-- one decoding step through the cache: x (B, t, E) at positions pos .. pos + t - 1 -> (B, t, E); with slots (n):
-- x (n, t, E) of those cache rows, row b at positions pos[b] .. pos[b] + t - 1
function Block:step(x, pos, slots)
  local q, k, v = self:heads(x)
  return self:finish(x, self.cache(q, k, v, pos, slots))
end

local GPT = nn.Module:extend("CharGPT")

function GPT:init(cfg)
  local c = {}
  for k, v in pairs(M.DEFAULTS) do c[k] = v end
  for k, v in pairs(cfg or {}) do
    if M.DEFAULTS[k] == nil then error("CharGPT: unknown option '" .. tostring(k) .. "'") end
    c[k] = v
  end
  self.cfg, self.max_len = c, c.block
  self.tok, self.pos = nn.Embedding(c.vocab, c.embed), nn.Embedding(c.block, c.embed)
  self.blocks = nn.Sequential()
  for _ = 1, c.layers do self.blocks:append(Block(c)) end
  self.ln, self.head = nn.LayerNorm(c.embed), nn.Linear(c.embed, c.vocab)
end

-- x (B, t, E) through the blocks (each block:f(x, ...)) and the head -> logits (B, t, V)
function GPT:run(x, f, ...)
  for b = 1, self.cfg.layers do x = self.blocks[b][f](self.blocks[b], x, ...) end
  return self.head(self.ln(x))
end

-- training / no-cache generation: ids (B, T) i64 1-based -> logits (B, T, V)
function GPT:forward(ids)
  local T = ids:size(2)
  local at = ds.arange(1, T + 1, { dtype = "i64" }):reshape(1, T)
  return self:run(self.tok(ids) + self.pos(at), "forward")
end

-- decoding through the KV caches (the contract of ds.generate): ids (B, t) i64 at positions pos .. pos + t - 1
-- (pos (1) i64, 1-based), or ids (B, 1) with pos (B) i64 (each row at its own position) -> logits (B, t, V).
-- With slots (n) i64: ids (n, t) of the cache rows slots only, row b at positions pos[b] .. pos[b] + t - 1 (pos (n)
-- i64; a prompt in one call, or one token of each running request) -> logits (n, t, V)
function GPT:step(ids, pos, slots)
  local B, t = ids:size(1), ids:size(2)
  local at
  if slots ~= nil then at = pos:reshape(-1, 1) + ds.arange(0, t, { dtype = "i64" }):reshape(1, -1)          -- (n, t)
  elseif pos:dim() == 1 and pos:size(1) == B and B ~= 1 then at = pos:reshape(B, 1)                   -- (B, 1)
  else at = (pos + ds.arange(0, t, { dtype = "i64" })):reshape(1, t) end                             -- (1, t)
  return self:run(self.tok(ids) + self.pos(at), "step", pos, slots)
end

M.GPT = GPT

-- the number of parameters of model
function M.count(model)
  local n = 0
  for _, p in ipairs(model:parameters()) do n = n + p:numel() end
  return n
end

return M
