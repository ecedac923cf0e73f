-- tests/lowp_dtypes_spec.lua: the bf16, f16 and i8 dtypes against PyTorch (tests/fixtures/lowp.json from
-- tests/gen_lowp_fixtures.py): f32 <-> bf16/f16 conversion bits (ties, subnormals, overflow, NaNs), creation,
-- casts, ops computed via f32/i32, promotion, printing, safetensors bytes, graph files, ONNX and compile.
local ds = require("ds")
local H = require("helpers")
local ffi = require("ffi")

local doc = H.fixture("lowp.json")
local dir = H.tmp_dir()

-- a 1-d tensor of dtype dt holding raw bit patterns (u32 for f32, u16 for bf16/f16)
local function from_bits(bits, dt)
  local t = ds.empty(#bits, { dtype = dt })
  local p = ffi.cast(dt == "f32" and "uint32_t *" or "uint16_t *", t:data_ptr())
  for i, b in ipairs(bits) do p[i - 1] = b end
  return t
end
local function bits_of(t)
  local c = t:contiguous()
  local p = ffi.cast(c.dtype == "f32" and "uint32_t *" or "uint16_t *", c:data_ptr())
  local out = {}
  for i = 1, c:numel() do out[i] = tonumber(p[i - 1]) end
  return out
end
local function hex(b) return string.format("0x%x", b) end

describe("lowp: f32 -> bf16 / f16 conversion", function()
  local f32 = {}
  for i, e in ipairs(doc.convert) do f32[i] = e.f32 end
  local x = from_bits(f32, "f32")
  for _, dt in ipairs { "bf16", "f16" } do
    it(dt .. ": every edge case and the sweep give torch's bits; a NaN keeps sign and payload, quiet", function()
      local got = bits_of(x:astype(dt))
      local is_nan = dt == "bf16" and function(b) return bit.band(b, 0x7fff) > 0x7f80 end
        or function(b) return bit.band(b, 0x7fff) > 0x7c00 end
      for i, e in ipairs(doc.convert) do
        if e.nan then
          assert(is_nan(e[dt]), "torch gives a NaN for " .. hex(e.f32))
          assert(got[i] == e[dt .. "_ieee"], string.format("%s: NaN %s -> %s, want %s", dt, hex(e.f32), hex(got[i]),
            hex(e[dt .. "_ieee"])))
        else
          assert(got[i] == e[dt], string.format("%s: %s -> %s, torch %s", dt, hex(e.f32), hex(got[i]), hex(e[dt])))
        end
      end
    end)
  end
  it("a strided source and an f64 source (through f32, as torch) convert alike", function()
    local sub = {}
    for i = 1, 200 do if not doc.convert[i].nan then sub[#sub + 1] = doc.convert[i] end end
    local bits = {}
    for i, e in ipairs(sub) do bits[i] = e.f32 end
    local base = from_bits(bits, "f32")
    local strided = ds.stack({ base, base }, 2):select(2, 2)
    local got = bits_of(strided:astype("bf16"))
    local via64 = bits_of(base:astype("f64"):astype("f16"))
    for i, e in ipairs(sub) do
      assert(got[i] == e.bf16, hex(e.f32))
      assert(via64[i] == e.f16, hex(e.f32))
    end
  end)
end)

describe("lowp: Lua numbers and f64 -> bf16 / f16 (through f32, as torch)", function()
  it("ds.tensor(v, {dtype}) and an f64 tensor's cast give torch's values", function()
    for _, e in ipairs(doc.from_f64) do
      for _, dt in ipairs { "bf16", "f16" } do
        assert.equal(e[dt], ds.tensor({ e.value }, { dtype = dt }):item(), dt .. " of " .. e.value)
        assert.equal(e[dt .. "_of_f64"], ds.tensor({ e.value }, { dtype = "f64" }):astype(dt):item(), dt .. " of " .. e.value)
      end
    end
  end)
end)

describe("lowp: bf16 / f16 -> f32 widening", function()
  for _, dt in ipairs { "bf16", "f16" } do
    it(dt .. ": every subnormal, infinity and NaN pattern and a stride through the rest give torch's f32 bits",
      function()
        local got = bits_of(from_bits(doc.widen.bits, dt):astype("f32"))
        for i, b in ipairs(doc.widen.bits) do
          assert(got[i] == doc.widen[dt][i], string.format("%s %s -> %s, torch %s", dt, hex(b), hex(got[i]),
            hex(doc.widen[dt][i])))
        end
      end)
  end
  it("bf16 -> f32 -> bf16 and f16 -> f32 -> f16 give back every non-NaN pattern", function()
    for _, dt in ipairs { "bf16", "f16" } do
      local back = bits_of(from_bits(doc.widen.bits, dt):astype("f32"):astype(dt))
      local nan = dt == "bf16" and 0x7f80 or 0x7c00
      for i, b in ipairs(doc.widen.bits) do
        if bit.band(b, 0x7fff) <= nan then assert(back[i] == b, dt .. " " .. hex(b)) end
      end
    end
  end)
end)

describe("lowp: creation, casts, printing", function()
  it("zeros/ones/full/empty/tensor/arange take the dtypes and their torch names", function()
    for _, spec in ipairs { { "bf16", "bfloat16" }, { "f16", "half" }, { "f16", "float16" }, { "i8", "int8" },
      { "i8", "char" } } do
      local dt, alias = spec[1], spec[2]
      assert.equal(dt, ds.zeros(2, 3, { dtype = alias }).dtype)
      assert.equal(dt, ds.ones(4, { dtype = dt }).dtype)
      assert.equal(dt, ds.empty(4, { dtype = dt }).dtype)
      assert.same({ 7, 7 }, ds.full({ 2 }, 7, { dtype = dt }):totable())
      assert.same({ 1, -2, 3 }, ds.tensor({ 1, -2, 3 }, { dtype = alias }):totable())
      assert.same({ 0, 1, 2, 3 }, ds.arange(4, { dtype = dt }):totable())
      assert.equal(dt == "i8" and 1 or 2, ds.ones(1, { dtype = dt }):element_size())
    end
    assert.same({ 0.5, 1.5 }, ds.arange(0.5, 2, 1, { dtype = "bf16" }):totable())
  end)
  it("x:to(dt), x:bfloat16(), x:half(), x:char(), x:type()", function()
    local x = ds.tensor({ 0.1, -300.7, 70000 })
    assert.equal("bf16", x:to("bf16").dtype)
    assert.equal("bf16", x:bfloat16().dtype)
    assert.equal("f16", x:half().dtype)
    assert.equal("i8", x:char().dtype)
    assert.same({ 0.10009765625, -300, 70144 }, x:bfloat16():totable())
    assert.same({ 0.0999755859375, -300.75, math.huge }, x:half():totable())
    assert.equal("torch.BFloat16Tensor", x:bfloat16():type())
    assert.equal("torch.HalfTensor", x:half():type())
    assert.equal("torch.CharTensor", x:char():type())
    assert.equal("f16", x:type("torch.HalfTensor").dtype)
    assert.equal("bf16", x:to(ds.bfloat16).dtype)
    assert.equal("f16", ds.zeros(1, { dtype = ds.half }).dtype)
    assert.equal("i8", ds.ones(1, { dtype = ds.int8 }).dtype)
  end)
  it("float -> i8 truncates and saturates (NaN gives 0), integer -> i8 wraps (torch)", function()
    assert.same({ 127, -128, -3, 0, 0 }, ds.tensor({ 300.5, -1e9, -3.9, 0 / 0, 0.7 }):char():totable())
    assert.same({ 44, 127, -56 }, ds.tensor({ 300, -129, 200 }, { dtype = "i32" }):char():totable())
    assert.same({ 127, -128 }, ds.tensor({ 1e5, -1e5 }, { dtype = "f16" }):char():totable())
  end)
  it("item, totable and printing show the values and the dtype", function()
    local b = ds.tensor({ { 1.5, -0.1 }, { 3e38, 1 / 0 } }, { dtype = "bf16" })
    assert.equal(-0.10009765625, b[1][2]:item())
    assert.same({ { 1.5, -0.10009765625 }, { 1.765625 * 2 ^ 127, math.huge } }, b:totable())
    local s = tostring(b)
    assert.truthy(s:find("dtype=bf16", 1, true))
    assert.truthy(s:find("inf", 1, true))
    assert.truthy(tostring(ds.tensor({ 1, -2 }, { dtype = "i8" })):find("dtype=i8", 1, true))
    assert.truthy(tostring(ds.tensor({ 0.5 }, { dtype = "f16" })):find("dtype=f16", 1, true))
  end)
  it("views share storage; indexed and in-place writes land in the tensor", function()
    for _, dt in ipairs { "bf16", "f16", "i8" } do
      local x = ds.zeros(2, 3, { dtype = dt })
      local v = x:narrow(2, 2, 2)
      assert.equal(dt, v.dtype)
      v:fill_(3)
      x[1][1] = 5
      x:t()[3][2] = -2
      assert.same({ { 5, 3, 3 }, { 0, 3, -2 } }, x:totable())
      x:select(1, 2):copy_(ds.tensor({ 1, 2, 4 }))
      assert.same({ 1, 2, 4 }, x[2]:totable())
    end
  end)
  it("random ops and dtype options draw or compute in f32 / i32 and round (same stream as f32)", function()
    ds.manual_seed(7)
    local a = ds.randn(50, { dtype = "bf16" })
    local u = ds.rand(50, { dtype = "f16" })
    local k = ds.randint(-5, 5, { 50 }, { dtype = "i8" })
    ds.manual_seed(7)
    assert(H.bitwise(a, ds.randn(50):bfloat16()))
    assert(H.bitwise(u, ds.rand(50):half()))
    assert(H.bitwise(k, ds.randint(-5, 5, { 50 }, { dtype = "i32" }):char()))
    local x = ds.zeros(20, { dtype = "bf16" })
    x:normal_()
    assert.equal("bf16", x.dtype)
    assert.is_true(x:abs():sum():item() > 0)
    local y = ds.tensor({ 1, 2, 3.5 })
    assert(H.bitwise(y:sum({ dtype = "f16" }), y:sum():half()))
  end)
  it("unknown dtypes are still refused", function()
    H.raises(function() ds.zeros(2, { dtype = "f8" }) end, "unknown dtype")
    H.raises(function() ds.ones(2):astype("i16") end, "astype", "i16")
  end)
end)

-- a fixture tensor {shape, dtype, data}
local function T(e)
  local flat = ds.tensor(#e.data > 0 and e.data or { 0 }, { dtype = e.dtype })
  return flat:reshape(e.shape)
end
local OPS = {
  add = function(a, b) return a + b end, sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end, div = function(a, b) return a / b end,
  neg = function(a) return -a end,
}

describe("lowp: ops computed in f32 / i32 and rounded back, against PyTorch", function()
  for n, c in ipairs(doc.ops) do
    local kinds = {}
    for k, i in ipairs(c.inputs) do kinds[k] = i.number and tostring(i.number) or i.dtype end
    it(string.format("%d: %s(%s)%s", n, c.op, table.concat(kinds, ", "),
      c.torch_kernel and " (torch has no Half kernel: its f32 op rounded)" or ""), function()
      local args = {}
      for k, i in ipairs(c.inputs) do args[k] = i.number or T(i) end
      local got
      if OPS[c.op] then got = OPS[c.op](unpack(args))
      else
        if c.attrs then args[#args + 1] = c.attrs end
        got = ds[c.op](unpack(args))
      end
      assert.equal(c.out.dtype, got.dtype)
      assert.same(c.out.shape, got._shape)
      local g = got:reshape(-1):totable()
      if type(g) ~= "table" then g = { g } end
      for k, w in ipairs(c.out.data) do
        local x = g[k]
        if c.out.dtype == "bool" then x = x and 1 or 0 end
        if c.op == "argmax" then x = x - 1 end -- ds indices are 1-based
        assert(x == w or (x ~= x and w ~= w), string.format("element %d: got %.9g, torch %.9g", k, x, w))
      end
    end)
  end
  it("in place: x:add_(y) on bf16 rounds into x; a bf16 op under autograd gives an f32-rounded bf16 grad", function()
    local a = ds.tensor({ 1, 2, 3 }, { dtype = "bf16" })
    local b = ds.tensor({ 0.00390625, 0.01, 1e-3 }, { dtype = "bf16" })
    local want = (a + b):totable()
    a:add_(b)
    assert.same(want, a:totable())
    local x = ds.tensor({ 0.5, -1.25, 2 }, { dtype = "bf16" }):requires_grad_()
    local y = (x * x):sum()
    y:backward()
    assert.equal("bf16", x.grad.dtype)
    assert.same({ 1, -2.5, 4 }, x.grad:totable())
  end)
end)

describe("lowp: promotion", function()
  it("result dtypes equal torch.result_type (u8 with i8: i32, as ds has no i16)", function()
    for _, r in ipairs(doc.promotion) do
      local a = ds.ones(2, { dtype = r.a })
      local got = r.number and (a + r.number).dtype or (a + ds.ones(2, { dtype = r.b })).dtype
      local want = r.out == "torch.int16" and "i32" or r.out
      assert(got == want, string.format("%s + %s: %s, torch %s", r.a, tostring(r.number or r.b), got, r.out))
    end
  end)
end)

describe("lowp: safetensors", function()
  local st = doc.safetensors
  local bytes = st.hex:gsub("..", function(h) return string.char(tonumber(h, 16)) end)
  local path = dir .. "/torch.safetensors"
  H.write_file(path, bytes)
  it("reads BF16, F16 and I8 written by hand from torch's bytes, in their dtypes", function()
    local t, meta = ds.load_state(path)
    assert.same(st.metadata, meta)
    for name, e in pairs(st.tensors) do
      assert.equal(e.dtype, t[name].dtype, name)
      assert.same(e.shape, t[name]._shape)
      local flat = t[name]:reshape(-1)
      if type(e.bits) == "table" then assert.same(e.bits, #e.bits > 0 and bits_of(flat) or {}) end
      assert.same(e.data, #e.data > 0 and flat:totable() or {})
    end
  end)
  it("writes them back to the same bytes", function()
    local t, meta = ds.load_state(path)
    ds.save_state(t, dir .. "/again.safetensors", meta)
    assert.equal(bytes, H.read_file(dir .. "/again.safetensors"))
  end)
  it("load_state(path, {dtype = 'f32'}) converts the float tensors only", function()
    local t = ds.load_state(path, { dtype = "f32" })
    assert.equal("f32", t["w.bf16"].dtype)
    assert.equal("f32", t["w.f16"].dtype)
    assert.equal("i8", t["q.i8"].dtype)
    assert.same(st.tensors["w.f16"].data, t["w.f16"]:totable())
    H.raises(function() ds.load_state(path, { dtype = "i32" }) end, "load_state", "float dtype")
    H.raises(function() ds.load_state(path, { dtyp = "f32" }) end, "load_state", "dtyp")
  end)
end)

describe("lowp: compiled graphs, graph files, ONNX", function()
  local W = ds.tensor({ { 0.5, -1.25, 3 }, { 2, 0.1, -0.7 } }, { dtype = "bf16" })
  local function f(x) return (x:matmul(W) + 1):relu() end
  local x = ds.tensor({ { 1.5, -2 }, { 0.25, 3.5 }, { -1, 1 } }, { dtype = "bf16" })
  it("a compiled bf16 function equals the eager one bit for bit", function()
    local cg = ds.compile(f, { ds.spec({ "batch", 2 }, "bf16", "x") })
    assert(H.bitwise(cg(x), f(x)))
  end)
  it("ds.save / ds.load keep bf16 inputs and state", function()
    local cg = ds.compile(f, { ds.spec({ "batch", 2 }, "bf16", "x") })
    ds.save(cg, dir .. "/bf16_model")
    local m = ds.load(dir .. "/bf16_model")
    assert(H.bitwise(m(x), f(x)))
  end)
  it("the C runtime (ds_model_load / ds_model_run) runs the saved bf16 plan to the same bits", function()
    local cg = ds.compile(f, { ds.spec({ "batch", 2 }, "bf16", "x") })
    local want = cg(x)
    ds.save(cg, dir .. "/bf16_plan")
    local C = require("ds.ffi").C
    local m = C.ds_model_load(dir .. "/bf16_plan")
    assert(m ~= nil, require("ds.ffi").last_error())
    local out = ds.empty(3, 3, { dtype = "bf16" })
    assert.equal(0, C.ds_model_run(m, ffi.new("const ds_tensor*[1]", { x._c }), ffi.new("ds_tensor*[1]", { out._c })))
    C.ds_model_free(m)
    assert(H.bitwise(out, want))
  end)
  it("ds.onnx.export writes BFLOAT16 inputs and initializers; ds.onnx.load reads them back as bf16", function()
    local cg = ds.compile(f, { ds.spec({ "batch", 2 }, "bf16", "x") })
    ds.onnx.export(cg, dir .. "/bf16.onnx")
    local g = ds.onnx.load(dir .. "/bf16.onnx")
    assert(H.bitwise(g(x), f(x)))
    local h = ds.onnx.load(dir .. "/bf16.onnx")
    local y = h(x:half():bfloat16())
    assert.equal("bf16", y.dtype)
  end)
  it("exported f16 and i8 graphs run in ONNX Runtime to ds's bits", function()
    local ort = require("onnx.ort")
    local Wh = W:half()
    local function g(a, q, r) return (a:matmul(Wh) + 1):relu(), (q + r) * q end
    local a = x:half()
    local q, r = ds.tensor({ 100, -3, 127, -128 }, { dtype = "i8" }), ds.tensor({ 100, 5, 1, -1 }, { dtype = "i8" })
    local cg = ds.compile(g, { ds.spec({ 3, 2 }, "f16", "a"), ds.spec({ 4 }, "i8", "q"), ds.spec({ 4 }, "i8", "r") })
    ds.onnx.export(cg, dir .. "/f16_i8.onnx")
    assert.equal("ok", ort.check({ dir .. "/f16_i8.onnx" })[dir .. "/f16_i8.onnx"])
    local res = ort.run({ { model = dir .. "/f16_i8.onnx", feeds = { { a = a, q = q, r = r } } } })[1]
    assert(not res.error, res.error)
    local want1, want2 = g(a, q, r)
    local outs = res.outputs[1]
    local got = {}
    for k, name in ipairs(res.names) do got[k] = outs[name] end
    assert(H.bitwise(got[1], want1))
    assert(H.bitwise(got[2], want2))
  end)
  it("an ONNX model with FLOAT16 and INT8 inputs and initializers imports them as f16 and i8", function()
    local script = dir .. "/m.py"
    H.write_file(script, string.format([[
import numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP
w = nh.from_array(np.array([0.1, -2.5, 65504], np.float16), "w")
q = nh.from_array(np.array([-128, 5, 127], np.int8), "q")
g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"]), h.make_node("Add", ["i", "q"], ["j"])], "g",
    [h.make_tensor_value_info("x", TP.FLOAT16, [3]), h.make_tensor_value_info("i", TP.INT8, [3])],
    [h.make_tensor_value_info("y", TP.FLOAT16, [3]), h.make_tensor_value_info("j", TP.INT8, [3])], [w, q])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), "%s/f16.onnx")
]], dir))
    assert(os.execute("env -u LD_PRELOAD /usr/bin/python3 " .. script) == 0)
    local g = ds.onnx.load(dir .. "/f16.onnx")
    local y, j = g(ds.tensor({ 1, 1, 8 }, { dtype = "f16" }), ds.tensor({ -1, 100, 1 }, { dtype = "i8" }))
    assert.equal("f16", y.dtype)
    -- float16 sums: 1 + 0.1 (rounded), 1 - 2.5, 65504 + 8 rounds back to 65504; int8 sums wrap
    assert.same({ 1.099609375, -1.5, 65504 }, y:totable())
    assert.equal("i8", j.dtype)
    assert.same({ 127, 105, -128 }, j:totable())
  end)
end)
