-- tests/elementwise_spec.lua: every unary/binary/compare/logic op, where, clamp, astype and the Lua
-- operators against PyTorch (tests/fixtures/elementwise.json), dtype promotion, strided views,
-- in-place forms and error cases.
local ds = require("ds")
local H = require("helpers")
local cjson = require("cjson")

local doc = H.fixture("elementwise.json")

-- a fixture tensor {shape, dtype, data}
local function T(e)
  local flat = ds.tensor(#e.data > 0 and e.data or { 0 }, { dtype = e.dtype })
  if #e.data == 0 then flat = flat:narrow(1, 1, 0) end
  return flat:reshape(e.shape)
end
-- an input: a Lua number, a tensor, or a strided view (the base permuted by perm)
local function input(i)
  if i.number then return i.number end
  local t = T(i.tensor)
  if i.perm then t = t:permute(i.perm) end
  return t
end

-- the distance between an f32 value and its neighbour away from zero
local function ulp32(w)
  local a = math.abs(w)
  if a < 2 ^ -126 then return 2 ^ -149 end
  local _, e = math.frexp(a)
  return 2 ^ (e - 24)
end

local OPERATORS = {
  ["op+"] = function(a, b) return a + b end, ["op-"] = function(a, b) return a - b end,
  ["op*"] = function(a, b) return a * b end, ["op/"] = function(a, b) return a / b end,
  ["op^"] = function(a, b) return a ^ b end, ["op-unm"] = function(a) return -a end,
  ["op%"] = function(a, b) return a % b end,
}
local GELU_LIKE = { gelu = true, gelu_tanh = true, silu = true }

local function run(c)
  local args = {}
  for k, i in ipairs(c.inputs) do args[k] = input(i) end
  if OPERATORS[c.op] then return OPERATORS[c.op](unpack(args)) end
  if c.op == "astype" then return args[1]:astype(c.attrs.dtype) end
  if c.attrs then args[#args + 1] = c.attrs end
  return ds[c.op](unpack(args))
end

-- a one-input float case computed in f64 (libm): where PyTorch's f32 formula loses a value (its sigmoid
-- flushes the tail below exp(-88) to 0) ds may differ from it, but only by being closer to this
local function exact_values(c)
  if #c.inputs ~= 1 or not c.inputs[1].tensor or not ds[c.op] then return nil end
  local x = input(c.inputs[1])
  if x.dtype ~= "f32" then return nil end
  return ds[c.op](x:astype("f64"), c.attrs):reshape(-1):totable()
end

local function compare(got, c)
  local want = c.out
  local exact
  assert.equal(want.dtype, got.dtype)
  assert.same(want.shape, got.shape)
  local g = got:astype("f64"):reshape(-1):totable()
  if type(g) == "number" then g = { g } end
  local worst = 0
  for k, w in ipairs(want.data) do
    local x = g[k]
    local same = x == w or (x ~= x and w ~= w)
    if not same then
      local d = math.abs(x - w)
      local ok
      if c.tol == "ulp2" then
        ok = w == w and x == x and math.abs(w) ~= math.huge and d <= 2 * ulp32(w)
        if ok and d / ulp32(w) > worst then worst = d / ulp32(w) end
      elseif c.tol == "rtol6" then
        -- subnormal results carry less than f32's relative precision: allow two subnormal steps there
        ok = d <= 1e-6 * math.abs(w) + (GELU_LIKE[c.op] and 1e-6 or 2 ^ -148)
      elseif c.tol == "rtol12" then
        ok = d <= 1e-12 * math.abs(w) + 1e-15
      end
      if not ok and c.tol == "rtol6" then
        exact = exact or exact_values(c)
        ok = exact ~= nil and math.abs(x - exact[k]) < math.abs(w - exact[k])
      end
      if not ok then
        local inp = c.inputs[1].tensor and c.inputs[1].tensor.data[k]
        error(string.format("%s (%s): element %d: got %.9g, torch %.9g (input %s)", c.op, c.tol, k, x, w, tostring(inp)), 2)
      end
    end
  end
  return worst
end

describe("elementwise ops against PyTorch", function()
  for n, c in ipairs(doc.cases) do
    local kinds = {}
    for k, i in ipairs(c.inputs) do
      kinds[k] = i.number and tostring(i.number) or (i.tensor.dtype .. cjson.encode(i.tensor.shape) .. (i.perm and "T" or ""))
    end
    it(string.format("%d: %s(%s) [%s]", n, c.op, table.concat(kinds, ", "), c.tol), function()
      compare(run(c), c)
    end)
  end
end)

describe("fixture coverage", function()
  it("every elementwise op of the table has PyTorch cases for each of its dtypes", function()
    local seen = {}
    for _, c in ipairs(doc.cases) do
      local first = c.inputs[c.op == "where" and 2 or 1]      -- where's first input is the condition
      local dt = first.tensor and first.tensor.dtype
      seen[c.op] = seen[c.op] or {}
      if dt then seen[c.op][dt] = true end
    end
    local missing = {}
    for _, def in ipairs(require("ds.dispatch").list) do
      if def.elementwise and def.name ~= "contiguous" then
        for dt in pairs(def.dtypes) do
          if not (seen[def.name] and seen[def.name][dt]) then missing[#missing + 1] = def.name .. ":" .. dt end
        end
      end
    end
    table.sort(missing)
    assert.same({}, missing)
  end)
end)

describe("the C op table", function()
  it("every elementwise op of the Lua op table is a row of src/elementwise.def, so it fuses", function()
    local OPCODE, missing = require("ds.passes.fuse").OPCODE, {}
    for _, def in ipairs(require("ds.dispatch").list) do
      if def.elementwise and def.kernel and not OPCODE[def.kernel:match("^ds_(.-)_%%s$")] then
        missing[#missing + 1] = def.name
      end
    end
    assert.same({}, missing)
    assert.equal(0, OPCODE.exp)
    assert.equal(nil, OPCODE.nosuchop)
  end)
end)

describe("dtype promotion", function()
  it("tensor with tensor follows PyTorch, except bool arithmetic, which computes in i64", function()
    for _, r in ipairs(doc.promotion) do
      local a = ds.ones(2, { dtype = r.a })
      if r.b then
        local want = (r.a == "bool" and r.b == "bool") and "i64" or r.out
        assert.equal(want, ds.add(a, ds.ones(2, { dtype = r.b })).dtype, r.a .. " + " .. r.b)
      else
        assert.equal(r.out, ds.add(a, r.number).dtype, r.a .. " + " .. r.number)
        assert.equal(r.out, ds.add(r.number, a).dtype, r.number .. " + " .. r.a)
      end
    end
  end)
  it("a 0-d tensor widens a tensor with dims only from a higher category (PyTorch's rule)", function()
    assert.equal("f32", (ds.ones(3) + ds.tensor(2, { dtype = "f64" })).dtype)
    assert.equal("f32", (ds.ones(3, { dtype = "i64" }) + ds.tensor(2)).dtype)
    assert.equal("i32", (ds.ones(3, { dtype = "i32" }) + ds.tensor(2, { dtype = "i64" })).dtype)
  end)
  it("float math promotes integers and bools to f32; comparisons give bool", function()
    assert.equal("f32", ds.exp(ds.ones(2, { dtype = "i64" })).dtype)
    assert.equal("f32", ds.div(ds.ones(2, { dtype = "i32" }), 2).dtype)
    assert.equal("f64", ds.div(ds.ones(2, { dtype = "i32" }), ds.ones(2, { dtype = "f64" })).dtype)
    assert.equal("bool", ds.lt(ds.ones(2, { dtype = "u8" }), 2.5).dtype)
    assert.equal("i64", ds.where(ds.tensor({ true, false }), ds.ones(2, { dtype = "i32" }), ds.ones(2, { dtype = "i64" })).dtype)
    assert.equal("f32", ds.clamp(ds.ones(2, { dtype = "i64" }), 0.5).dtype)
    assert.equal("i64", ds.clamp(ds.ones(2, { dtype = "i64" }), 0).dtype)
  end)
end)

describe("strided views and threads", function()
  local base = ds.rand(300, 200) * 8 - 4              -- 60000 elements: above the parallel threshold
  local v = base:t()                                   -- (200,300), not contiguous
  local vc = v:contiguous()
  local other = ds.rand(300) - 0.5
  it("unary kernels give the same bits on views as on contiguous copies", function()
    assert.is_false(v:is_contiguous())
    for _, name in ipairs { "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "silu", "gelu",
      "gelu_tanh", "abs", "neg", "relu", "sign" } do
      assert.is_true(H.bitwise(ds[name](v), ds[name](vc)), name)
    end
  end)
  it("binary kernels broadcast views the same way", function()
    for _, name in ipairs { "add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt", "eq" } do
      assert.is_true(H.bitwise(ds[name](v, other), ds[name](vc, other)), name)
      assert.is_true(H.bitwise(ds[name](other, v), ds[name](other, vc)), name)
    end
    local c = v:gt(0)
    assert.is_true(H.bitwise(ds.where(c, v, other), ds.where(c:contiguous(), vc, other)))
    assert.is_true(H.bitwise(ds.clamp(v, -1, 1), ds.clamp(vc, -1, 1)))
    assert.is_true(H.bitwise(v:astype("i32"), vc:astype("i32")))
  end)
  it("results are identical with 1 and 2 threads", function()
    local n = ds.get_num_threads()
    local two = ds.gelu(v) * ds.exp(vc)
    ds.set_num_threads(1)
    local one = ds.gelu(v) * ds.exp(vc)
    ds.set_num_threads(n)
    assert.is_true(H.bitwise(one, two))
  end)
  it("a strided view as output (in place) is written correctly", function()
    local x = ds.zeros(3, 4)
    x:t():add_(ds.arange(3, { dtype = "f32" }))
    assert.same({ { 0, 0, 0, 0 }, { 1, 1, 1, 1 }, { 2, 2, 2, 2 } }, x:totable())
  end)
end)

describe("edge values behave as in PyTorch", function()
  it("signed zeros, integer wrap-around, clamp with min > max", function()
    local z = ds.tensor({ -0.0 })
    assert.equal(math.huge, 1 / ds.abs(z):item())            -- abs(-0.) = +0.
    assert.equal(-math.huge, 1 / ds.relu(z):item())          -- relu(-0.) = -0.
    local big = ds.tensor({ -2 ^ 63, 2 ^ 62 }, { dtype = "i64" })
    assert.same({ -2 ^ 63, -2 ^ 62 }, ds.neg(big):totable())  -- -INT64_MIN wraps to itself
    assert.same({ -2 ^ 63, 2 ^ 62 }, ds.abs(big):totable())
    assert.same({ 0, -2 ^ 63 }, (big + big):totable())
    local i32 = ds.tensor({ 2 ^ 31 - 1 }, { dtype = "i32" })
    assert.same({ -2 ^ 31 }, (i32 + 1):totable())
    assert.same({ 4, 4, 4 }, ds.clamp(ds.tensor({ 0, 5, 10 }), 6, 4):totable())
    assert.same({ 4, 4 }, ds.clamp(ds.tensor({ 0, 10 }, { dtype = "i64" }), 6, 4):totable())
  end)
end)

describe("in-place forms", function()
  local function fresh() return ds.tensor({ { 0.5, -1.5, 2 }, { 3, -0.25, 1 } }) end
  it("unary, binary and clamp in place equal the out-of-place result and return x", function()
    for _, name in ipairs { "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "sigmoid", "silu", "gelu",
      "gelu_tanh", "abs", "neg", "relu", "sign" } do
      local x = fresh()
      local want = ds[name](x)
      assert.equal(x, x[name .. "_"](x), name)
      assert.is_true(H.bitwise(x, want), name)
    end
    local y = ds.tensor({ 2, 0.5, -1 })
    for _, name in ipairs { "add", "sub", "mul", "div", "maximum", "minimum" } do
      local x = fresh()
      local want = ds[name](x, y)
      assert.equal(x, x[name .. "_"](x, y), name)
      assert.is_true(H.bitwise(x, want), name)
    end
    local x = fresh()
    x:pow_(2):add_(1):clamp_(1.5, 5)
    assert.same({ { 1.5, 3.25, 5 }, { 5, 1.5, 2 } }, x:totable())
    local i = ds.tensor({ 5, -7 }, { dtype = "i64" })
    i:floor_divide_(2)
    assert.same({ 2, -4 }, i:totable())
    local b = ds.tensor({ true, false })
    b:logical_not_()
    assert.same({ false, true }, b:totable())
  end)
  it("refuses results of another dtype or shape, and leaves that need grad", function()
    H.raises(function() ds.ones(2):lt_(1) end, "lt_", "bool", "f32")
    H.raises(function() ds.ones(2, { dtype = "i64" }):add_(0.5) end, "add_", "f32", "i64")
    H.raises(function() ds.ones(2, { dtype = "i64" }):exp_() end, "exp_", "f32", "i64")
    H.raises(function() ds.ones(3):add_(ds.ones(2, 3)) end, "add_", "(2,3)", "(3)")
    H.raises(function() ds.ones(2):requires_grad_():mul_(2) end, "mul_", "leaf")
  end)
end)

describe("operators", function()
  local x = ds.tensor({ 1, 2, 4 })
  it("work with numbers on either side", function()
    assert.same({ 3, 4, 6 }, (2 + x):totable())
    assert.same({ 1, 0, -2 }, (2 - x):totable())
    assert.same({ 2, 1, 0.5 }, (2 / x):totable())
    assert.same({ 2, 4, 16 }, (2 ^ x):totable())
    assert.same({ 1, 4, 16 }, (x ^ 2):totable())
    assert.same({ -1, -2, -4 }, (-x):totable())
    assert.same({ 1, 2, 4 }, (-(-x)):totable())
  end)
  it("integer tensors stay integer with integer numbers and divide as floats", function()
    local i = ds.tensor({ 7, -7 }, { dtype = "i64" })
    assert.equal("i64", (i * 3 - 1).dtype)
    assert.same({ 3.5, -3.5 }, (i / 2):totable())
    assert.equal("f32", (i / 2).dtype)
    assert.same({ 3, -4 }, ds.floor_divide(i, 2):totable())
    assert.same({ 1, 2 }, (i % 3):totable()) -- % floors (remainder), as Lua's and Python's %
  end)
  it("Lua comparison and concatenation operators explain the alternative", function()
    H.raises(function() return x < x end, "x:lt(y)")
    H.raises(function() return x <= x end, "x:le(y)")
    H.raises(function() return x .. "a" end, "ds.cat")
  end)
end)

describe("elementwise errors", function()
  it("shape mismatches name both shapes", function()
    H.raises(function() return ds.zeros(2, 3) + ds.zeros(4) end, "add", "(2,3)", "(4)", "broadcast")
    H.raises(function() ds.lt(ds.zeros(2, 3), ds.zeros(3, 2)) end, "lt", "(2,3)", "(3,2)")
    H.raises(function() ds.where(ds.tensor({ true, false, true }), ds.zeros(2), 1) end, "where", "(3)", "(2)")
    H.raises(function() ds.maximum(ds.zeros(5), ds.zeros(2, 4)) end, "maximum", "(5)", "(2,4)")
  end)
  it("unsupported dtypes are named with the supported ones", function()
    H.raises(function() ds.abs(ds.ones(2, { dtype = "u8" })) end, "abs", "dtype u8 not supported")
    H.raises(function() ds.floor_divide(ds.ones(2, { dtype = "u8" }), 2) end, "floor_divide", "dtype u8 not supported")
    H.raises(function() ds.ones(2):astype("f8") end, "astype", "f8")
    H.raises(function() ds.clamp(ds.ones(2), "a") end, "clamp", "min", "string")
    H.raises(function() ds.pow(ds.ones(2, { dtype = "u8" }), 2) end, "pow", "dtype u8 not supported")
  end)
  it("non-tensor operands are refused", function()
    H.raises(function() ds.add(ds.ones(2), "x") end, "add", "argument 2", "string")
    H.raises(function() ds.exp({ 1, 2 }) end, "exp", "argument 1", "table")
  end)
  it("the C kernels check operand dtypes and shapes themselves", function()
    local D = require("ds.dispatch")
    local ffi = require("ffi")
    local k = D.kernel(D.by_name.add, "f32")
    local tb = ffi.new("ds_tensor*[3]", { ds.zeros(3)._c, ds.zeros(3)._c, ds.zeros(3, { dtype = "f64" })._c })
    assert.is_true(k(tb, nil) ~= 0)
    assert.matches("dtype f64", ffi.string(require("ds.ffi").C.ds_last_error()))
    tb[2] = ds.zeros(4)._c
    assert.is_true(k(tb, nil) ~= 0)
    assert.matches("does not broadcast", ffi.string(require("ds.ffi").C.ds_last_error()))
  end)
end)

describe("gelu's two halves", function()
  -- the AVX-512 loop packs the inputs with |x| >= 0.85 (and NaN, inf) and runs the tail formula on those only;
  -- each value must get the same bits wherever it sits: shuffled among other values, sorted, alone, in place
  it("give each value the same bits in any order, alone and in place, at lengths across blocks and vector tails", function()
    local ffi = require("ffi")
    local gelu = ds.nn.functional.gelu
    local specials = { 0 / 0, 1 / 0, -1 / 0, 0.85, -0.85, 0.8499999, -0.8499999, 0, -0.0, 15, -15, 20, -20 }
    ds.manual_seed(5)
    for _, n in ipairs { 1, 15, 17, 511, 512, 513, 1040, 3001 } do
      local x = ds.randn(n) * 1.5
      local p = ffi.cast("float *", x:data_ptr())
      for k = 1, math.min(n, #specials) do p[(k * 37) % n] = specials[k] end
      local y = gelu(x)
      local perm = ds.randperm(n)
      assert.is_true(H.bitwise(gelu(x:index_select(1, perm)), y:index_select(1, perm)), "shuffled, n = " .. n)
      local sorted, order = x:sort()
      assert.is_true(H.bitwise(gelu(sorted), y:index_select(1, order)), "sorted, n = " .. n)
      local z = x:clone()
      z:gelu_()
      assert.is_true(H.bitwise(z, y), "in place, n = " .. n)
      for k = 1, n, math.max(1, math.floor(n / 40)) do
        assert.is_true(H.bitwise(gelu(x:narrow(1, k, 1)), y:narrow(1, k, 1)), "alone, n = " .. n)
      end
    end
  end)
end)
