-- passes_spec.lua: each compiler pass on a small traced graph, printing the IR before and after
-- (set DS_QUIET_IR=1 to silence) and checking what changed and that results stay bitwise equal.
local ds = require("ds")
local H = require("helpers")
local compile = require("ds.compile")
local lower = require("ds.passes.lower")
local memplan = require("ds.passes.memplan")

local function ir_of(fn, specs) return ds.trace(fn, specs) end -- the traced graph is the IR the passes rewrite

local function show(title, before, after)
  if os.getenv("DS_QUIET_IR") then return end
  print(("\n---- %s: before ----\n%s\n---- %s: after ----\n%s"):format(title, before, title, after))
end

local function ops(ir)
  local out = {}
  for i, n in ipairs(ir.nodes) do out[i] = n.op end
  return table.concat(out, " ")
end

-- run a pass and return the IR text before/after
local function apply(name, ir)
  local pass = require("ds.passes." .. name)
  if type(pass) == "table" then pass = pass.run end
  local before = tostring(ir)
  local _, count = pass(ir)
  show(name, before, tostring(ir))
  return count
end

describe("passes", function()
  it("dce removes nodes whose results nobody uses", function()
    local ir = ir_of(function(x) local unused = x:exp():sum(); return x * 2 end, { ds.spec({ 3 }, "f32", "x") })
    assert.are.equal("exp sum mul", ops(ir))
    assert.are.equal(2, apply("dce", ir))
    assert.are.equal("mul", ops(ir))
  end)

  it("dce keeps random nodes that advance the generator", function()
    local ir = ir_of(function(x) local r = ds.rand(3); return x + 1 end, { ds.spec({ 3 }, "f32", "x") })
    apply("dce", ir)
    assert.truthy(ops(ir):find("rand", 1, true))
  end)

  it("cse merges repeated subexpressions", function()
    local ir = ir_of(function(x) return x:exp() + x:exp(), x:transpose(1, 2):sum(1) + x:transpose(1, 2):sum(1) end,
      { ds.spec({ 2, 3 }, "f32", "x") })
    assert.are.equal("exp exp add transpose sum transpose sum add", ops(ir))
    assert.are.equal(3, apply("cse", ir))
    assert.are.equal("exp add transpose sum add", ops(ir))
  end)

  it("fold evaluates nodes on constants now, through the same kernels", function()
    local w = ds.randn(4)
    local f = function(x) return x:matmul(ds.ones(4, 4) * 2 + ds.arange(0, 4)) + w end
    local ir = ir_of(f, { ds.spec({ 3, 4 }, "f32", "x") })
    assert.truthy(apply("fold", ir) >= 3)
    assert.are.equal("matmul add", ops(ir))
    local cg = compile.from_ir(ir_of(f, { ds.spec({ 3, 4 }, "f32", "x") }))
    local x = ds.randn(3, 4)
    assert(H.bitwise(cg(x), f(x)))
  end)

  it("fuse turns an elementwise chain into one fused node", function()
    local ir = ir_of(function(x, b) return (x + b):gelu() * 0.5 - x end, { ds.spec({ 4, 8 }, "f32", "x"), ds.spec({ 8 }, "f32", "b") })
    assert.are.equal(1, apply("fuse", ir))
    assert.are.equal("fused", ops(ir))
    assert.are.same({ "add", "gelu", "mul", "sub" }, (function()
      local o = {}
      for i, s in ipairs(ir.nodes[1].program.steps) do o[i] = s.op end
      return o
    end)())
  end)

  it("fuse does not join a node whose other input is computed after the chain starts", function()
    local ir = ir_of(function(x) local a = x * 2; local s = a:sum(2, true); return (a + 1) * s end,
      { ds.spec({ 4, 8 }, "f32", "x") })
    apply("fuse", ir)
    -- mul needs s, which needs a: the chain cannot run before sum
    local order = ops(ir)
    assert.truthy(order:find("sum", 1, true) < order:find("mul", 1, true) or order:find("fused", order:find("sum", 1, true), true))
  end)

  it("epilogue folds bias + activation into the matmul step", function()
    local ir = ir_of(function(x, w, b) return (x:matmul(w) + b):relu() end,
      { ds.spec({ 4, 8 }, "f32", "x"), ds.spec({ 8, 5 }, "f32", "w"), ds.spec({ 5 }, "f32", "b") })
    apply("fuse", ir)
    assert.are.equal(1, apply("epilogue", ir))
    assert.are.equal("matmul_ep", ops(ir))
  end)

  it("single_output runs max_pool2d without indices when nobody reads them", function()
    local x = ds.randn(2, 3, 8, 8)
    local infer = ir_of(function(t) return ds.max_pool2d(t, 2) * 2 end, { ds.spec({ 2, 3, 8, 8 }) })
    assert.are.equal(1, apply("single_output", infer))
    assert.truthy(ops(infer):find("max_pool2d_values", 1, true))
    local both = ir_of(function(t) local v, i = ds.max_pool2d(t, 2, { return_indices = true }); return v, i end,
      { ds.spec({ 2, 3, 8, 8 }) })
    assert.are.equal(0, apply("single_output", both))
    local cg = ds.compile(function(t) return ds.max_pool2d(t, 2) * 2 end, { ds.spec({ 2, 3, 8, 8 }) })
    assert.are.equal(1, cg.stats.single_output)
    assert(H.bitwise(cg(x), ds.max_pool2d(x, 2) * 2))
  end)

  it("memplan reuses dead buffers in place and packs the arena", function()
    local ir = ir_of(function(x)
      local a = x:exp()
      local b = a:matmul(a)
      local c = b:tanh()
      return c:matmul(c):sum()
    end, { ds.spec({ 64, 64 }, "f32", "x") })
    local L = lower.build(ir, {})
    local arena, eager, stats = memplan(L)
    local lines = {}
    for _, r in ipairs(L.roots) do
      lines[#lines + 1] = string.format("buffer %d %s %s%s", r.id, r.kind, r.dtype .. require("ds.shape").str(r.shape),
        r.offset and (" @" .. r.offset) or "")
    end
    show("memplan", tostring(ir), table.concat(lines, "\n") .. ("\narena %d bytes (unplanned %d)"):format(arena, eager))
    assert.truthy(stats.inplace >= 1)            -- tanh writes over b
    assert.truthy(arena <= 2 * 64 * 64 * 4)      -- never more than two 16 KiB buffers live at once
    assert.truthy(eager > arena)
  end)
end)
