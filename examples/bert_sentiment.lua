-- examples/bert_sentiment.lua: a BERT-style sentiment classifier predicting 1000 single samples
-- eagerly, compiled, and loaded from disk (the Paddle article's workload), with timings.
-- usage: luajit examples/bert_sentiment.lua [--n 1000] [--checkpoint W.safetensors] [--dynamic] [--out DIR]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")
local nn, F = ds.nn, ds.F

local LABELS = { "angry", "happy", "neutral", "surprise", "sad", "fear" }
local CFG = { vocab = 21128, hidden = 256, layers = 4, heads = 4, ffn = 1024, max_len = 128, labels = #LABELS }

-- ---- model ----
-- self-attention with a key padding mask; x: (B,T,H), mask_bias: (B,1,1,T) -> (B,T,H)
local Attention = nn.Module:extend("BertSelfAttention")
function Attention:init(h, heads)
  self.heads, self.head_dim = heads, math.floor(h / heads)
  self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
  self.out = nn.Linear(h, h)
end
function Attention:forward(x, mask_bias)
  local B, T = x:size(1), x:size(2)
  local function heads(t) return t:reshape(B, T, self.heads, self.head_dim):transpose(2, 3) end -- (B,nh,T,hd)
  local q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
  local ctx = F.scaled_dot_product_attention(q, k, v, { mask = mask_bias })                 -- (B,nh,T,hd)
  return self.out(ctx:transpose(2, 3):reshape(B, T, self.heads * self.head_dim))
end

-- post-norm encoder layer with a GELU feed-forward, as in BERT
local Layer = nn.Module:extend("BertLayer")
function Layer:init(cfg)
  self.attention = Attention(cfg.hidden, cfg.heads)
  self.norm1 = nn.LayerNorm(cfg.hidden, { eps = 1e-12 })
  self.ffn_in, self.ffn_out = nn.Linear(cfg.hidden, cfg.ffn), nn.Linear(cfg.ffn, cfg.hidden)
  self.norm2 = nn.LayerNorm(cfg.hidden, { eps = 1e-12 })
end
function Layer:forward(x, mask_bias)
  x = self.norm1(x + self.attention(x, mask_bias))
  return self.norm2(x + self.ffn_out(self.ffn_in(x):gelu()))
end

local Bert = nn.Module:extend("BertClassifier")
function Bert:init(cfg)
  self.word = nn.Embedding(cfg.vocab, cfg.hidden)
  self.position = nn.Embedding(cfg.max_len, cfg.hidden)
  self.emb_norm = nn.LayerNorm(cfg.hidden, { eps = 1e-12 })
  self.layers = nn.Sequential()
  for i = 1, cfg.layers do self.layers:append(Layer(cfg)) end
  self.pooler = nn.Linear(cfg.hidden, cfg.hidden)
  self.classifier = nn.Linear(cfg.hidden, cfg.labels)
end
-- ids: (B,T) i64 1-based token ids; mask: (B,T) f32, 1 for tokens and 0 for padding -> probs (B,6)
function Bert:forward(ids, mask)
  local T = ids:size(2)
  local x = self.word(ids) + self.position.weight:narrow(1, 1, T)                 -- (B,T,H)
  x = self.emb_norm(x)
  local mask_bias = ((1 - mask) * -10000):unsqueeze(2):unsqueeze(2)               -- (B,1,1,T)
  for i = 1, #self.layers do x = self.layers[i](x, mask_bias) end
  local pooled = self.pooler(x:select(2, 1)):tanh()                                -- [CLS]: (B,H)
  return self.classifier(pooled):softmax(-1)
end

-- ---- a character tokenizer with a vocab built from the texts ----
local TEXTS = {
  "今天的天气真好，我们去公园散步吧", "这家餐厅的服务太差了，我再也不来了", "听到这个消息我简直不敢相信",
  "他一个人坐在角落里默默流泪", "深夜里传来奇怪的声音让我很害怕", "会议改到明天下午三点举行",
  "终于考完试了，可以好好休息一下", "你怎么能这样对待你的朋友", "没想到他居然赢得了比赛",
  "小狗走丢了，孩子们都很难过", "黑暗的走廊里好像有人在跟着我", "这本书一共有三百页",
}
local function build_vocab(texts)
  local vocab, n = { ["[PAD]"] = 1, ["[UNK]"] = 2, ["[CLS]"] = 3, ["[SEP]"] = 4 }, 4
  for _, t in ipairs(texts) do
    for ch in t:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
      if not vocab[ch] then n = n + 1; vocab[ch] = n end
    end
  end
  return vocab
end
local VOCAB = build_vocab(TEXTS)

-- text -> ids (1,T) and mask (1,T); padded to max_len unless pad == false
local function encode(text, pad)
  local ids = { VOCAB["[CLS]"] }
  for ch in text:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    if #ids < CFG.max_len - 1 then ids[#ids + 1] = VOCAB[ch] or VOCAB["[UNK]"] end
  end
  ids[#ids + 1] = VOCAB["[SEP]"]
  local mask = {}
  for i = 1, #ids do mask[i] = 1 end
  if pad ~= false then
    for i = #ids + 1, CFG.max_len do ids[i] = VOCAB["[PAD]"]; mask[i] = 0 end
  end
  return ds.tensor({ ids }, { dtype = "i64" }), ds.tensor({ mask })
end

local function predict_all(fn, inputs)
  local t0 = ds.clock()
  local labels = {}
  for i, inp in ipairs(inputs) do
    local probs = fn(inp[1], inp[2])
    labels[i] = probs:argmax(-1):item()
  end
  return ds.clock() - t0, labels
end

local function main(args)
  local n, checkpoint, dynamic, out = 1000, nil, false, "out/bert_sentiment"
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--n" then n = tonumber(args[i + 1]); i = i + 1
    elseif a == "--checkpoint" then checkpoint = args[i + 1]; i = i + 1
    elseif a == "--out" then out = args[i + 1]; i = i + 1
    elseif a == "--dynamic" then dynamic = true
    else error("unknown argument " .. a) end
    i = i + 1
  end
  ds.manual_seed(22)
  local model = Bert(CFG)
  if checkpoint then model:load_state_dict(ds.load_state(checkpoint)) end
  model:eval()
  local inputs = {}
  for k = 1, n do inputs[k] = { encode(TEXTS[(k - 1) % #TEXTS + 1], not dynamic) } end
  local seq = dynamic and "seq" or CFG.max_len
  local specs = { ds.spec({ 1, seq }, "i64", "ids"), ds.spec({ 1, seq }, "f32", "mask") }

  local eager_s, eager_labels = ds.no_grad(function() return predict_all(function(a, b) return model(a, b) end, inputs) end)
  local compiled = ds.compile(model, specs)
  local comp_s, comp_labels = predict_all(compiled, inputs)
  ds.save(compiled, out)
  local t0 = ds.clock()
  local loaded = ds.load(out)
  local load_s = ds.clock() - t0
  local load_run_s, load_labels = predict_all(loaded, inputs)
  for k = 1, n do
    assert(eager_labels[k] == comp_labels[k] and comp_labels[k] == load_labels[k], "labels differ at sample " .. k)
  end
  print(string.format("%d predictions (%s), first: %s -> %s", n, dynamic and "dynamic length" or "padded to 128",
    TEXTS[1], LABELS[eager_labels[1]]))
  print(string.format("eager    total %.3f s  (%.3f ms per prediction)", eager_s, eager_s / n * 1e3))
  print(string.format("compiled total %.3f s  (%.3f ms per prediction)", comp_s, comp_s / n * 1e3))
  print(string.format("loaded   total %.3f s  (%.3f ms per prediction), ds.load took %.1f ms",
    load_run_s, load_run_s / n * 1e3, load_s * 1e3))
  return { eager = eager_s, compiled = comp_s, loaded = load_run_s, load = load_s, arena = compiled:memory() }
end

if arg and arg[0] and arg[0]:match("bert_sentiment%.lua$") then
  main(arg)
end
return { CFG = CFG, Bert = Bert, Attention = Attention, encode = encode, main = main, LABELS = LABELS, VOCAB = VOCAB, TEXTS = TEXTS }
