-- tests/generate_loop_plan_spec.lua: the compiled decoding loop as a C loop step (passes/lower.lua, src/runtime.c):
-- no Lua step in the plan, the body's cache and generator writes land in place in the model's state (no copy of a
-- cache per trip), the same bits as eagerly; saved, it runs in a fresh process through ds.load and through the C
-- loader (src/model.c) with the same bits; a hostile loop step in a plan file is refused or stopped.
local ds = require("ds")
local ffi = require("ffi")
local H = require("helpers")
local C = require("ds.ffi").C
package.path = "./examples/?.lua;" .. package.path
local CM = require("char_gpt_model")

local V = 11
local SPECS = { ds.spec({ 1, "t" }, "i64"), ds.spec({}, "i64") }
local function i64(v) return ds.tensor(v, { dtype = "i64" }) end
local function model()
  ds.manual_seed(5)
  return CM.GPT({ vocab = V, embed = 16, heads = 2, layers = 2, block = 24 })
end
local dir = H.tmp_dir()
local prompt = i64({ { 3, 1, 4, 1, 5 } })
local SAMPLED = { max_new_tokens = 9, temperature = 0.8, top_k = 6 }

-- the loop step of a compiled graph's last plan (its log entry), and that plan
local function loop_step(cg)
  local p = cg._last_plan
  for _, seg in ipairs(p.segments) do assert.is_nil(seg.lua, "a Lua step in the plan") end
  for _, st in ipairs(p.log.steps) do if st.cond then return st, p end end
end

-- the generated tokens of the C loader on a saved loop (nil and the error when it does not load or run)
local function run_c(path, n, seed)
  local m = C.ds_model_load(path)
  if m == nil then return nil, ffi.string(C.ds_last_error()) end
  local tokens, count = ds.zeros({ 1, n }, { dtype = "i64" }), ds.zeros({}, { dtype = "i64" })
  local rc = C.ds_model_run(m, ffi.new("const ds_tensor*[2]", { prompt._c, i64(seed)._c }),
    ffi.new("ds_tensor*[2]", { tokens._c, count._c }))
  local err = rc ~= 0 and ffi.string(C.ds_last_error()) or nil
  C.ds_model_free(m)
  if err then return nil, err end
  return tokens, count
end

