-- tests/bert_packed_spec.lua: the served BERT-style classifier on packed texts (examples/serve/bert_packed.lua),
-- compiled, saved and loaded, answers each text bit for bit as bert_sentiment's model does on that text alone,
-- whatever the texts packed with it, their order and the unused rows after them.
package.path = "./examples/?.lua;" .. package.path
local ds = require("ds")
local H = require("helpers")
local bert_ex = require("bert_sentiment")
local packed = require("serve.bert_packed")

local CFG = { vocab = 40, hidden = 32, layers = 3, heads = 2, ffn = 64, max_len = 128, labels = 6 }

describe("BERT-style classifier on packed texts", function()
  ds.manual_seed(3)
  local bert = bert_ex.Bert(CFG)
  bert:eval()
  local dir = H.tmp_dir()
  ds.save(packed.compile(bert), dir .. "/bert")
  local served = ds.load(dir .. "/bert")
  teardown(function() os.execute("rm -rf " .. dir) end)

  local lens = { 2, 17, 1, 128, 40, 9, 64 }
  local texts = {}
  for b, n in ipairs(lens) do
    texts[b] = {}
    for t = 1, n do texts[b][t] = (b * 7 + t * 3) % CFG.vocab + 1 end
  end
  -- the texts of `order` packed, `extra` unused rows after them, `slots` segments (the unused ones {1, 0})
  local function run(order, extra, slots)
    local ids, pos, seg = {}, {}, {}
    for b, i in ipairs(order) do
      seg[b] = { #ids + 1, #texts[i] }
      for t, id in ipairs(texts[i]) do ids[#ids + 1] = id; pos[#pos + 1] = t end
    end
    for _ = 1, extra do ids[#ids + 1] = 1; pos[#pos + 1] = 1 end
    for b = #order + 1, slots do seg[b] = { 1, 0 } end
    local function I(t) return ds.tensor(t, { dtype = "i64" }) end
    return served(I(ids), I(pos), I(seg))
  end

  it("answers every text of a batch as the model does on that text alone", function()
    local out = run({ 1, 2, 3, 4, 5, 6, 7 }, 5, 9)
    assert.same({ 9, 6 }, out.shape)
    for b, t in ipairs(texts) do
      local ids = ds.tensor({ t }, { dtype = "i64" })
      local want = ds.no_grad(function() return bert(ids, ds.ones({ 1, #t })) end)
      H.bitwise(want, out:narrow(1, b, 1))
    end
  end)

  it("gives a text the same bits alone, in other company and at other places", function()
    local all = run({ 1, 2, 3, 4, 5, 6, 7 }, 0, 7)
    for b = 1, #texts do H.bitwise(all:narrow(1, b, 1), run({ b }, 0, 1)) end
    local shuffled = run({ 7, 5, 3, 1 }, 13, 32)
    for k, b in ipairs { 7, 5, 3, 1 } do H.bitwise(all:narrow(1, b, 1), shuffled:narrow(1, k, 1)) end
  end)
end)
