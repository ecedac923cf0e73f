-- ops/fused.lua: op-table entries of the compiler's own nodes, which only ds.compile creates (internal:
-- no Lua API, ds.load refuses them in a graph file): `fused`, an elementwise chain run as one program
-- (passes/fuse.lua, src/fused.c), and `matmul_ep`, a matmul with such a chain applied to its output
-- (passes/epilogue.lua). Their attrs are the program, packed by the passes.
local C = require("ds.ops.common")
local D = require("ds.dispatch")

return {
  fused = D.define { name = "fused", kind = "fused", kernel = "ds_fused_%s", dtypes = C.ALL, internal = true },
  matmul_ep = D.define { name = "matmul_ep", kind = "fused", kernel = "ds_matmul_ep_%s", dtypes = C.FLOAT,
                         internal = true },
}
