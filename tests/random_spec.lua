-- tests/random_spec.lua: the Philox generator against a Lua reference, seeding, state, thread independence, dropout.
local ds = require("ds")
local H = require("helpers")
local bit = require("bit")

-- ---- a plain-Lua Philox4x32-10 (exact with doubles: 32x32 products split into 16-bit halves) ----
local TWO32 = 2 ^ 32
local function mulhilo(a, b)
  local blo, bhi = b % 65536, math.floor(b / 65536)
  local p1, p2 = a * blo, a * bhi
  local low_sum = p1 + (p2 % 65536) * 65536
  return math.floor(p2 / 65536) + math.floor(low_sum / TWO32), low_sum % TWO32
end
local function xor(a, b) return bit.bxor(a, b) % TWO32 end
local function philox(seed, ctr)
  local c0, c1, c2, c3 = ctr % TWO32, math.floor(ctr / TWO32), 0, 0
  local k0, k1 = seed % TWO32, math.floor(seed / TWO32)
  for _ = 1, 10 do
    local hi0, lo0 = mulhilo(0xD2511F53, c0)
    local hi1, lo1 = mulhilo(0xCD9E8D57, c2)
    c0, c1, c2, c3 = xor(xor(hi1, c1), k0), lo1, xor(xor(hi0, c3), k1), lo0
    k0, k1 = (k0 + 0x9E3779B9) % TWO32, (k1 + 0xBB67AE85) % TWO32
  end
  return { c0, c1, c2, c3 }
end
local function u53(hi, lo) return (hi * 2 ^ 21 + math.floor(lo / 2 ^ 11)) * 2 ^ -53 end

local function flat(t) return t:reshape(-1):totable() end

describe("philox generator", function()
  it("matches the Random123 known answer for key 0, counter 0", function()
    ds.manual_seed(0)
    -- randint(0, 2^32) returns the high word of each 64-bit pair: words 1 and 3 of block 0
    assert.same({ 0x6627e8d5, 0xbc57ac4c }, ds.randint(0, 2 ^ 32, { 2 }):totable())
  end)

  it("rand f32 takes 4 values per block, rand f64 2, as the reference computes them", function()
    ds.manual_seed(1234)
    local r = flat(ds.rand(10))
    for i = 0, 9 do
      local w = philox(1234, math.floor(i / 4))
      assert.equal(math.floor(w[i % 4 + 1] / 256) * 2 ^ -24, r[i + 1])
    end
    local d = flat(ds.rand(5, { dtype = "f64" }))   -- continues after the 3 blocks rand(10) used
    for i = 0, 4 do
      local w = philox(1234, 3 + math.floor(i / 2))
      local j = (i % 2) * 2
      assert.equal(u53(w[j + 1], w[j + 2]), d[i + 1])
    end
  end)

  it("randn f64 is Box-Muller on the reference uniforms", function()
    ds.manual_seed(7)
    local z = flat(ds.randn(4, { dtype = "f64" }))
    for b = 0, 1 do
      local w = philox(7, b)
      local u1, u2 = u53(w[1], w[2]), u53(w[3], w[4])
      local r, th = math.sqrt(-2 * math.log(1 - u1)), 2 * math.pi * u2
      H.close({ z[2 * b + 1], z[2 * b + 2] }, { r * math.cos(th), r * math.sin(th) }, 1e-12, 1e-12)
    end
  end)

  it("randint maps 64 random bits into [low, high)", function()
    ds.manual_seed(99)
    local v = flat(ds.randint(-5, 251, { 4 }))   -- range 256: the top 8 bits of each pair's high word
    for i = 0, 3 do
      local w = philox(99, math.floor(i / 2))
      assert.equal(-5 + math.floor(w[(i % 2) * 2 + 1] / 2 ^ 24), v[i + 1])
    end
  end)
end)

