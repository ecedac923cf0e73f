-- examples/char_lstm.lua: a character-level LSTM language model on the GNU GPL v3 text (installed on
-- every Debian system by base-files): trains with Adam and gradient clipping, eagerly or with the train
-- step compiled (the same losses bit for bit), then samples text from the model.
--   luajit examples/char_lstm.lua [--steps N] [--eager] [--check N] [--sample N] [--text FILE] [--plot out/char_lstm.svg]
local ds = require("ds")
local nn, F = ds.nn, ds.F

local DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"

-- text -> ids (1-based, i64 tensor), the sorted characters, and char -> id
local function encode(text)
  local seen, chars = {}, {}
  for c in text:gmatch(".") do
    if not seen[c] then seen[c] = true; chars[#chars + 1] = c end
  end
  table.sort(chars)
  local id = {}
  for i, c in ipairs(chars) do id[c] = i end
  local ids = {}
  for i = 1, #text do ids[i] = id[text:sub(i, i)] end
  return ds.tensor(ids, { dtype = "i64" }), chars, id
end

local function read_text(path)
  local f, err = io.open(path, "rb")
  if not f then error("char_lstm: cannot read the text: " .. tostring(err), 0) end
  local s = f:read("*a")
  f:close()
  return s
end

-- ids (B, T) -> logits (B, T, vocab) and the LSTM state {h, c}
local CharLSTM = nn.Module:extend("CharLSTM")
function CharLSTM:init(vocab, opts)
  opts = opts or {}
  self.vocab = vocab
  self.embed = nn.Embedding(vocab, opts.embed or 32)
  self.lstm = nn.LSTM(opts.embed or 32, opts.hidden or 128, { num_layers = opts.layers or 1, batch_first = true })
  self.head = nn.Linear(opts.hidden or 128, vocab)
end
function CharLSTM:forward(ids, state)
  local out, st = self.lstm(self.embed(ids), state)
  return self.head(out), st
end

-- random windows of the text: x (B, T) and the next characters y (B, T)
local function batch(ids, B, T)
  local starts = ds.randint(1, ids:numel() - T + 1, { B, 1 })  -- window starts, 1-based
  local idx = (starts + ds.arange(T, { dtype = "i64" })):reshape(-1)  -- (B*T)
  return ids:index_select(1, idx):reshape(B, T), ids:index_select(1, idx + 1):reshape(B, T)
end

-- the training step for a model and its optimizer: mean cross-entropy over every position
local function train_step(model, opt, clip)
  return function(x, y)
    opt:zero_grad()
    local logits = model(x)
    local loss = F.cross_entropy(logits:reshape(-1, model.vocab), y:reshape(-1))
    loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), clip)
    opt:step()
    return loss
  end
end

-- a model, its optimizer and its step (compiled for batches of (B, T) if opts.compile)
local function setup(vocab, opts)
  ds.manual_seed(opts.seed or 7)
  local model = CharLSTM(vocab, opts)
  local opt = ds.optim.Adam(model:parameters(), { lr = opts.lr or 3e-3 })
  local step = train_step(model, opt, opts.clip or 1.0)
  if opts.compile then
    local B, T = opts.batch or 32, opts.seq or 32
    step = ds.compile(step, { ds.spec({ B, T }, "i64", "x"), ds.spec({ B, T }, "i64", "y") })
  end
  return model, opt, step
end

-- train n steps eagerly and compiled from the same initial weights on the same batches; the
-- losses (Lua numbers) of both, step by step
local function eager_vs_compiled(ids, vocab, n, opts)
  local runs = {}
  for k, compiled in ipairs { false, true } do
    local o = {}
    for key, v in pairs(opts) do o[key] = v end
    o.compile = compiled
    local _, _, step = setup(vocab, o)
    ds.manual_seed(100)  -- the batches
    local losses = {}
    for i = 1, n do
      local x, y = batch(ids, o.batch or 32, o.seq or 32)
      losses[i] = step(x, y)
    end
    runs[k] = losses
  end
  return runs[1], runs[2]
end

