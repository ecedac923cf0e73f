-- tests/prune_spec.lua: the prune pass (lua/ds/passes/prune.lua) before/after: a row selection moves up
-- through row-wise work, the printed IR shows the shorter values, and results equal the unpruned graph
-- (and eager) bit for bit.
local ds = require("ds")
local H = require("helpers")
local nn = ds.nn

local bert = dofile("examples/bert_sentiment.lua")
local CFG = { vocab = 100, hidden = 32, layers = 2, heads = 4, ffn = 64, max_len = 16, labels = 6 }

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

-- compiled with and without the pass; both must give the eager bits on every input
local function both(f, specs, inputs_list)
  local pruned, plain = ds.compile(f, specs), ds.compile(f, specs, { prune = false })
  for _, inputs in ipairs(inputs_list) do
    local eager = ds.no_grad(function() return f(unpack(inputs)) end)
    assert.is_true(H.bitwise(pruned(unpack(inputs)), plain(unpack(inputs))), "pruned differs from unpruned")
    assert.is_true(H.bitwise(pruned(unpack(inputs)), eager), "pruned differs from eager")
  end
  return tostring(pruned), tostring(plain), pruned
end

local function bert_inputs(batch, T, len)
  local ids = (ds.rand(batch, T) * 90):astype("i64") + 1
  local mask = ds.ones(batch, T)
  if len < T then mask:narrow(2, len + 1, T - len):fill_(0) end
  return { ids, mask }
end

describe("prune: [CLS] pooling computes one row in the last encoder layer", function()
  ds.manual_seed(5)
  local model = bert.Bert(CFG)
  model:eval()

  it("padded length: the last layer's attention, FFN and norms run on 1 row, bitwise as before", function()
    local specs = { ds.spec({ 1, 16 }, "i64", "ids"), ds.spec({ 1, 16 }, "f32", "mask") }
    local after, before, cg = both(model, specs, { bert_inputs(1, 16, 11), bert_inputs(1, 16, 16) })
    assert.is_true(cg.stats.prune > 0)
    -- before: every attention has 16 query rows; after: the last one has 1
    assert.equal(2, count(before, "scaled_dot_product_attention%([^\n]*f32%(1,4,16,8%)"))
    assert.equal(1, count(after, "scaled_dot_product_attention%([^\n]*f32%(1,4,16,8%)"))
    assert.equal(1, count(after, "scaled_dot_product_attention%([^\n]*f32%(1,4,1,8%)"))
    assert.equal(0, count(before, "layer_norm%([^\n]*f32%(1,1,32%)"))
    assert.equal(2, count(after, "layer_norm%([^\n]*f32%(1,1,32%)"))
    assert.equal(1, count(after, "f32%(1,1,64%)"))     -- the FFN's wide activation: one row
  end)

  it("batch 2 and a dynamic sequence length", function()
    local specs = { ds.spec({ "batch", "seq" }, "i64", "ids"), ds.spec({ "batch", "seq" }, "f32", "mask") }
    local after = both(model, specs, { bert_inputs(2, 16, 9), bert_inputs(1, 7, 7), bert_inputs(3, 12, 5) })
    assert.equal(1, count(after, "scaled_dot_product_attention%([^\n]*%(batch,4,1,8%)"))
  end)
end)

describe("prune: TransformerEncoderLayer (MultiheadAttention on the attention op)", function()
  it("the query side of the last layer shrinks; k and v stay whole", function()
    ds.manual_seed(6)
    local l1 = nn.TransformerEncoderLayer(16, 2, { dim_feedforward = 32, dropout = 0, batch_first = true, activation = "gelu" })
    local l2 = nn.TransformerEncoderLayer(16, 2, { dim_feedforward = 32, dropout = 0, batch_first = true, norm_first = true })
    l1:eval(); l2:eval()
    local kpm = ds.arange(10):ge(8):reshape(1, 10)
    local f = function(x) return l2(l1(x, { src_key_padding_mask = kpm }), { src_key_padding_mask = kpm }):select(2, 1) end
    local x = ds.randn(1, 10, 16)
    local after, before = both(f, { x }, { { x }, { ds.randn(1, 10, 16) } })
    assert.equal(0, count(before, "scaled_dot_product_attention%([^\n]*f32%(1,2,1,8%)"))
    assert.equal(1, count(after, "scaled_dot_product_attention%([^\n]*f32%(1,2,1,8%)"))
  end)
end)

describe("prune: where rows are not independent, nothing moves", function()
  it("causal attention keeps its query rows; a row range (narrow) moves up through the rest", function()
    ds.manual_seed(7)
    local lin = nn.Linear(8, 8)
    local f = function(q, k, v)
      local y = ds.scaled_dot_product_attention(lin(q), k, v, { is_causal = true })
      return (y:gelu() + 1):narrow(2, 3, 2)
    end
    local q, k, v = ds.randn(2, 6, 8), ds.randn(2, 6, 8), ds.randn(2, 6, 8)
    local after = both(f, { q, k, v }, { { q, k, v } })
    assert.equal(1, count(after, "scaled_dot_product_attention%([^\n]*f32%(2,6,8%)"))
    assert.equal(0, count(after, "f32%(2,6,8%)  %-%- [^\n]*\n[^\n]*matmul"))
  end)

  it("a value also returned whole is left alone; a selection of features (the last dim) stops at the matmul", function()
    ds.manual_seed(8)
    local lin = nn.Linear(8, 8)
    local f = function(x)
      local h = lin(x):tanh()
      return h:select(2, 1), h
    end
    local x = ds.randn(2, 5, 8)
    local after = both(f, { x }, { { x } })
    assert.equal(0, ds.compile(f, { x }).stats.prune)
    assert.equal(1, count(after, "matmul[^\n]*f32%(2,5,8%)"))
    local g = function(x2) return lin(x2):select(3, 2) end
    after = both(g, { x }, { { x } })
    assert.equal(1, count(after, "matmul[^\n]*f32%(2,5,8%)"))    -- all 8 features: a column is no row
  end)

  it("a selection whose result keeps the selected row's memory comes back in its own shape", function()
    local f = function(x) return (x * 2):select(2, 1) end
    local x = ds.randn(3, 1, 4)
    both(f, { x }, { { x } })
  end)
end)
