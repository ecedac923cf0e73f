-- tests/plan_runtime_spec.lua: the C plan runtime (src/runtime.c) on hostile input through its C API: operand
-- counts from the kernel registry's metadata, program checks, and buffer bounds that must not overflow.
local ds = require("ds")
local D = require("ds.dispatch")
local dsffi = require("ds.ffi")
local ffi, C = dsffi.ffi, dsffi.C

local ARENA, EXTERNAL, VIEW = C.DS_BUF_ARENA, C.DS_BUF_EXTERNAL, C.DS_BUF_VIEW
local F32 = 0
local I64MAX = 9223372036854775807LL

local function plan(bytes)
  return ffi.gc(C.ds_plan_new(bytes or 4096), C.ds_plan_free)
end
local function buffer(p, kind, base, shape, strides, offset)
  local n = #shape
  local sh = ffi.new("int64_t[?]", math.max(n, 1), shape)
  local st = strides and ffi.new("int64_t[?]", math.max(n, 1), strides) or nil
  return C.ds_plan_add_buffer(p, kind, base, F32, n, sh, st, offset or 0)
end
local function step(p, name, bufs, attrs)
  attrs = attrs or {}
  return C.ds_plan_add_step(p, name, #bufs, ffi.new("int[?]", #bufs, bufs), #attrs,
                            ffi.new("double[?]", math.max(#attrs, 1), attrs))
end
local function refused(rc, pattern)
  assert.equal(-1, rc)
  local msg = dsffi.last_error()
  assert.truthy(msg:find(pattern), msg)
end

describe("plan runtime: operand counts from the kernel registry", function()
  it("every kernel of the op table takes the operands its op gives (or says its attrs decide)", function()
    local wrong = {}
    for _, def in ipairs(D.list) do
      if def.kernel then
        for dt in pairs(def.dtypes) do
          local name = D.kernel_name(def, dt)
          local n = C.ds_kernel_operands(name)
          local want = def.variadic and -1 or def.noutputs + (def.ninputs or 0)
          if n ~= want and not (n == -1 and def.ninputs == nil) then
            wrong[#wrong + 1] = string.format("%s: registry %d, op table %d", name, n, want)
          end
        end
      end
    end
    table.sort(wrong)
    assert.same({}, wrong)
    assert.equal(3, C.ds_kernel_operands("ds_add_f32"))
    assert.equal(-1, C.ds_kernel_operands("ds_fused_f32"))
    assert.equal(-2, C.ds_kernel_operands("ds_nosuch_f32"))
  end)

  it("a step with too few or too many operands is refused before it can run", function()
    local p = plan()
    local a = buffer(p, ARENA, -1, { 4 }, nil, 0)
    local b = buffer(p, ARENA, -1, { 4 }, nil, 16)
    refused(step(p, "ds_add_f32", { a, b }), "ds_add_f32 has 2 operands, the kernel takes 3")
    refused(step(p, "ds_exp_f32", { a, b, a }), "ds_exp_f32 has 3 operands, the kernel takes 2")
    refused(step(p, "ds_layer_norm_f32", { a, b }), "the kernel takes 6")
    assert.equal(0, step(p, "ds_add_f32", { a, b, b }))
  end)

  it("variable-count kernels are checked by their own validator: fused programs and cat", function()
    local p = plan()
    local a = buffer(p, ARENA, -1, { 4 }, nil, 0)
    local b = buffer(p, ARENA, -1, { 4 }, nil, 16)
    local exp = require("ds.passes.fuse").OPCODE.exp
    -- one output, one input, one register, one instruction: r0 = exp(input 1); output r0
    assert.equal(0, step(p, "ds_fused_f32", { a, b }, { 1, 1, 1, 1, 0, exp, 0, 0, -1, 0, 0 }))
    refused(step(p, "ds_fused_f32", { a, b, b }, { 1, 1, 1, 1, 0, exp, 0, 0, -1, 0, 0 }), "names 2 operands, step has 3")
    refused(step(p, "ds_fused_f32", { a, b }, { 1, 1, 1, 1, 0, 9999, 0, 0, -1, 0, 0 }), "unknown opcode 9999")
    refused(step(p, "ds_fused_f64", { a, b }, { 1, 1, 1, 1, 0, exp, 0, 0, -1, 0, 0 }), "dtype")
    assert.equal(1, step(p, "ds_cat_f32", { a, b, b }, { 0, 2 }))
    refused(step(p, "ds_cat_f32", { a, b, b }, { 0, 3 }), "cat: step has 3 operands, its attrs name 3 inputs")
  end)
end)

describe("plan runtime: buffer bounds without overflow", function()
  it("a view offset near INT64_MAX is refused", function()
    local p = plan()
    local a = buffer(p, ARENA, -1, { 16 }, nil, 0)
    refused(buffer(p, VIEW, a, { 4 }, { 1 }, I64MAX - 1), "outside its base buffer")
    refused(buffer(p, VIEW, a, { 4 }, { -1 }, -I64MAX), "outside its base buffer")
    assert.is_true(buffer(p, VIEW, a, { 4 }, { 4 }, 0) >= 0)
  end)
  it("an empty view starts inside its base or right after it (a found plan file scaled 2^61 to bytes)", function()
    local p = plan()
    local a = buffer(p, ARENA, -1, { 16 }, nil, 0)
    refused(buffer(p, VIEW, a, { 0 }, { 1 }, 2 ^ 61), "empty view's offset")
    refused(buffer(p, VIEW, a, { 0 }, { 1 }, -1), "empty view's offset")
    assert.is_true(buffer(p, VIEW, a, { 0 }, { 1 }, 16) >= 0)
  end)
  it("huge strides that overflow the extent are refused", function()
    local p = plan()
    local a = buffer(p, ARENA, -1, { 16 }, nil, 0)
    refused(buffer(p, VIEW, a, { 3, 2 }, { I64MAX / 2 + 1, 1 }, 0), "strides overflow")
    refused(buffer(p, ARENA, -1, { 2, 2 }, { I64MAX, 1 }, 0), "strides overflow")
    refused(buffer(p, VIEW, a, { 2, 2, 2 }, { I64MAX / 4, I64MAX / 4, I64MAX / 4 }, 0), "outside its base buffer")
  end)
  it("an arena buffer whose end overflows is refused", function()
    local p = plan(4096)
    refused(buffer(p, ARENA, -1, { 4 }, nil, I64MAX - 7), "outside the 4096%-byte arena")
    refused(buffer(p, ARENA, -1, { 2 }, { 2 ^ 40 }, 0), "outside the 4096%-byte arena")
    assert.is_true(buffer(p, ARENA, -1, { 4 }, nil, 4080) >= 0)
    refused(buffer(p, ARENA, -1, { 4 }, nil, 4084), "outside")
  end)
  it("an empty arena buffer starts inside the arena or at its end (a fuzzed plan file gave one 2^63 / 4)", function()
    local p = plan(4096)
    refused(buffer(p, ARENA, -1, { 0 }, nil, 2 ^ 61), "empty arena buffer at byte")
    refused(buffer(p, ARENA, -1, { 0 }, nil, -8), "empty arena buffer at byte")
    assert.is_true(buffer(p, ARENA, -1, { 0 }, nil, 4096) >= 0)
  end)
end)

describe("plan runtime: prepare", function()
  it("readies a plan before its first run: the arena allocated and zeroed, a loop's sub-plans too", function()
    assert.are_not.equal(0, C.ds_plan_prepare(nil))
    assert.truthy(dsffi.last_error():find("NULL plan"))
    local p = plan(4096)
    local a = buffer(p, ARENA, -1, { 1024 }, nil, 0)
    assert.equal(0, C.ds_plan_prepare(p))
    local t = C.ds_plan_buffer(p, a)
    local v = ffi.cast("float *", t.data)
    local nonzero = 0
    for i = 0, 1023 do if v[i] ~= 0 then nonzero = nonzero + 1 end end
    assert.equal(0, nonzero)
    assert.equal(0, C.ds_plan_prepare(p))   -- again: nothing left to do
    -- a compiled while_loop (a loop step with cond and body sub-plans), prepared, then run: as eager
    local function f(x)
      local _, h = ds.while_loop(function(k) return k:lt(3) end, function(k, h) return k + 1, h * 2 + 1 end,
        { ds.tensor(0, { dtype = "i64" }), x })
      return h
    end
    local cg = ds.compile(f, { ds.spec({ 5 }) })
    local x = ds.rand(5)
    cg:prepare({ x })
    assert.equal(1, cg:plan_count())
    local got, want = cg(x), f(x)
    assert.same(want:totable(), got:totable())
    assert.equal(1, cg:plan_count())
  end)
end)