-- n characters drawn one at a time from softmax(logits / temperature), starting after prompt
local function sample(model, chars, id, prompt, n, temperature, seed)
  model:eval()
  local rng_state = seed or 1
  local function uniform()  -- a small LCG, so sampling does not touch ds's generator
    rng_state = (rng_state * 1103515245 + 12345) % 2147483648
    return rng_state / 2147483648
  end
  local out = { prompt }
  ds.no_grad(function()
    local state, logits
    for i = 1, #prompt do
      logits, state = model(ds.tensor({ { id[prompt:sub(i, i)] } }, { dtype = "i64" }), state)
    end
    for _ = 1, n do
      local p = F.softmax(logits:reshape(-1) / temperature, -1):totable()
      local u, c = uniform(), #p
      for j = 1, #p do
        u = u - p[j]
        if u <= 0 then c = j; break end
      end
      out[#out + 1] = chars[c]
      logits, state = model(ds.tensor({ { c } }, { dtype = "i64" }), state)
    end
  end)
  model:train()
  return table.concat(out)
end

local function parse_args(argv)
  local o = { steps = 3000, sample = 400, text = DEFAULT_TEXT, compile = true, batch = 32, seq = 32 }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--steps" then o.steps = tonumber(argv[i + 1]); i = i + 2
    elseif a == "--sample" then o.sample = tonumber(argv[i + 1]); i = i + 2
    elseif a == "--text" then o.text = argv[i + 1]; i = i + 2
    elseif a == "--check" then
      o.check = tonumber(argv[i + 1]) or error("char_lstm: a number must follow --check", 0); i = i + 2
    elseif a == "--eager" then o.compile = false; i = i + 1
    elseif a == "--plot" then o.plot = argv[i + 1] or error("char_lstm: a path must follow --plot", 0); i = i + 2
    else error("char_lstm: unknown argument " .. a .. " (--steps N, --eager, --check N, --sample N, --text FILE, --plot PATH)", 0) end
  end
  if not o.steps or not o.sample then error("char_lstm: a number must follow --steps and --sample", 0) end
  return o
end

local function main(argv)
  local o = parse_args(argv)
  local ids, chars, id = encode(read_text(o.text))
  print(string.format("text: %s, %d characters, vocabulary %d", o.text, ids:numel(), #chars))
  if o.check then
    local eager, compiled = eager_vs_compiled(ids, #chars, o.check, o)
    for i = 1, o.check do
      print(string.format("step %d  eager %.6f  compiled %.6f  %s", i, eager[i]:item(), compiled[i]:item(),
        ds.equal(eager[i], compiled[i]) and "bitwise equal" or "DIFFERENT"))
    end
    return
  end
  local model, _, step = setup(#chars, o)
  local bar = ds.progress.bar { total = o.steps, desc = o.compile and "train (compiled)" or "train (eager)", unit = "step" }
  local t0, losses = ds.clock(), {}
  for i = 1, o.steps do
    local x, y = batch(ids, o.batch, o.seq)
    losses[i] = step(x, y):item()
    bar:update(1, { loss = losses[i] })
  end
  bar:close()
  local last, n = 0, math.min(50, o.steps)
  for i = o.steps - n + 1, o.steps do last = last + losses[i] / n end
  print(string.format("loss %.3f at the first step, %.3f over the last %d steps (%d steps, %.1f s)", losses[1], last, n,
    o.steps, ds.clock() - t0))
  if o.plot then
    ds.plot.lines(o.plot, { { title = "character LSTM: training loss", xlabel = "step", ylabel = "cross-entropy",
                              series = { { name = "loss per step", y = losses } } } })
    print("wrote the loss curve to " .. o.plot)
  end
  print("sample:\n" .. sample(model, chars, id, "This License ", o.sample, 0.8, 1))
end

if arg and arg[0] and arg[0]:match("char_lstm%.lua$") then main(arg) end
return { CharLSTM = CharLSTM, encode = encode, read_text = read_text, batch = batch, setup = setup,
         eager_vs_compiled = eager_vs_compiled, sample = sample, DEFAULT_TEXT = DEFAULT_TEXT }
