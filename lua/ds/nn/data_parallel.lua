-- nn/data_parallel.lua: DataParallel as PyTorch's on a machine without CUDA devices: the module runs as it is
-- (one replica), wrapped as self.module, so its parameters are named "module.<name>" as PyTorch's are; several
-- processes train with DistributedDataParallel (nn/ddp.lua).
local Module = require("ds.nn.module")
local constructor_args = require("ds.nn.constructor_args")
local errors = require("ds.errors")

local DataParallel = Module:extend("DataParallel")
DataParallel._doc = "DataParallel(module, [device_ids, output_device, dim]): the module itself on CPU (one replica); " ..
  "parameters named module.<name>"
function DataParallel:init(module, ...)
  if not Module.is_module(module) then errors.raise("DataParallel: expects DataParallel(module, ...)") end
  local o = constructor_args.merge("DataParallel", { "device_ids", "output_device", "dim" },
    { device_ids = "table", output_device = "any", dim = "integer" }, {}, ...)
  if o.device_ids ~= nil and #o.device_ids > 0 then
    errors.raise("DataParallel: device_ids are CUDA devices; ds runs on the CPU (give none, or use "
      .. "DistributedDataParallel for several processes)")
  end
  self.module = module
end
function DataParallel:forward(...) return self.module(...) end

return { DataParallel = DataParallel }
