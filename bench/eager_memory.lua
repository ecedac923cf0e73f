-- bench/eager_memory.lua: peak RSS of eager training of a 4-layer char-level GPT (batch 32, seq 64, Adam) in ds
-- and in PyTorch (bench/torch/eager_memory.py, the same model), each in its own process (VmHWM).
-- usage (repo root): luajit bench/eager_memory.lua [--steps 40] [--threads 2] [--no-torch] [--child]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local args = { steps = 40, threads = 2, torch = true, child = false }
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--steps" then args.steps = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--threads" then args.threads = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--no-torch" then args.torch = false
  elseif a == "--child" then args.child = true
  else error("unknown argument " .. a) end
  i = i + 1
end

local function status_kib(field)
  for line in io.lines("/proc/self/status") do
    local v = line:match("^" .. field .. ":%s+(%d+) kB")
    if v then return tonumber(v) end
  end
end

-- the measured run: one process trains and prints its figures as one line
local function child()
  local ds = require("ds")
  local nn, F = ds.nn, ds.F
  ds.set_num_threads(args.threads)
  local V, E, H, L, T, B = 65, 128, 4, 4, 64, 32

  local Block = nn.Module:extend("GPTBlock")
  function Block:init()
    self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
    self.qkv, self.proj = nn.Linear(E, 3 * E), nn.Linear(E, E)
    self.fc, self.out = nn.Linear(E, 4 * E), nn.Linear(4 * E, E)
  end
  function Block:forward(x, mask)
    local hd = E / H
    local qkv = self.qkv(self.ln1(x)):reshape(B, T, 3, H, hd)
    local q = qkv:select(3, 1):transpose(2, 3)                                   -- (B,H,T,hd)
    local k = qkv:select(3, 2):transpose(2, 3)
    local v = qkv:select(3, 3):transpose(2, 3)
    local att = (q:matmul(k:transpose(-2, -1)) * (1 / math.sqrt(hd))):masked_fill(mask, -math.huge):softmax(-1)
    x = x + self.proj(att:matmul(v):transpose(2, 3):reshape(B, T, E))
    return x + self.out(self.fc(self.ln2(x)):gelu())
  end
  local GPT = nn.Module:extend("CharGPT")
  function GPT:init()
    self.tok, self.pos = nn.Embedding(V, E), nn.Embedding(T, E)
    self.blocks = nn.Sequential()
    for _ = 1, L do self.blocks:append(Block()) end
    self.ln, self.head = nn.LayerNorm(E), nn.Linear(E, V)
  end
  function GPT:forward(ids, mask)
    local x = self.tok(ids) + self.pos.weight
    for b = 1, L do x = self.blocks[b](x, mask) end
    return self.head(self.ln(x))
  end

  ds.manual_seed(1)
  local model = GPT()
  local opt = ds.optim.Adam(model:parameters(), { lr = 3e-4 })
  local mask = ds.ones(T, T):triu(1):astype("bool")
  local t0, loss = ds.clock(), nil
  for _ = 1, args.steps do
    local ids = (ds.rand(B, T + 1) * V):astype("i64") + 1
    local x, y = ids:narrow(2, 1, T):contiguous(), ids:narrow(2, 2, T):contiguous()
    opt:zero_grad()
    loss = F.cross_entropy(model(x, mask):reshape(B * T, V), y:reshape(B * T))
    loss:backward()
    opt:step()
  end
  local secs = ds.clock() - t0
  local st = ds.memory_stats()
  print(string.format("RESULT peak_rss_mib=%.1f peak_live_mib=%.1f live_mib=%.1f cached_mib=%.1f tokens_per_s=%.0f loss=%.4f",
    status_kib("VmHWM") / 1024, st.peak_bytes / 2 ^ 20, st.live_bytes / 2 ^ 20, st.cached_bytes / 2 ^ 20,
    args.steps * B * T / secs, loss:item()))
end

if args.child then return child() end

local function run(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  local line = out:match("RESULT[^\n]*")
  if not line then error("no result from: " .. cmd .. "\n" .. out) end
  local r = {}
  for k, v in line:gmatch("(%w[%w_]*)=([%d%.]+)") do r[k] = tonumber(v) end
  return r
end

local env = string.format("OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d", args.threads, args.threads)
local ds_r = run(string.format("%s luajit bench/eager_memory.lua --child --steps %d --threads %d",
  env, args.steps, args.threads))
print(string.format("4-layer char GPT (0.8M params), batch 32, seq 64, Adam, %d steps, %d threads", args.steps,
  args.threads))
print(string.format("ds eager: peak RSS %.1f MiB (C peak live %.1f MiB, live at end %.1f, cached %.1f), %.0f tokens/s",
  ds_r.peak_rss_mib, ds_r.peak_live_mib, ds_r.live_mib, ds_r.cached_mib, ds_r.tokens_per_s))
if args.torch then
  local t_r = run(string.format("%s /usr/bin/python3 bench/torch/eager_memory.py --steps %d --threads %d",
    env, args.steps, args.threads))
  print(string.format("PyTorch eager: peak RSS %.1f MiB, %.0f tokens/s", t_r.peak_rss_mib, t_r.tokens_per_s))
  print(string.format("ds / PyTorch peak RSS: %.2fx (target <= 1.3x)", ds_r.peak_rss_mib / t_r.peak_rss_mib))
end
