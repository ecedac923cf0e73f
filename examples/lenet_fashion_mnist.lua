-- examples/lenet_fashion_mnist.lua: LeNet-5 trained eagerly on Fashion-MNIST (the TensorFlow article's recipe:
-- Adam 1e-3, batch 256, 5 epochs, seed 22). Prints per epoch the train loss, test accuracy and seconds.
--   luajit examples/lenet_fashion_mnist.lua [--epochs N] [--limit N batches per epoch] [--out weights.safetensors]
--                                          [--plot out/lenet_training.svg]   (training curves as SVG)
--                                           [--threads N] [--quiet] [--compile] [--distributed]
-- --compile trains with ds.compile'd steps (forward, backward and Adam in one C plan; same numbers).
-- --distributed: data parallel under mpirun (docs/DISTRIBUTED.md), the global batch of 256 split across the ranks:
--   mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 luajit examples/lenet_fashion_mnist.lua --distributed
local ds = require("ds")
local nn, F = ds.nn, ds.nn.functional

local function parse_args(argv)
  local opts = { epochs = 5, limit = nil, out = nil, threads = nil, quiet = false, compile = nil, distributed = nil }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--epochs" or a == "--limit" or a == "--threads" then
      local v = tonumber(argv[i + 1])
      if not v or v < 1 or v ~= math.floor(v) then error(a .. " needs a positive integer", 0) end
      opts[a:sub(3)] = v; i = i + 2
    elseif a == "--out" or a == "--plot" then
      opts[a:sub(3)] = argv[i + 1] or error(a .. " needs a path", 0); i = i + 2
    elseif a == "--quiet" then
      opts.quiet = true; i = i + 1
    elseif a == "--compile" or a == "--distributed" then
      opts[a:sub(3)] = true; i = i + 1
    else
      error("unknown argument " .. a .. " (--epochs N, --limit N, --out PATH, --plot PATH, --threads N, --quiet, --compile, --distributed)", 0)
    end
  end
  return opts
end

