-- examples/serve/serve_compute.lua: the model side of serving, run in nginx's worker-thread Lua VMs
-- (ngx.run_worker_thread, off the event loop): ds.load a model version once per VM, run one batch per call.
-- Inputs and outputs cross the VM boundary as byte strings (the only values the thread API copies cheaply).
local ffi = require("ffi")
local ds = require("ds")
local sym = require("ds.sym")

local M = {}
local VM = tostring(M):match("0x%x+")   -- this VM's id: the address of a table it keeps alive (unique per process)
local models = {}   -- name -> version -> the ds.load'ed callable of this VM

-- what /health tells about a loaded model: name, format version, params file, input specs (symbolic dims by name)
local function describe(m, name)
  local inputs = {}
  for i, s in ipairs(m.ir.specs) do
    local shape = {}
    for d, v in ipairs(s.shape) do shape[d] = type(v) == "number" and v or tostring(v) end
    inputs[i] = { name = s.name, dtype = s.dtype, shape = shape }
  end
  return { name = name, format_version = m.format_version, params_file = m.params_file, inputs = inputs }
end

-- inputs {{dtype, shape, bytes}} (as serve_inputs.lua packs them) -> tensors
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

-- compile m's plan for a batch like inputs without running it (a first call of that shape then runs at once)
local function plan(m, inputs)
  m:plan_for(sym.bind_inputs(m.ir.name or "model", m.ir.specs, tensors(inputs)))
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

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a"); f:close()
  return s
end

-- load dir/name as `version` (the files whose graph file reads graph_text), with its plans compiled for the
-- batches warm -> {vm, loaded = true, ok, info | error}
local function load(dir, name, version, graph_text, warm)
  local path = dir .. "/" .. name
  local ok, m = pcall(ds.load, path)
  -- the version names the files the worker read: a graph file replaced meanwhile would be another version
  if ok and read(path .. ".json") ~= graph_text then ok, m = false, name .. ".json changed while it was loading" end
  for _, inputs in ipairs(ok and warm or {}) do
    ok, m = pcall(function() plan(m, inputs); return m end)
    if not ok then break end
  end
  if not ok then return { vm = VM, loaded = true, ok = false, error = tostring(m) } end
  models[name][version] = m
  return { vm = VM, loaded = true, ok = true, info = describe(m, name) }
end

-- This VM holds dir/name as `version` (loaded now unless it had it) -> {vm, loaded, ok, info | error}
function M.ensure(dir, name, version, graph_text, warm, live)
  prune(live)
  models[name] = models[name] or {}
  if models[name][version] then return { vm = VM, ok = true } end
  return load(dir, name, version, graph_text, warm)
end

-- a batch on `version` -> the model's first output as f32 bytes (B rows), its row length, and the call's seconds
function M.run(name, version, inputs, live)
  prune(live)
  local m = models[name] and models[name][version]
  if not m then return nil, "model '" .. name .. "' version " .. version .. " is not loaded in this thread" end
  local t0 = ds.clock()
  local y = m(unpack(tensors(inputs))):contiguous()
  if y.dtype ~= "f32" then y = y:float() end
  local cols = y:numel() / y:size(1)
  return ffi.string(y:data_ptr(), y:numel() * 4), cols, ds.clock() - t0
end

return M
