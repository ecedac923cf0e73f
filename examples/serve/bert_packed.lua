-- examples/serve/bert_packed.lua: the BERT-style classifier of examples/bert_sentiment.lua on packed texts, for
-- batches without padding: the tokens of all texts are one (N, hidden) row set (each linear layer, norm and GELU
-- sees only real tokens) and attention runs text by text (F.segment_attention). A text's answer is bitwise the
-- model's answer on that text alone: every row is computed independently of the others (DESIGN.md).
local ds = require("ds")
local F = ds.F

local M = {}

-- one encoder layer as bert_sentiment's Layer: x (N, H) every token, xq (Nq, H) the query rows (x, or the
-- [CLS] rows in the last layer), qseg/kseg (B, 2) {first, count} each text's query and key rows
local function layer(l, x, xq, qseg, kseg)
  local a = l.attention
  local function heads(t) return t:reshape(t:size(1), a.heads, a.head_dim) end
  local ctx = F.segment_attention(heads(a.query(xq)), heads(a.key(x)), heads(a.value(x)), qseg, kseg)
  local y = l.norm1(xq + a.out(ctx:reshape(ctx:size(1), a.heads * a.head_dim)))
  return l.norm2(y + l.ffn_out(l.ffn_in(y):gelu()))
end

-- bert: a bert_sentiment Bert -> forward(ids, pos, seg): ids and pos (N) i64 token and position ids (1-based),
-- seg (B, 2) i64 text b's rows {first, count} -> probs (B, labels). The last layer computes the [CLS] rows only
-- (the only ones the pooler reads), as ds.compile's prune pass does for the padded model. Rows outside every
-- text are computed and ignored; a text of count 0 gets the answer of row `first`, to be ignored too.
function M.forward(bert)
  return function(ids, pos, seg)
    local x = bert.emb_norm(bert.word(ids) + bert.position(pos))
    local n = #bert.layers
    for i = 1, n - 1 do x = layer(bert.layers[i], x, x, seg, seg) end
    local cls = seg:select(2, 1)                                          -- (B) each text's first row: [CLS]
    local ones = ds.ones_like(cls)
    local one_each = ds.stack({ ones:cumsum(1), ones }, 2)                -- query b: row b of the [CLS] rows
    x = layer(bert.layers[n], x, x:index_select(1, cls), one_each, seg)
    return bert.classifier(bert.pooler(x):tanh()):softmax(-1)
  end
end

-- ds.compile'd forward with dynamic token and text counts
function M.compile(bert)
  return ds.compile(M.forward(bert), { ds.spec({ "tokens" }, "i64", "ids"), ds.spec({ "tokens" }, "i64", "pos"),
    ds.spec({ "texts", 2 }, "i64", "seg") })
end

return M