-- LeNet-5: x (N,1,28,28) -> logits (N,10), initialized with Keras' defaults as in the article
-- (Glorot-uniform weights, zero biases; PyTorch's defaults reach ~0.855 after 5 epochs, these ~0.87)
local LeNet = nn.Module:extend("LeNet")
function LeNet:init()
  self.features = nn.Sequential(
    nn.Conv2d(1, 6, 5, { padding = "same" }), nn.ReLU(), nn.MaxPool2d(2),   -- (N,6,14,14)
    nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))                        -- (N,16,5,5)
  self.classifier = nn.Sequential(
    nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
  for name, p in self:named_parameters() do
    if name:match("weight$") then nn.init.xavier_uniform_(p) else nn.init.zeros_(p) end
  end
end
function LeNet:forward(x) return self.classifier(self.features(x)) end

-- u8 images (N,28,28) -> f32 (N,1,28,28) scaled to [0,1]
local function scale(x, y) return (x:astype("f32") * (1 / 255)):unsqueeze(2), y end

-- fraction of test images classified correctly
local function accuracy(model, loader)
  model:eval()
  local correct, total = 0, 0
  ds.no_grad(function()
    for x, y in loader:iter() do
      correct = correct + model(x):argmax(-1):eq(y):sum():item()
      total = total + y:size(1)
    end
  end)
  model:train()
  return correct / total
end

local function main(argv)
  local opts = parse_args(argv)
  if opts.threads then ds.set_num_threads(opts.threads) end
  ds.manual_seed(22)
  local train = ds.data.fashion_mnist { split = "train" }
  local test = ds.data.fashion_mnist { split = "test" }
  local batching = { batch_size = 256, shuffle = true, transform = scale }
  local dist = opts.distributed and ds.distributed.init()
  local print = dist and dist.rank() > 1 and function() end or print   -- rank 1 reports
  if dist then   -- each rank trains on its shard with 256 / world_size samples per step
    if 256 % dist.world_size() ~= 0 then error("--distributed: the batch of 256 does not split over " .. dist.world_size() .. " ranks", 0) end
    batching = { batch_size = 256 / dist.world_size(), transform = scale, sampler = ds.data.DistributedSampler(train, { seed = 22 }) }
  end
  local train_loader = ds.data.DataLoader(train, batching)
  local test_loader = ds.data.DataLoader(test, { batch_size = 1000, transform = scale })
  local net = LeNet()
  local model = dist and nn.DistributedDataParallel(net) or net
  local opt = ds.optim.Adam(model:parameters(), { lr = 1e-3 })
  local info = ds.info()
  print(string.format("LeNet-5 on Fashion-MNIST: %d train / %d test images, %d threads, BLAS core %s%s",
    train:len(), test:len(), info.threads, info.blas_core, dist and string.format(", %d processes", dist.world_size()) or ""))
  local nbatches = opts.limit and math.min(opts.limit, train_loader:len()) or train_loader:len()
  local function train_step(x, y)
    local loss = F.cross_entropy(model(x), y)
    opt:zero_grad()
    loss:backward()
    if dist then model:sync_gradients() end
    opt:step()
    return loss
  end
  if opts.compile then   -- one plan per batch size (the last batch of an epoch is smaller)
    train_step = ds.compile(train_step, { ds.spec({ "batch", 1, 28, 28 }, "f32", "x"), ds.spec({ "batch" }, "i64", "y") })
  end
  local results, curve = {}, { step = {}, loss = {} } -- curve: the loss of every batch, x in epochs
  for epoch = 1, opts.epochs do
    local bar = ds.progress.bar { total = nbatches, desc = string.format("epoch %d/%d", epoch, opts.epochs),
                                  unit = "batch", out = (opts.quiet or print ~= _G.print) and { write = function() end } or io.stdout }
    local t0 = ds.clock()
    for i, x, y in train_loader:batches() do
      local loss = train_step(x, y):item()
      bar:update(1, { loss = loss })
      curve.step[#curve.step + 1] = epoch - 1 + i / nbatches
      curve.loss[#curve.loss + 1] = loss
      if i == nbatches then break end
    end
    local seconds = ds.clock() - t0
    local loss = bar:close().loss
    local acc = accuracy(model, test_loader)
    results[epoch] = { loss = loss, accuracy = acc, seconds = seconds }
    print(string.format("epoch %d/%d  train loss %.4f  test accuracy %.4f  %.2f s%s", epoch, opts.epochs, loss, acc, seconds,
      opts.compile and " (compiled)" or ""))
  end
  if opts.out then
    if dist then dist.save_state(net:state_dict(), opts.out) else ds.save_state(net:state_dict(), opts.out) end
    print("saved the trained weights to " .. opts.out)
  end
  if opts.plot and (not dist or dist.rank() == 1) then
    local epochs, accs, losses = {}, {}, {}
    for e, r in ipairs(results) do epochs[e], accs[e], losses[e] = e, r.accuracy, r.loss end
    ds.plot.lines(opts.plot, {
      { title = "LeNet-5 on Fashion-MNIST: training loss", xlabel = "epoch", ylabel = "cross-entropy",
        series = { { name = "batch loss", x = curve.step, y = curve.loss }, { name = "epoch mean", x = epochs, y = losses } } },
      { title = "test accuracy", xlabel = "epoch", ylabel = "accuracy", series = { { name = "test", x = epochs, y = accs } } },
    })
    print("wrote the training curves to " .. opts.plot)
  end
  return results
end

-- run as a script; `require`d (tests, benchmarks) it returns its parts
if arg and arg[0] and arg[0]:match("lenet_fashion_mnist%.lua$") then
  main(arg)
end
return { LeNet = LeNet, scale = scale, accuracy = accuracy, main = main, parse_args = parse_args }
