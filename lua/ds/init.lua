-- init.lua: the ds namespace: tensors, the op functions, autograd, and (when present) nn/optim/data/trace.
local dsffi = require("ds.ffi")
local Tensor = require("ds.tensor")
local D = require("ds.dispatch")
local autograd = require("ds.autograd")
local F = require("ds.ops")
local print_ = require("ds.print")
local state = require("ds.state")

local ds = { Tensor = Tensor, version = require("ds.version"), ops = D, autograd = autograd }

for name, f in pairs(F) do ds[name] = f end

ds.is_tensor = Tensor.is_tensor
ds.no_grad = autograd.no_grad
ds.enable_grad = autograd.enable_grad
ds.set_grad_enabled = autograd.set_grad_enabled
ds.is_grad_enabled = autograd.is_grad_enabled
ds.grad = autograd.grad
ds.set_printoptions = print_.set_printoptions
function ds.executing_eagerly() return state.trace == nil end

-- wall-clock seconds from a monotonic clock (os.clock is CPU time, summed over threads)
dsffi.ffi.cdef [[ struct ds_timespec { long tv_sec; long tv_nsec; };
                  int clock_gettime(int clk, struct ds_timespec *ts); ]]
local ts = dsffi.ffi.new("struct ds_timespec")
function ds.clock()
  dsffi.ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- engine facts: threads, BLAS core type, memory
function ds.set_num_threads(n) dsffi.C.ds_set_num_threads(n) end
function ds.get_num_threads() return dsffi.C.ds_get_num_threads() end
function ds.info()
  local C, ffi = dsffi.C, dsffi.ffi
  return {
    version = ds.version,
    library = dsffi.libpath,
    threads = C.ds_get_num_threads(),
    blas_threads = C.ds_blas_num_threads(),
    blas_core = ffi.string(C.ds_blas_corename()),
    blas_config = ffi.string(C.ds_blas_config()),
    isa = ffi.string(C.ds_isa_name()),
    isa_env = os.getenv("DS_ISA"),
    openblas_coretype_env = os.getenv("OPENBLAS_CORETYPE"),
    live_bytes = tonumber(C.ds_mem_live_bytes()),
    cached_bytes = tonumber(C.ds_mem_cached_bytes()),
  }
end
ds.config = ds.info
function ds.memory()
  local C = dsffi.C
  return { live_bytes = tonumber(C.ds_mem_live_bytes()), cached_bytes = tonumber(C.ds_mem_cached_bytes()),
           peak_bytes = tonumber(C.ds_mem_peak_bytes()) }
end
function ds.empty_cache() collectgarbage("collect"); dsffi.C.ds_mem_empty_cache() end

-- optional layers: each loads if present (they are added issue by issue)
for _, name in ipairs { "random", "nn", "optim", "data", "state_file", "io", "trace", "compile", "progress" } do
  local ok, mod = pcall(require, "ds." .. name)
  if ok then
    if type(mod) == "table" and mod.install then mod.install(ds) else ds[name] = mod end
  elseif not tostring(mod):find("module 'ds." .. name .. "' not found", 1, true) then
    error(mod, 0)
  end
end

return ds