describe("the compiled decoding loop as a C loop step", function()
  it("runs without Lua steps; the body updates the caches and the generator in place; the same bits", function()
    for _, o in ipairs { { max_new_tokens = 9 }, SAMPLED, { max_new_tokens = 12, eos = 10 } } do
      local want = { ds.generation_loop(model(), o)(prompt, i64(3)) }
      local m = model()
      local cg = ds.compile(ds.generation_loop(m, o), SPECS)
      local got = { cg(prompt, i64(3)) }
      assert(H.bitwise(want[1], got[1]) and H.bitwise(want[2], got[2]))
      local st, p = loop_step(cg)
      assert.truthy(st, "no loop step")
      -- the extras the loop updates are the model's state buffers themselves (caches, generator): no copy first
      local written = 0
      for k = 1, st.nextra do
        local b = p.log.buffers[st.buffers[2 * st.nvars + k] + 1]
        if b.role == "state" then written = written + 1 end
      end
      assert.is_true(written >= 4)   -- 2 layers x (keys, values)
      -- the body's plan copies nothing into them: its writes go to the bound buffers in place
      local bound = {}
      for _, b in ipairs(st.body.binds) do if b[2] >= 0 then bound[b[1]] = true end end
      for _, s in ipairs(st.body.log.steps) do
        if s.kernel:match("^ds_copy_") then assert.is_nil(bound[s.buffers[1]], "a copy into a loop operand") end
      end
      -- a second call: the same tokens (the caches are overwritten from position 1)
      local again = { cg(prompt, i64(3)) }
      assert(H.bitwise(want[1], again[1]))
    end
  end)

  it("a loaded loop generates in a fresh process, through ds.load and through the C loader, with the same bits",
    function()
      local want = ds.generation_loop(model(), SAMPLED)(prompt, i64(7))
      local cg = ds.compile(ds.generation_loop(model(), SAMPLED), SPECS)
      cg(prompt, i64(1))   -- a plan for this prompt length (saved with the graph)
      ds.save(cg, dir .. "/decode")
      local loaded = ds.load(dir .. "/decode")
      assert(H.bitwise(want, loaded(prompt, i64(7))))
      assert.truthy(loop_step(loaded), "the loaded loop is not a C loop step")
      local script = dir .. "/fresh.lua"
      H.write_file(script, string.format([[
        local ds, ffi = require("ds"), require("ffi")
        local C = require("ds.ffi").C
        local prompt, seed = ds.tensor({ { 3, 1, 4, 1, 5 } }, { dtype = "i64" }), ds.tensor(7, { dtype = "i64" })
        local a = ds.load(%q)(prompt, seed)
        local m = assert(C.ds_model_load(%q) ~= nil and C.ds_model_load(%q))
        local b, n = ds.zeros({ 1, 9 }, { dtype = "i64" }), ds.zeros({}, { dtype = "i64" })
        assert(C.ds_model_run(m, ffi.new("const ds_tensor*[2]", { prompt._c, seed._c }),
          ffi.new("ds_tensor*[2]", { b._c, n._c })) == 0, ffi.string(C.ds_last_error()))
        print(table.concat(a:reshape(-1):totable(), " "))
        print(table.concat(b:reshape(-1):totable(), " "), n:item())
      ]], dir .. "/decode", dir .. "/decode", dir .. "/decode"))
      local p = io.popen(string.format("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit %s 2>&1", script))
      local out = p:read("*a"); p:close()
      local line = table.concat(want:reshape(-1):totable(), " ")
      assert.are.equal(line .. "\n" .. line .. "\t9\n", out)
    end)

  it("a loop step of a plan file: a bad trip bound, variable count or sub-plan is refused; max_trips stops it", function()
    local cg = ds.compile(ds.generation_loop(model(), { max_new_tokens = 9 }), SPECS)
    cg(prompt, i64(1))
    ds.save(cg, dir .. "/hostile")
    local plan = H.read_file(dir .. "/hostile.plan")
    local HEADER, OPNAME = ffi.sizeof("ds_planfile_header"), ffi.sizeof("ds_planfile_opname")
    local h = ffi.new("ds_planfile_header")
    ffi.copy(h, plan, HEADER)
    -- walk the first record to its loop step: the offset of its attrs (nvars, max_trips)
    local pos = HEADER + h.nops * OPNAME
    local rec = ffi.new("ds_planfile_record")
    ffi.copy(rec, plan:sub(pos + 1), ffi.sizeof(rec))
    pos = pos + ffi.sizeof(rec) + rec.nbuffers * ffi.sizeof("ds_planfile_buffer")
    local attrs_at, step = nil, ffi.new("ds_planfile_step")
    for _ = 1, rec.nsteps do
      ffi.copy(step, plan:sub(pos + 1), ffi.sizeof(step))
      pos = pos + ffi.sizeof(step) + 4 * step.nbuf
      if ffi.string(step.kernel) == "ds_loop" then attrs_at = pos; break end
      pos = pos + 8 * step.nattrs
    end
    assert.truthy(attrs_at, "no loop step in the plan file")
    local function with_attrs(nvars, trips)
      local body = plan:sub(1, attrs_at) .. ffi.string(ffi.new("double[2]", { nvars, trips }), 16)
        .. plan:sub(attrs_at + 17)
      local hh = ffi.new("ds_planfile_header")
      ffi.copy(hh, body, HEADER)
      local rest = body:sub(HEADER + 1)
      hh.body_bytes = #rest; hh.body_crc32 = C.ds_crc32(rest, #rest)
      H.write_file(dir .. "/hostile.plan", ffi.string(hh, HEADER) .. rest)
      return run_c(dir .. "/hostile", 9, 1)
    end
    local want = run_c(dir .. "/hostile", 9, 1)
    assert(H.bitwise(ds.generation_loop(model(), { max_new_tokens = 9 })(prompt, i64(1)), want))
    local nvars = ffi.new("double[2]")
    ffi.copy(nvars, plan:sub(attrs_at + 1), 16)
    for _, bad in ipairs { { nvars[0], 0, "max_trips 0" }, { nvars[0], 2e6, "max_trips 2e+06" },
                           { nvars[0], 2.5, "max_trips 2.5" }, { 0, 100, "a loop of 0 variables" },
                           { 1e4, 100, "a loop of 10000 variables" },
                           { nvars[0] - 1, 100, "a loop sub-plan has" } } do
      local ok, err = with_attrs(bad[1], bad[2])
      assert.is_nil(ok)
      assert.truthy(err:find(bad[3], 1, true), err)
    end
    -- the generation takes 8 trips: a bound of 3 stops it
    local ok, err = with_attrs(nvars[0], 3)
    assert.is_nil(ok)
    assert.truthy(err:find("more than 3 trips", 1, true), err)
    assert(H.bitwise(want, with_attrs(nvars[0], 8)))
  end)

  it("a compiled step with a position per row writes only those rows of the caches (index_copy_ in place)", function()
    ds.manual_seed(5)
    local m = CM.GPT({ vocab = V, embed = 16, heads = 2, layers = 2, block = 24, cache_batch = 3 })
    local cg = ds.compile(function(ids, pos) return m:step(ids, pos) end, { ds.spec({ 3, 1 }, "i64"),
      ds.spec({ 3 }, "i64") })
    local ids, pos = i64({ { 1 }, { 2 }, { 3 } }), i64({ 1, 4, 2 })
    local got = cg(ids, pos)
    local p = cg._last_plan
    local writes = 0
    for _, st in ipairs(p.log.steps) do
      local b = p.log.buffers[st.buffers[1] + 1]
      if b.role == "view" then b = p.log.buffers[b.base + 1] end
      if b.role == "state" then
        assert.truthy(st.kernel:match("^ds_index_copy_"), st.kernel .. " writes a cache")
        writes = writes + 1
      end
    end
    assert.are.equal(4, writes)   -- 2 layers x (keys, values), nothing else touches a cache
    ds.manual_seed(5)
    local e = CM.GPT({ vocab = V, embed = 16, heads = 2, layers = 2, block = 24, cache_batch = 3 })
    assert(H.bitwise(ds.no_grad(function() return e:step(ids, pos) end), got))
  end)

  it("a loop whose body has a Lua step (a cond inside) runs its trips in Lua, with the eager bits", function()
    local function f(x)
      return ds.while_loop(function(i) return i:lt(4) end, function(i, y)
        return i + 1, ds.cond(y:sum():gt(0), function(a) return a * 2 end, function(a) return a - 1 end, y)
      end, { ds.tensor(0, { dtype = "i64" }), x })
    end
    local x = ds.tensor({ 0.5, -2 })
    local cg = ds.compile(f, { ds.spec({ 2 }, "f32") })
    local _, y = cg(x)
    local _, want = f(x)
    assert(H.bitwise(want, y))
    local lua_steps = 0
    for _, seg in ipairs(cg._last_plan.segments) do if seg.lua then lua_steps = lua_steps + 1 end end
    assert.are.equal(1, lua_steps)
  end)
end)