describe("seeding and state", function()
  it("the same seed gives the same stream", function()
    ds.manual_seed(22)
    local a, b = ds.rand(3, 4), ds.randn(5)
    ds.manual_seed(22)
    assert.is_true(H.bitwise(a, ds.rand(3, 4)))
    assert.is_true(H.bitwise(b, ds.randn(5)))
    assert.is_false(H.bitwise(a, ds.rand(3, 4)))
  end)

  it("the state is {seed, offset} and advances by the blocks used", function()
    ds.manual_seed(5)
    assert.same({ 5, 0 }, ds.get_rng_state():totable())
    ds.rand(10)                       -- f32: 4 per block -> 3 blocks
    assert.same({ 5, 3 }, ds.get_rng_state():totable())
    ds.randn(3, { dtype = "f64" })    -- f64: 2 per block -> 2 blocks
    ds.randint(0, 10, { 1 })          -- 1 block
    assert.same({ 5, 6 }, ds.get_rng_state():totable())
  end)

  it("get/set_rng_state replays, and the live state tensor is never replaced", function()
    local live = ds.random.state()
    ds.manual_seed(3)
    local saved = ds.get_rng_state()
    local a = ds.randn(2, 3)
    ds.set_rng_state(saved)
    assert.is_true(H.bitwise(a, ds.randn(2, 3)))
    ds.manual_seed(4)
    assert.equal(live, ds.random.state())
    assert.same({ 4, 0 }, live:totable())
    H.raises(function() ds.set_rng_state(ds.zeros(2)) end, "set_rng_state", "i64")
  end)

  it("results do not depend on the thread count", function()
    local n0 = ds.get_num_threads()
    ds.set_num_threads(1)
    ds.manual_seed(11)
    local a, b = ds.rand(100001), ds.randn(70001, { dtype = "f64" })
    ds.set_num_threads(2)
    ds.manual_seed(11)
    local a2, b2 = ds.rand(100001), ds.randn(70001, { dtype = "f64" })
    ds.set_num_threads(n0)
    assert.is_true(H.bitwise(a, a2))
    assert.is_true(H.bitwise(b, b2))
  end)

  it("in-place uniform_/normal_ fill a strided view in its row-major order", function()
    ds.manual_seed(8)
    local ref = ds.rand(3, 4)
    ds.manual_seed(8)
    local z = ds.zeros(4, 3)
    z:t():uniform_()
    assert.is_true(H.bitwise(ref, z:t():contiguous()))
    ds.manual_seed(8)
    local n = ds.zeros(2, 2, { dtype = "f64" }):normal_(10, 0.001)
    for _, v in ipairs(flat(n)) do assert.is_true(math.abs(v - 10) < 0.01) end
  end)
end)

