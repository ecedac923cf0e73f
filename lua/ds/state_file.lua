-- state_file.lua: ds.save_state / ds.load_state: named tensors to and from a safetensors file (the layout
-- and its one reader are ds/safetensors.lua). Saves are atomic and durable (files.write_atomic) and remove the
-- temporary files of savers that died.
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local files = require("ds.files")
local safetensors = require("ds.safetensors")
local dtype = require("ds.dtype")
local options = require("ds.options")

local M = {}

local function failer(path) return function(msg) errors.raise(string.format("state file %s: %s", path, msg)) end end

-- Write named tensors (a table name -> tensor) and optional string metadata to path, atomically.
function M.write(path, named, metadata)
  if type(path) ~= "string" then errors.raise("save_state: path must be a string, got " .. type(path)) end
  if type(named) ~= "table" or Tensor.is_tensor(named) then
    errors.raise("save_state: expected a table of name -> tensor, got " ..
      (Tensor.is_tensor(named) and "a tensor" or type(named)))
  end
  local fail = failer(path)
  local tensors = {}
  for name, t in pairs(named) do
    if type(name) ~= "string" then fail("tensor names must be strings, got " .. type(name) .. " " .. tostring(name)) end
    if name == "__metadata__" then fail("'__metadata__' is reserved and cannot name a tensor") end
    if not Tensor.is_tensor(t) then fail(string.format("'%s' is a %s, not a tensor", name, type(t))) end
    if not t._c then fail(string.format("'%s' is an abstract tensor (tracing); it has no values to save", name)) end
    tensors[name] = t:is_contiguous() and t or t:contiguous()
  end
  -- under the directory's lock (as ds.save): the write, then the temporary files of savers of path that died
  local dir, stem = files.split(path)
  files.with_lock(dir, function()
    files.write_atomic(path, safetensors.chunks(tensors, metadata, fail), fail)
    files.remove_stale_temps(dir, stem, fail)
  end, function(msg) fail("cannot write " .. path .. ": " .. msg) end)
end

-- Read a state file: returns tensors (name -> tensor, each its own copy), metadata (name -> string).
-- opts.dtype: the floating-point tensors converted to this float dtype (a bf16 checkpoint read as f32);
-- integer and bool tensors keep theirs. Without it every tensor keeps the file's dtype.
function M.read(path, opts)
  if type(path) ~= "string" then errors.raise("load_state: path must be a string, got " .. type(path)) end
  opts = options.check(opts, "load_state", { dtype = "dtype" })
  local want = opts.dtype and dtype.normalize(opts.dtype)
  if opts.dtype and not dtype.is_float[want] then
    errors.raise("load_state: option 'dtype' must be a float dtype (f32, f64, bf16, f16), got " .. tostring(opts.dtype))
  end
  local fail = failer(path)
  local bytes, size = files.read(path, nil, fail)
  local entries, metadata = safetensors.parse(bytes, size, fail)
  local tensors = {}
  for name, e in pairs(entries) do
    local t = safetensors.tensor(e, bytes, nil, fail)
    if want and dtype.is_float[t.dtype] and t.dtype ~= want then t = t:astype(want) end
    tensors[name] = t
  end
  return tensors, metadata
end

function M.install(ds)
  ds.state_file = M
  -- ds.save_state(tbl, path [, metadata]): name -> tensor (any dtype) to a safetensors file, atomically
  function ds.save_state(tbl, path, metadata) return M.write(path, tbl, metadata) end
  -- ds.load_state(path [, {dtype = 'f32'}]) -> tensors, metadata; dtype converts the float tensors (bf16 -> f32)
  function ds.load_state(path, opts) return M.read(path, opts) end
end

return M
