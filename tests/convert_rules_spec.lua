-- tests/convert_rules_spec.lua: the rewrite rule tests/convert_spec.lua does not reach: a loop that starts on a Lua
-- condition (`while true`, a numeric for with Lua bounds) and whose break flag becomes a tensor: the trips so far are
-- unrolled and the rest of the loop is a graph loop; the same values eagerly, traced, compiled and loaded.
local ds = require("ds")
local H = require("helpers")

local same = H.bitwise
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local function i64(v) return ds.tensor(v, { dtype = "i64" }) end

local function ops_of(g)
  local ops = {}
  for _, n in ipairs(g.nodes) do ops[#ops + 1] = n.op end
  return table.concat(ops, " ")
end

-- results of fn on each input list: ds.convert (eager), traced, compiled, loaded; all must be the same bits
local function four_ways(fn, specs, inputs_list, name)
  local g = ds.trace(fn, specs)
  local cg = ds.compile(fn, specs)
  ds.save(cg, dir .. "/" .. name)
  local loaded = ds.load(dir .. "/" .. name)
  local conv = ds.convert(fn)
  for _, inputs in ipairs(inputs_list) do
    local e = { conv(unpack(inputs)) }
    for way, f in pairs { traced = g, compiled = cg, loaded = loaded } do
      local r = { f(unpack(inputs)) }
      assert.equal(#e, #r)
      for i = 1, #e do assert.is_true(same(e[i], r[i]), way .. " result " .. i) end
    end
  end
  return g, conv
end

local function until_big(tok)
  local steps = ds.tensor(0, { dtype = "i64" })
  while true do
    tok = tok * 2
    steps = steps + 1
    if tok:ge(16) then break end
  end
  return tok, steps
end

local function first_over(x)
  local s = x * 0
  for _ = 1, 10 do
    s = s + x
    if s:gt(5) then break end
  end
  return s
end

describe("ds.convert: a Lua loop whose break becomes a tensor", function()
  it("while true ... break on a tensor: the first trip unrolled, the rest a graph loop", function()
    local g, conv = four_ways(until_big, { ds.spec({}, "i64") }, { { i64(1) }, { i64(3) }, { i64(20) } }, "until_big")
    local tok, steps = conv(i64(1))
    assert.same({ 16, 4 }, { tok:item(), steps:item() })
    tok, steps = conv(i64(20))
    assert.same({ 40, 1 }, { tok:item(), steps:item() })
    local ops = ops_of(g)
    assert.truthy(ops:find("^mul add ge"), ops) -- trip 1, traced as plain ops
    assert.truthy(ops:find("while_loop$"), ops) -- the rest
  end)

  it("a numeric for with Lua bounds and a break on a tensor continues as a graph loop from the next i", function()
    local g, conv = four_ways(first_over, { ds.spec({}) }, { { ds.tensor(1) }, { ds.tensor(2.5) }, { ds.tensor(0.1) } },
      "first_over")
    assert.equal(6, conv(ds.tensor(1)):item())
    assert.equal(7.5, conv(ds.tensor(2.5)):item())
    assert.is_true(math.abs(conv(ds.tensor(0.1)):item() - 1) < 1e-6) -- ten trips, no break
    assert.equal("mul add gt cond while_loop", ops_of(g))
  end)
end)

teardown(function() os.execute("rm -rf " .. dir) end)
