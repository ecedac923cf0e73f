-- ops/collective.lua: all_reduce as an op (a collective node the compiled runtime runs through src/collective.c),
-- so a traced train step holds its gradient reduction; ds.distributed sets up the processes it talks to.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local errors = require("ds.errors")
local dsffi = require("ds.ffi")
local ffi = require("ffi")
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

-- x: (...) -> (...) reduced over every process in rank order (same bits on every rank)
D.define {
  name = "all_reduce", kind = "collective", kernel = "ds_all_reduce_%s", dtypes = C.FLOAT, ninputs = 1,
  side_effects = true,   -- every rank must run it, in the same order: never merged, folded or removed
  doc = "sum, mean or max of x over the processes of ds.distributed, reduced in rank order",
  attrs = { { "op", "enum", "sum", { "sum", "mean", "max" } } },
  args = { "op" },
  prepare = function(inputs)
    if not C.is_tensor(inputs[1]) then errors.raise("all_reduce: expects a tensor, got " .. type(inputs[1])) end
  end,
  infer = function(inputs) return { shape = inputs[1]._shape, dtype = inputs[1].dtype } end,
  -- the gradient of every rank's input is the reduction of every rank's output gradient
  backward = function(ctx, g)
    if ctx.attrs.op == "max" then errors.raise("all_reduce: op = \"max\" has no gradient") end
    return F.all_reduce(g, ctx.attrs.op)
  end,
  sample = function()   -- in a test process: a world of one process unless ds.distributed.init() ran
    if dsffi.C.ds_comm_size() == 0 then
      local one = ffi.new("ds_comm"); one.size, one.rank, one.timeout = 1, 0, 1
      dsffi.check(dsffi.C.ds_comm_set(one), "all_reduce")
    end
    local x = F.sin(F.arange(12, { dtype = "f32" }) * 0.7):reshape(3, 4)
    return { x }, { op = "mean" }, function(x_) return F.all_reduce(x_, "mean") end
  end,
}
C.export("all_reduce", C.api(D.by_name.all_reduce))

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
