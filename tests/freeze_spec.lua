-- tests/freeze_spec.lua: parameters as constants (passes/freeze.lua): ds.compile(..., {freeze = true}) and
-- ds.load of an inference graph store a linear layer's W^T transposed once, give the unfrozen bits, take a
-- snapshot of the module's parameters, and leave state the graph writes alone.
local ds = require("ds")
local H = require("helpers")
local nn = ds.nn

local function mlp() return H.mlp(3, 24, 40, 7) end

describe("freeze", function()
  it("stores W^T transposed at compile time and gives the unfrozen bits, eager's too", function()
    local m = mlp()
    local x = ds.randn(5, 24)
    local specs = { ds.spec({ "batch", 24 }) }
    local plain, frozen = ds.compile(m, specs), ds.compile(m, specs, { freeze = true })
    assert.are.equal(4, frozen.stats.freeze) -- two weights, two biases
    assert.is_nil(plain.stats.freeze)
    assert.truthy(tostring(plain):find("transpose", 1, true))
    assert.falsy(tostring(frozen):find("transpose", 1, true), tostring(frozen))
    for _, rows in ipairs { 1, 5, 33 } do
      local xi = ds.randn(rows, 24)
      local want = ds.no_grad(function() return m(xi) end)
      assert(H.bitwise(plain(xi), want), "unfrozen differs from eager")
      assert(H.bitwise(frozen(xi), want), "frozen differs from eager at " .. rows .. " rows")
    end
    assert(H.bitwise(frozen(x), plain(x)))
  end)

  it("is a snapshot: changing the module afterwards changes the unfrozen function only", function()
    local m = mlp()
    local x = ds.randn(3, 24)
    local specs = { ds.spec({ 3, 24 }) }
    local plain, frozen = ds.compile(m, specs), ds.compile(m, specs, { freeze = true })
    local before = frozen(x)
    ds.no_grad(function() m[1].weight:mul_(2) end)
    assert(H.bitwise(frozen(x), before), "the frozen function saw the new weight")
    assert(not H.bitwise(plain(x), before), "the unfrozen function did not see the new weight")
    assert(H.bitwise(plain(x), ds.no_grad(function() return m(x) end)))
  end)

  it("leaves state the graph writes as state (a training step still trains)", function()
    ds.manual_seed(5)
    local m = nn.Linear(6, 3)
    local opt = ds.optim.SGD(m:parameters(), { lr = 0.1 })
    local function step(x, y)
      opt:zero_grad()
      local loss = ((m(x) - y) ^ 2):mean()
      loss:backward()
      opt:step()
      return loss
    end
    local x, y = ds.randn(4, 6), ds.randn(4, 3)
    local cg = ds.compile(step, { x, y }, { freeze = true })
    assert.are.equal(0, cg.stats.freeze)
    local w0 = m.weight:clone()
    cg(x, y)
    assert(not H.bitwise(m.weight, w0), "the compiled step did not update the weight")
  end)

  it("ds.load freezes inference graphs (same bits; {freeze = false} keeps them as state)", function()
    local m = mlp()
    local cg = ds.compile(m, { ds.spec({ "batch", 24 }) })
    local dir = H.tmp_dir()
    ds.save(cg, dir .. "/mlp")
    local loaded, unfrozen = ds.load(dir .. "/mlp"), ds.load(dir .. "/mlp", { freeze = false })
    assert.are.equal(4, loaded.stats.freeze)
    assert.is_nil(unfrozen.stats.freeze)
    local x = ds.randn(9, 24)
    assert(H.bitwise(loaded(x), cg(x)))
    assert(H.bitwise(unfrozen(x), cg(x)))
    -- a frozen model saves and loads again with its constants
    ds.save(loaded, dir .. "/again")
    assert(H.bitwise(ds.load(dir .. "/again")(x), cg(x)))
    os.execute("rm -rf " .. dir)
  end)

  it("rejects a freeze option that is not a boolean", function()
    local m = mlp()
    H.raises(function() ds.compile(m, { ds.spec({ 2, 24 }) }, { freeze = "yes" }) end, "freeze")
  end)
end)
