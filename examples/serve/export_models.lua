-- examples/serve/export_models.lua: build the served models and ds.save them (graph + params, no code needed
-- to run them): LeNet-5 probabilities and the BERT-style classifier (on packed texts), plus the BERT vocab as JSON
-- and the serve.json that tells ds.serve how to serve them (then: bin/ds-serve PREFIX PORT OUT_DIR).
-- usage: luajit examples/serve/export_models.lua OUT_DIR [--lenet-weights W.safetensors] [--train-batches N]
--        [--bert-seed N]   (the BERT-style weights' seed, default 22: another seed gives another model version)
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/?.lua;" .. package.path
local ds = require("ds")
local cjson = require("cjson")
local F = ds.nn.functional

local out = arg[1] or error("usage: export_models.lua OUT_DIR [--lenet-weights W] [--train-batches N] [--bert-seed N]", 0)
local weights, train_batches, bert_seed = nil, 60, 22
local i = 2
while i <= #arg do
  if arg[i] == "--lenet-weights" then weights = arg[i + 1]; i = i + 2
  elseif arg[i] == "--train-batches" then train_batches = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--bert-seed" then bert_seed = tonumber(arg[i + 1]); i = i + 2
  else error("unknown argument " .. arg[i], 0) end
end
os.execute("mkdir -p '" .. out .. "'")

-- LeNet-5: trained weights if given, else a short real training run so predictions mean something
local lenet_ex = require("lenet_fashion_mnist")
ds.manual_seed(22)
local lenet = lenet_ex.LeNet()
if weights then
  lenet:load_state_dict(ds.load_state(weights))
else
  local train = ds.data.fashion_mnist { split = "train" }
  local loader = ds.data.DataLoader(train, { batch_size = 256, shuffle = true, transform = lenet_ex.scale })
  local opt = ds.optim.Adam(lenet:parameters(), { lr = 1e-3 })
  for b, x, y in loader:batches() do
    local loss = F.cross_entropy(lenet(x), y)
    opt:zero_grad(); loss:backward(); opt:step()
    if b >= train_batches then break end
  end
end
lenet:eval()
-- x: (batch,1,28,28) in [0,1] -> class probabilities (batch,10)
local lenet_probs = ds.compile(function(x) return F.softmax(lenet(x), -1) end,
  { ds.spec({ "batch", 1, 28, 28 }, "f32", "image") })
ds.save(lenet_probs, out .. "/lenet")

-- BERT-style classifier on packed texts (bert_packed.lua: dynamic token and text counts, no padding; each text's
-- answer bitwise the classifier's on that text alone)
local bert_ex = require("bert_sentiment")
ds.manual_seed(bert_seed)
local bert = bert_ex.Bert(bert_ex.CFG)
bert:eval()
ds.save(require("serve.bert_packed").compile(bert), out .. "/bert")
local f = assert(io.open(out .. "/bert.vocab.json", "wb"))
f:write(cjson.encode(bert_ex.VOCAB)); f:close()
-- how ds.serve serves them (docs/SERVING.md): LeNet-5 through the image adapter at POST /predict (the default),
-- the classifier through the text adapter at POST /predict/bert; any other saved model in the directory would be
-- served by its input specs with the generic JSON contract
f = assert(io.open(out .. "/serve.json", "wb"))
f:write(cjson.encode { default = "lenet", models = {
  lenet = { adapter = "image", max_batch = 32, max_wait_ms = 1, timeout_ms = 1000, labels = { "T-shirt/top",
    "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" } },
  bert = { adapter = "text", vocab = "bert.vocab.json", max_batch = 32, max_tokens = 2048, max_wait_ms = 2,
    timeout_ms = 2000, labels = { "angry", "happy", "neutral", "surprise", "sad", "fear" } } } })
f:close()
print("saved lenet and bert (and serve.json) to " .. out)
