-- serve/text.lua: the "text" input adapter (serve/tensor.lua describes adapters): {"text": "..."} -> [CLS] chars
-- [SEP] as ids of the model's vocab (the "vocab" setting, a JSON object char -> id next to the model), texts
-- packed without padding for a model with inputs ids (N) i64, pos (N) i64, seg (B, 2) i64 (each text's rows
-- {first, count}; examples/serve/bert_packed.lua), whose first output has a row per text; the reply
-- {"label", "class", "probs"}. A text's answer is bitwise the same in any batch and alone (docs/SERVING.md).
local ffi = require("ffi")
local image = require("ds.serve.image")
local util = require("ds.serve.util")

local M = {}
local MAX_TEXT = 512
M.MAX_TOKENS = 128            -- positions of the model ([CLS] .. [SEP]); the "positions" setting overrides it

function M.row(req, model, settings)
  local vocab = model.vocab
  local text = req.text
  if text == nil then return nil, "missing field 'text'" end
  if type(text) ~= "string" then return nil, "'text' must be a string" end
  if #text == 0 or #text > MAX_TEXT then return nil, "'text' must have 1.." .. MAX_TEXT .. " bytes" end
  local limit = settings.positions or M.MAX_TOKENS
  local ids = { vocab["[CLS]"] }
  for ch in text:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    if #ids < limit - 1 then ids[#ids + 1] = vocab[ch] or vocab["[UNK]"] end
  end
  ids[#ids + 1] = vocab["[SEP]"]
  return { ids = ids, tokens = #ids, n = 1 }
end

-- the packed row count for n tokens (util.token_rows)
M.token_rows = util.token_rows

-- rows -> ids and pos (N) i64, the texts' tokens one after another (N = token_rows of their total, the rest id 1
-- at position 1), and seg (max_batch, 2) i64 each text's rows {first, count} ({1, 0} past #rows)
function M.batch(rows, settings)
  local max_batch = settings.max_batch
  local n = 0
  for _, r in ipairs(rows) do n = n + #r.ids end
  local N = M.token_rows(n)
  local ids, pos = ffi.new("int64_t[?]", N), ffi.new("int64_t[?]", N)
  local seg = ffi.new("int64_t[?]", 2 * max_batch)
  local at = 0
  for b = 1, max_batch do
    local r = rows[b] and rows[b].ids
    seg[2 * b - 2], seg[2 * b - 1] = r and at + 1 or 1, r and #r or 0
    for t = 1, r and #r or 0 do
      ids[at], pos[at] = r[t], t
      at = at + 1
    end
  end
  for k = at, N - 1 do ids[k], pos[k] = 1, 1 end
  return { { dtype = "i64", shape = { N }, bytes = ffi.string(ids, N * 8) },
           { dtype = "i64", shape = { N }, bytes = ffi.string(pos, N * 8) },
           { dtype = "i64", shape = { max_batch, 2 }, bytes = ffi.string(seg, 2 * max_batch * 8) } }
end

-- one batch per packed row count a batch can have (max_batch texts of at most `positions` tokens, max_tokens in all)
function M.shapes(settings)
  local limit = settings.positions or M.MAX_TOKENS
  local out, n = {}, 1
  while n <= math.min(settings.max_tokens, settings.max_batch * limit) do
    local rows, left = {}, M.token_rows(n)
    while left > 0 and #rows < settings.max_batch do
      local ids = {}
      for i = 1, math.min(left, limit) do ids[i] = 2 end
      rows[#rows + 1] = { ids = ids }
      left = left - #ids
    end
    out[#out + 1] = M.batch(rows, settings)
    n = M.token_rows(n) + 1
  end
  return out
end

M.reply = image.reply

return M