describe("distributions", function()
  it("rand is in [0, 1) with mean 1/2, randn has mean 0 and variance 1", function()
    ds.manual_seed(1)
    local u = flat(ds.rand(40000))
    local s = 0
    for _, v in ipairs(u) do assert.is_true(v >= 0 and v < 1); s = s + v end
    assert.is_true(math.abs(s / #u - 0.5) < 0.01)
    for _, dt in ipairs { "f32", "f64" } do
      local z = flat(ds.randn(40000, { dtype = dt }))
      local m, q = 0, 0
      for _, v in ipairs(z) do m = m + v; q = q + v * v end
      m = m / #z
      assert.is_true(math.abs(m) < 0.03, dt .. " mean " .. m)
      assert.is_true(math.abs(q / #z - m * m - 1) < 0.03, dt .. " variance")
    end
  end)

  it("randint covers [low, high) in every dtype", function()
    ds.manual_seed(2)
    for _, dt in ipairs { "i64", "i32", "f32", "f64" } do
      local r = ds.randint(3, 7, { 2000 }, { dtype = dt })
      assert.equal(dt, r.dtype)
      local seen = {}
      for _, v in ipairs(flat(r)) do
        assert.is_true(v >= 3 and v < 7 and v == math.floor(v))
        seen[v] = true
      end
      assert.same({ [3] = true, [4] = true, [5] = true, [6] = true }, seen)
    end
    assert.equal("i64", ds.randint(10, { 2, 2 }).dtype)
    assert.same({ 2, 2 }, ds.randint(10, { 2, 2 }).shape)
  end)

  it("rand_like/randn_like follow the argument's shape and dtype; bernoulli and randperm", function()
    local x = ds.zeros(2, 5, { dtype = "f64" })
    assert.same({ 2, 5 }, ds.rand_like(x).shape)
    assert.equal("f64", ds.randn_like(x).dtype)
    assert.same(flat(ds.zeros(6)), flat(ds.bernoulli(ds.zeros(6))))
    assert.same(flat(ds.ones(6)), flat(ds.bernoulli(ds.ones(6))))
    local p = flat(ds.randperm(50))
    table.sort(p)
    for i = 1, 50 do assert.equal(i, p[i]) end
  end)

  it("rand(..., {requires_grad = true}) makes a leaf that requires grad", function()
    local w = ds.rand(2, 2, { requires_grad = true })
    assert.is_true(w.requires_grad)
  end)
end)

describe("dropout", function()
  it("zeros about p of the elements and scales the rest by 1/(1-p)", function()
    ds.manual_seed(3)
    local y = flat(ds.dropout(ds.ones(10000), 0.25, true))
    local zeros = 0
    for _, v in ipairs(y) do
      if v == 0 then zeros = zeros + 1 else H.close(v, 1 / 0.75) end
    end
    assert.is_true(math.abs(zeros / #y - 0.25) < 0.02)
  end)

  it("is the identity when not training or p = 0, and zero for p = 1", function()
    local x = ds.rand(3, 3)
    assert.equal(x, ds.dropout(x, 0.5, false))
    assert.equal(x, ds.dropout(x, 0))
    assert.same(flat(ds.zeros(3, 3)), flat(ds.dropout(x, 1)))
  end)

  it("backward passes the gradient through the kept elements only", function()
    ds.manual_seed(6)
    local x = ds.ones(4, 5, { dtype = "f64" }):requires_grad_()
    local y = ds.dropout(x, 0.5, true)
    y:backward(ds.ones(4, 5, { dtype = "f64" }))
    assert.same(flat(y), flat(x.grad))
  end)
end)

describe("random ops in graphs", function()
  it("traced, compiled and saved/loaded graphs draw the same stream as eager code", function()
    local function f(x) return ds.dropout(x, 0.5, true) + ds.randn(3, 4) + ds.rand_like(x, { dtype = "f32" }) end
    local g = ds.trace(f, { ds.spec({ 3, 4 }, "f32", "x") })
    local cg = ds.compile(g)
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    ds.save(cg, dir .. "/rng")
    local loaded = ds.load(dir .. "/rng")
    os.execute("rm -rf " .. dir)
    local x = ds.ones(3, 4)
    local results = {}
    for i, run in ipairs { f, g, cg, loaded } do
      ds.manual_seed(5)
      results[i] = { run(x), run(x), ds.get_rng_state() }
    end
    for i = 2, 4 do
      assert.is_true(H.bitwise(results[1][1], results[i][1]), "first call of runner " .. i)
      assert.is_true(H.bitwise(results[1][2], results[i][2]), "second call of runner " .. i)
      assert.same(results[1][3]:totable(), results[i][3]:totable())
    end
    assert.is_false(H.bitwise(results[1][1], results[1][2]))
  end)
end)

describe("random op entries and errors", function()
  it("declare the state input they advance", function()
    for _, name in ipairs { "rand", "randn", "randint" } do
      local def = ds.ops.by_name[name]
      assert.equal("random", def.kind)
      assert.same({ 1 }, def.mutates)
    end
  end)

  it("reject bad arguments with the op's name", function()
    H.raises(function() ds.randint(5, 5, { 2 }) end, "randint", "low < high")
    H.raises(function() ds.randint(0, 2 ^ 40, { 2 }, { dtype = "i32" }) end, "randint", "dtype")
    H.raises(function() ds.rand(2, { dtype = "i64" }) end, "rand", "i64")
    H.raises(function() ds.rand(2, { bogus = 1 }) end, "rand", "bogus")
    H.raises(function() ds.randn(-1) end, "randn", "-1")
    H.raises(function() ds.manual_seed(1.5) end, "manual_seed")
    H.raises(function() ds.dropout(ds.ones(2), 2) end, "dropout", "[0, 1]")
    H.raises(function() ds.ops.call(ds.ops.by_name.rand, { ds.zeros(3, { dtype = "i64" }) }, { shape = { 2 } }) end,
      "rand", "generator state")
  end)

  it("the C kernels validate the state themselves", function()
    local ffi = require("ffi")
    local k = ds.ops.kernel(ds.ops.by_name.randn, "f32")
    local out, bad = ds.zeros(4), ds.zeros(3, { dtype = "i64" })
    local t = ffi.new("ds_tensor*[2]", out._c, bad._c)
    assert.equal(1, k(t, ffi.new("double[2]", 0, 1)))
    assert.truthy(require("ds.ffi").last_error():find("generator state", 1, true))
    t[1] = out._c   -- output aliasing the state
    assert.equal(1, k(t, ffi.new("double[2]", 0, 1)))
  end)
end)
