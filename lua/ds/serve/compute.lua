-- serve/compute.lua: the model side of serving, run in nginx's worker-thread Lua VMs (ngx.run_worker_thread,
-- off the event loop): ds.load a model version once per VM, run one batch per call, or one generation step.
-- Inputs and outputs cross the VM boundary as byte strings (the only values the thread API copies cheaply).
local ffi = require("ffi")
local ds = require("ds")
local util = require("ds.serve.util")
local session = require("ds.serve.session")

local M = {}
local VM = tostring(M):match("0x%x+")   -- this VM's id: the address of a table it keeps alive (unique per process)
local models = {}   -- name -> version -> the ds.load'ed callable of this VM

-- what /health tells about a loaded model: name, format version, params file, input specs (symbolic dims by name)
local function describe(m, name)
  return { name = name, format_version = m.format_version, params_file = m.params_file, inputs = m:specs() }
end

-- inputs {{dtype, shape, bytes}} (as the adapters pack them) -> tensors
local function tensors(inputs)
  local args = {}
  for i, inp in ipairs(inputs) do
    local t = ds.empty(inp.shape, { dtype = inp.dtype })
    assert(t:numel() * t:element_size() == #inp.bytes, "serve_compute: input bytes do not match the shape")
    ffi.copy(t:data_ptr(), inp.bytes, #inp.bytes)
    args[i] = t
  end
  return args
end

-- compile m's plan for a batch like inputs, without running it (a first request of that shape then runs at once)
local function plan(m, inputs)
  m:prepare(tensors(inputs))
end

-- drop the versions no request can still need (live: name -> {version = true}); their params are freed
local function prune(live)
  local dropped = false
  for name, versions in pairs(models) do
    for v in pairs(versions) do
      if not (live[name] and live[name][v]) then versions[v], dropped = nil, true end
    end
  end
  if dropped then collectgarbage() end
end

-- load dir/name as `version` (the files whose graph file reads graph_text), with its plans compiled for the
-- batches warm -> {vm, loaded = true, ok, info | error}
local function load(dir, name, version, graph_text, warm)
  local path = dir .. "/" .. name
  local ok, m = pcall(ds.load, path)
  -- the version names the files the worker read: a graph file replaced meanwhile would be another version
  if ok and util.read(path .. ".json") ~= graph_text then
    ok, m = false, name .. ".json changed while it was loading"
  end
  if not ok then return { vm = VM, loaded = true, ok = false, error = tostring(m) } end
  -- a warm-up batch the model refuses (its values are made up) leaves the rest to the first requests
  local warm_error
  for _, inputs in ipairs(warm or {}) do
    local fine, err = pcall(plan, m, inputs)
    if not fine then warm_error = "warm-up: " .. tostring(err); break end
  end
  models[name][version] = m
  local info = describe(m, name)
  info.warm_error = warm_error
  return { vm = VM, loaded = true, ok = true, info = info }
end

-- This VM holds dir/name as `version` (loaded now unless it had it) -> {vm, loaded, ok, info | error}
function M.ensure(dir, name, version, graph_text, warm, live)
  prune(live)
  models[name] = models[name] or {}
  if models[name][version] then return { vm = VM, ok = true } end
  return load(dir, name, version, graph_text, warm)
end

-- the loaded `version` of `name` in this VM (the versions no request needs dropped first), or nil and why not
local function loaded(name, version, live)
  prune(live)
  local m = models[name] and models[name][version]
  if not m then return nil, "model '" .. name .. "' version " .. version .. " is not loaded in this thread" end
  return m
end

-- a tensor -> {dtype, shape, bytes}
local function bytes_of(y)
  y = y:contiguous()
  return { dtype = y.dtype, shape = y.shape, bytes = ffi.string(y:data_ptr(), y:numel() * y:element_size()) }
end

-- a batch on `version` -> the model's outputs {{dtype, shape, bytes}}, and the call's seconds
function M.run(name, version, inputs, live)
  local m, err = loaded(name, version, live)
  if not m then return nil, err end
  local t0 = ds.clock()
  local ys = { m(unpack(tensors(inputs))) }
  local out = {}
  for i, y in ipairs(ys) do out[i] = bytes_of(y) end
  return out, ds.clock() - t0
end

-- One generation step of a step model (docs/SERVING.md "Streamed generation") on `version`: seqs, a list of
-- token id lists (each a sequence's prompt and the tokens generated so far), packed as the model's ids (N), pos
-- (N) and seg (B, 2) i64 inputs (N and B rounded up: few plans) -> each sequence's next token (the argmax of its
-- row of the logits, the first on ties) and that logit, and the call's seconds. Every row is computed on its own
-- (DESIGN.md), so a sequence gets the same bits in any batch and alone.
function M.step(name, version, seqs, live)
  local m, err = loaded(name, version, live)
  if not m then return nil, err end
  local t0 = ds.clock()
  local n = 0
  local B = 1
  while B < #seqs do B = B * 2 end
  -- a padding sequence (B past #seqs) is one token (id 1 at position 1) of its own rows: segments stay in row order
  for b = 1, B do n = n + (seqs[b] and #seqs[b] or 1) end
  local N = util.token_rows(n)
  local ids, pos, seg = ds.ones({ N }, { dtype = "i64" }), ds.ones({ N }, { dtype = "i64" }),
    ds.zeros({ B, 2 }, { dtype = "i64" })
  local pi, pp, ps = ffi.cast("int64_t *", ids:data_ptr()), ffi.cast("int64_t *", pos:data_ptr()),
    ffi.cast("int64_t *", seg:data_ptr())
  local at = 0
  for b = 1, B do
    local s = seqs[b] or { 1 }
    ps[2 * b - 2], ps[2 * b - 1] = at + 1, #s
    for t = 1, #s do
      pi[at], pp[at] = s[t], t
      at = at + 1
    end
  end
  local logits = m(ids, pos, seg):float():contiguous()
  local V = logits:size(2)
  local p = ffi.cast("const float *", logits:data_ptr())
  local tokens, values = {}, {}
  for b = 1, #seqs do
    local best = 0
    for v = 1, V - 1 do if p[(b - 1) * V + v] > p[(b - 1) * V + best] then best = v end end
    tokens[b], values[b] = best + 1, tonumber(p[(b - 1) * V + best])
  end
  return { tokens = tokens, logits = values }, ds.clock() - t0
end

-- A generation session of a KV-cache step model (docs/SERVING.md "KV caches") on `version`, in this VM until no
-- request has run or waited for a moment: ds.generator over the model's slots, talking to the event loop over the
-- Unix socket `path` (serve/session.lua) -> true, steps run
function M.session(name, version, path, max_len, live)
  local m, err = loaded(name, version, live)
  if not m then return nil, err end
  return session.run(m, path, max_len)
end

return M
