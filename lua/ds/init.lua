-- init.lua: the ds namespace: tensors, the op functions, autograd, nn/optim/data, trace/compile, save/load.
-- The top of the layering (docs/INTERNALS.md): every module below is required here, none requires "ds".
local dsffi = require("ds.ffi")
local clock = require("ds.clock")
local Tensor = require("ds.tensor")
local D = require("ds.dispatch")
local autograd = require("ds.autograd")
local F = require("ds.ops")
local linalg = require("ds.linalg")
local print_ = require("ds.print")
local state = require("ds.state")
local random = require("ds.random")
local nn = require("ds.nn")
local distributions = require("ds.distributions")
local autograd_function = require("ds.autograd_function")
local autograd_functional = require("ds.autograd_functional")
local optim = require("ds.optim")
local data = require("ds.data")
local state_file = require("ds.state_file")
local trace = require("ds.trace")
local control = require("ds.control")
require("ds.ops.control") -- the cond, while_loop and print nodes (above control.lua, which traces them)
local compile = require("ds.compile")
local lazy = require("ds.lazy")
local quantized = require("ds.nn.quantized")
local convert = require("ds.convert")
local progress = require("ds.progress")
local help = require("ds.help")
local errors = require("ds.errors")
local plot = require("ds.plot")
local profile_view = require("ds.profile_view")
local io_ = require("ds.io")
local distributed = require("ds.distributed")
local onnx = require("ds.onnx")

local ds = { Tensor = Tensor, version = require("ds.version"), ops = D, autograd = autograd }

for name, f in pairs(F) do ds[name] = f end

ds.is_tensor = Tensor.is_tensor
ds.no_grad = autograd.no_grad
ds.enable_grad = autograd.enable_grad
ds.set_grad_enabled = autograd.set_grad_enabled
ds.is_grad_enabled = autograd.is_grad_enabled
ds.grad = autograd.grad
autograd.Function = autograd_function.Function -- ds.autograd.Function: custom functions (forward/backward, ctx)
autograd.functional = autograd_functional -- ds.autograd.functional: jacobian, hessian, vjp, jvp, vhp, hvp
ds.set_printoptions = print_.set_printoptions
function ds.executing_eagerly() return state.trace == nil end
ds.clock = clock -- wall-clock seconds, monotonic
ds.distributed = distributed -- collectives over Open MPI processes (1-based ranks)

-- engine facts: threads, BLAS core type, memory
function ds.set_num_threads(n) dsffi.C.ds_set_num_threads(n) end
function ds.get_num_threads() return dsffi.C.ds_get_num_threads() end
function ds.info()
  local C, ffi = dsffi.C, dsffi.ffi
  return {
    version = ds.version,
    library = dsffi.libpath,
    threads = C.ds_get_num_threads(),
    starved_regions = tonumber(C.ds_team_starved()),   -- regions whose threads the host starved (team.c)
    starved_holds = tonumber(C.ds_team_holds()),       -- times ds went to one thread for a while (team.c)
    blas_threads = C.ds_blas_num_threads(),
    blas_core = ffi.string(C.ds_blas_corename()),
    blas_config = ffi.string(C.ds_blas_config()),
    isa = ffi.string(C.ds_isa_name()),
    int8_path = ffi.string(C.ds_int8_path()),   -- the int8 products' kernel (qgemm.c)
    bf16_path = ffi.string(C.ds_bf16_path()),   -- the bf16 products' kernel (bgemm.c)
    isa_env = os.getenv("DS_ISA"),
    openblas_coretype_env = os.getenv("OPENBLAS_CORETYPE"),
    live_bytes = tonumber(C.ds_mem_live_bytes()),
    cached_bytes = tonumber(C.ds_mem_cached_bytes()),
  }
end
-- C storage bytes: live (held by tensors), cached (freed, kept for reuse), peak (live's high-water mark)
function ds.memory_stats()
  local C = dsffi.C
  return { live_bytes = tonumber(C.ds_mem_live_bytes()), cached_bytes = tonumber(C.ds_mem_cached_bytes()),
           peak_bytes = tonumber(C.ds_mem_peak_bytes()) }
end
ds.memory = ds.memory_stats
function ds.empty_cache() collectgarbage("collect"); dsffi.C.ds_mem_empty_cache() end

-- the layers above the op table put their API into the namespace
random.install(ds)
nn.install(ds)
ds.distributions = distributions
ds.linalg = linalg -- torch.linalg: norms, inv, det, solve, cross
optim.install(ds)
data.install(ds)
state_file.install(ds)
trace.install(ds)
control.install(ds)
convert.install(ds)
ds.compile = lazy.compile
-- ds.quantize(model, opts): int8 quantization of its Linear (and Conv2d) layers, dynamic or static (nn/quantized.lua,
-- docs/QUANTIZATION.md), compiled with specs
function ds.quantize(model, opts) return quantized.quantize(model, opts, lazy.compile) end
ds.Lazy = lazy.Lazy
ds.is_compiled = compile.is_compiled
ds.format_profile = compile.format_profile
ds.progress = progress
function ds.help(name, value) return help.help(ds, name, value) end
ds.debug = errors.set_debug
ds.plot = plot
ds.save_profile = profile_view.save
io_.install(ds)
onnx.install(ds)
-- PyTorch's dtype names as values (x:to(ds.bfloat16), {dtype = ds.half}), each the ds dtype name it aliases
for alias, name in pairs(require("ds.dtype").alias) do ds[alias] = name end
require("ds.generate").install(ds) -- ds.generate, ds.generation_loop (docs/GENERATION.md)
require("ds.generator").install(ds) -- ds.generator: continuous batching (docs/GENERATION.md)

-- every Tensor method checks self (the eager shortcuts check their operands); ds.<name> is the same function
local checked = Tensor._require_self(D.shortcuts)
for name, f in pairs(ds) do if checked[f] then ds[name] = checked[f] end end
-- the Tensor class is complete: every module that declares methods (Tensor._define) is loaded; close it
Tensor._freeze()

return ds
