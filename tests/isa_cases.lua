-- tests/isa_cases.lua: the products tests/isa_spec.lua runs on every ISA path (in-process and in a child
-- with DS_ISA set): matmul over micro-tile and row-kernel tails, K blocks, strides and batches, linear and conv2d
-- with their gradients, a compiled linear + gelu, a prepacked frozen weight, the f32 math functions over
-- tests/mathfn_sweep.lua's inputs (eager and in a fused chain), softmax, log_softmax and attention.
-- Returns a list of { name, tensor }, the same inputs every time.
local ds = require("ds")

return function()
  ds.manual_seed(11)
  local function rnd(...) return ds.rand(...) * 2 - 1 end
  local out = {}
  local function add(name, t) out[#out + 1] = { name, t } end
  for _, s in ipairs { { 1, 7, 5 }, { 13, 300, 33 }, { 15, 600, 47 }, { 128, 256, 1024 }, { 29, 1100, 70 } } do
    local M, K, N = s[1], s[2], s[3]
    local a, w, b = rnd(M, K), rnd(N, K), rnd(K, N)
    local tag = table.concat(s, "x")
    add("matmul " .. tag, a:matmul(b))
    add("matmul by w^T " .. tag, a:matmul(w:t()))
    add("matmul a^T " .. tag, a:t():contiguous():t():matmul(b))
    add("f64 matmul " .. tag, a:astype("f64"):matmul(b:astype("f64")))
  end
  local wr = rnd(77, 259)   -- x @ W^T of up to 8 rows, W read in place: the transposed row kernel's tails
  for _, m in ipairs { 1, 2, 5, 8 } do add("matmul by w^T, " .. m .. " rows", rnd(m, 259):matmul(wr:t())) end
  add("batched", rnd(5, 20, 70):matmul(rnd(5, 70, 40)))
  add("broadcast batch", rnd(3, 1, 9, 33):matmul(rnd(4, 33, 18)))
  local x, w, bias = rnd(6, 40):requires_grad_(), rnd(24, 40):requires_grad_(), rnd(24):requires_grad_()
  local y = ds.nn.functional.linear(x, w, bias)
  y:backward(rnd(6, 24))
  add("linear", y:detach())
  add("linear grad x", x.grad)
  add("linear grad w", w.grad)
  add("linear grad b", bias.grad)
  local img, k, kb = rnd(4, 3, 12, 12):requires_grad_(), rnd(8, 3, 3, 3):requires_grad_(), rnd(8):requires_grad_()
  local c = ds.conv2d(img, k, kb, { padding = 1, stride = 2 })
  c:backward(rnd(4, 8, 6, 6))
  add("conv2d", c:detach())
  add("conv2d grad input", img.grad)
  add("conv2d grad weight", k.grad)
  add("conv2d grad bias", kb.grad)
  for _, o in ipairs { { padding = 2 }, { padding = { 1, 0 }, dilation = { 2, 1 }, groups = 3 } } do
    local im, kn = rnd(3, 6, 14, 13):requires_grad_(), rnd(9, 6 / (o.groups or 1), 5, 3):requires_grad_()
    local y1 = ds.conv2d(im, kn, nil, o)
    y1:backward(rnd(y1.shape))
    local tag = "stride-1 conv2d " .. (o.groups and "dilated, grouped" or "padded")
    add(tag, y1:detach())
    add(tag .. " grad input", im.grad)
    add(tag .. " grad weight", kn.grad)
  end
  local wl, bl = rnd(64, 32), rnd(64)
  local cg = ds.compile(function(t) return ds.nn.functional.gelu(t:matmul(wl:t()) + bl) end, { ds.spec({ 10, 32 }, "f32", "t") })
  add("compiled linear + gelu", cg(rnd(10, 32)))
  local wp = rnd(300, 47)
  local packed = ds.compile(function(t) return t:matmul(wp) end, { ds.spec({ "rows", 300 }, "f32", "t") }, { freeze = true })
  for _, rows in ipairs { 5, 15, 33 } do add("prepacked weight, rows " .. rows, packed(rnd(rows, 300))) end
  local sweep = require("mathfn_sweep")
  local xs = sweep.inputs(64)
  for _, fn in ipairs(sweep.functions) do add("mathfn " .. fn[1], fn[2](xs)) end
  -- gelu's AVX-512 loop packs the tail inputs of each block: the sweep shuffled mixes them in every vector
  add("mathfn gelu, inputs shuffled", ds.nn.functional.gelu(xs:index_select(1, ds.randperm(xs:numel()))))
  local F = ds.nn.functional
  -- hardswish, hardsigmoid (AVX-512: max/min for the clamp): the sweep, then the clamp's edges and NaN's signs
  local hx = ds.cat({ xs, ds.tensor({ -3, 3, -6, 6, -2.9999998, 2.9999998, 0 / 0, -(0 / 0), 1 / 0, -1 / 0 }) })
  add("hardswish", F.hardswish(hx))
  add("hardsigmoid", F.hardsigmoid(hx))
  local chain = ds.compile(function(t) return F.silu(ds.tanh(t) * 3) + F.gelu(t) * ds.sigmoid(t) end,
    { ds.spec({ xs:numel() }, "f32", "t") })
  add("compiled chain tanh, silu, gelu, sigmoid", chain(xs))
  local logits = rnd(37, 301) * 30
  add("softmax", F.softmax(logits, 2))
  add("log_softmax", F.log_softmax(logits, 2))
  local q, kk, v = rnd(2, 3, 19, 16), rnd(2, 3, 23, 16), rnd(2, 3, 23, 16)
  add("attention", F.scaled_dot_product_attention(q, kk, v))
  return out
end
