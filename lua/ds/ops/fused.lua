-- ops/fused.lua: op-table entries of the compiler's own nodes, which only ds.compile creates (internal:
-- no Lua API, ds.load refuses them in a graph file): `fused`, an elementwise chain run as one program
-- (passes/fuse.lua, src/fused.c), and `matmul_ep`, a matmul with such a chain applied to its output
-- (passes/epilogue.lua). Their attrs are the program, packed by the passes. For constant weights
-- (passes/prepack.lua): `pack_weight`, a (K, N) f32 matrix -> (ceil(N / 32), K, 32) strips of 32 columns (the
-- GEMM's layout, zero columns past N), and `matmul_packed` / `matmul_packed_ep`, matmul / matmul_ep reading
-- such a weight: the same FMA chains, the same bits, nothing repacked per call. `conv2d_ep`: conv2d with such a
-- chain applied to its output (passes/epilogue.lua); its attrs are conv2d's plus `epilogue` (the program and its
-- packed numbers, printed as the program's ops), packed after the conv attrs. `conv2d_pool`: conv2d, then an
-- activation (`act`: none, relu or hardswish), then max or average pooling (`pool`, with the pool's kernel_size,
-- pool_stride, pool_padding, count_include_pad) in one step (passes/conv_pool.lua): the three steps' ops, so their bits.
local C = require("ds.ops.common")
local D = require("ds.dispatch")

-- conv2d_pool's codes (src/conv_ep.h's CONV_ACT_* and CONV_POOL_*)
local CONV_ACT = { none = 0, hardswish = 1, relu = 2 }
local POOL_KIND = { max = 1, avg = 2 }

return {
  fused = D.define { name = "fused", kind = "fused", kernel = "ds_fused_%s", dtypes = C.ALL, internal = true },
  matmul_ep = D.define { name = "matmul_ep", kind = "fused", kernel = "ds_matmul_ep_%s", dtypes = C.FLOAT,
                         internal = true },
  pack_weight = D.define { name = "pack_weight", kind = "fused", kernel = "ds_pack_weight_%s", dtypes = { f32 = true },
                           ninputs = 1, internal = true },
  matmul_packed = D.define { name = "matmul_packed", kind = "fused", kernel = "ds_matmul_packed_%s",
                             dtypes = { f32 = true }, ninputs = 2, internal = true },
  matmul_packed_ep = D.define { name = "matmul_packed_ep", kind = "fused", kernel = "ds_matmul_packed_ep_%s",
                                dtypes = { f32 = true }, internal = true },
  conv2d_ep = D.define { name = "conv2d_ep", kind = "fused", kernel = "ds_conv2d_ep_%s", dtypes = C.FLOAT,
                         internal = true,
                         pack = function(a)
                           local p = { a.stride[1], a.stride[2], a.padding[1], a.padding[2], a.dilation[1],
                                       a.dilation[2], a.groups }
                           for _, v in ipairs(a.epilogue.packed) do p[#p + 1] = v end
                           return p
                         end },
  conv2d_pool = D.define { name = "conv2d_pool", kind = "fused", kernel = "ds_conv2d_pool_%s", dtypes = { f32 = true },
                           ninputs = 3, internal = true,
                           pack = function(a)
                             return { a.stride[1], a.stride[2], a.padding[1], a.padding[2], a.dilation[1],
                                      a.dilation[2], a.groups, CONV_ACT[a.act], POOL_KIND[a.pool], a.kernel_size[1],
                                      a.kernel_size[2], a.pool_stride[1], a.pool_stride[2], a.pool_padding[1],
                                      a.pool_padding[2], a.count_include_pad and 1 or 0 }
                           end },
}
