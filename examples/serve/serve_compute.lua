-- examples/serve/serve_compute.lua: the model side of serving, run in nginx's worker-thread Lua VMs
-- (ngx.run_worker_thread, off the event loop): ds.load the models once per VM, run one batch per call.
-- Inputs and outputs cross the VM boundary as byte strings (the only values the thread API copies cheaply).
local ffi = require("ffi")
local ds = require("ds")

local M = {}
local models = {}   -- name -> the ds.load'ed callable of this VM

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

-- one model call on a batch: inputs {{dtype, shape, bytes}} (as serve_inputs.lua packs them) -> the first output
local function call(m, inputs)
  local args = {}
  for i, inp in ipairs(inputs) do
    local t = ds.empty(inp.shape, { dtype = inp.dtype })
    assert(t:numel() * t:element_size() == #inp.bytes, "serve_compute: input bytes do not match the shape")
    ffi.copy(t:data_ptr(), inp.bytes, #inp.bytes)
    args[i] = t
  end
  return m(unpack(args))
end

-- load dir/name for each name into this VM, then run it once on each batch of warm[name] (compiling its plans):
-- name -> {ok = true, info} or {ok = false, error}
function M.load(dir, names, warm)
  local out = {}
  for _, name in ipairs(names) do
    local ok, m = pcall(ds.load, dir .. "/" .. name)
    for _, inputs in ipairs(ok and warm[name] or {}) do
      ok, m = pcall(function() call(m, inputs); return m end)
      if not ok then break end
    end
    if ok then
      models[name] = m
      out[name] = { ok = true, info = describe(m, name) }
    else
      models[name] = nil
      out[name] = { ok = false, error = tostring(m) }
    end
  end
  return out
end

-- a batch -> the model's first output as f32 bytes (B rows), its row length, and the seconds the call took
function M.run(name, inputs)
  local m = models[name]
  if not m then return nil, "model '" .. name .. "' is not loaded in this thread" end
  local t0 = ds.clock()
  local y = call(m, inputs):contiguous()
  if y.dtype ~= "f32" then y = y:float() end
  local cols = y:numel() / y:size(1)
  return ffi.string(y:data_ptr(), y:numel() * 4), cols, ds.clock() - t0
end

return M
