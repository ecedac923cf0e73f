-- tests/small_fixes_spec.lua: issue 29 item 10: bounded adaptive pooling sizes, ds.save_state removing the
-- temporary files of savers that died, NaN/inf fills.
local ds = require("ds")
local H = require("helpers")
local F = ds.nn.functional

describe("adaptive pooling output sizes", function()
  local x = ds.randn(1, 2, 5, 7)

  it("refuses inf, NaN and sizes past the limit with a message naming the op, at once", function()
    for _, op in ipairs { "adaptive_avg_pool2d", "adaptive_max_pool2d" } do
      for _, bad in ipairs { math.huge, { 2, math.huge }, 2 ^ 31, 2 ^ 53, { 2 ^ 31, 1 }, 0 / 0, -math.huge, 65537 } do
        local t0 = os.clock()
        local ok, err = pcall(F[op], x, bad)
        assert.is_false(ok, op)
        assert.truthy(tostring(err):find(op .. ": output_size", 1, true), tostring(err))
        assert.truthy(tostring(err):find("1..65536", 1, true), tostring(err))
        assert.is_true(os.clock() - t0 < 1, op .. " took " .. os.clock() - t0 .. " s to refuse")
      end
    end
  end)

  it("refuses an averaging matrix past its limit, naming the sizes", function()
    local wide = ds.zeros(1, 1, 1, 2 ^ 11)
    local ok, err = pcall(F.adaptive_avg_pool2d, wide, { 1, 2 ^ 16 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("adaptive_avg_pool2d: output size 65536 over an input dim of 2048", 1, true),
      tostring(err))
  end)

  it("still pools to sizes larger and smaller than the input", function()
    assert.same({ 1, 2, 3, 4 }, F.adaptive_avg_pool2d(x, { 3, 4 }):size())
    assert.same({ 1, 2, 10, 14 }, F.adaptive_max_pool2d(x, { 10, 14 }):size())
    assert.same({ 1, 2, 1, 65536 }, F.adaptive_avg_pool2d(ds.ones(1, 2, 1, 1), { 1, 65536 }):size())
    local y = F.adaptive_max_pool2d(ds.arange(1, 9):reshape(1, 1, 1, 8), { 1, 65536 })
    assert.same({ 1, 1, 1, 65536 }, y:size())
    assert.equal(1, y[1][1][1][1]:item()); assert.equal(8, y[1][1][1][65536]:item())
  end)
end)

describe("ds.save_state temporaries", function()
  -- a process id that no longer runs: a shell that printed its own id and exited
  local function dead_pid()
    local p = io.popen("sh -c 'echo $$'"); local pid = tonumber(p:read("*l")); p:close()
    return pid
  end

  it("removes the temporary files of savers that died, keeps those of live ones", function()
    local dir = H.tmp_dir()
    local dead = string.format("%s/.w.safetensors.%d.3.tmp", dir, dead_pid())
    local live = string.format("%s/.w.safetensors.1.3.tmp", dir)   -- pid 1 always runs
    local other = string.format("%s/.other.safetensors.%d.1.tmp", dir, dead_pid())
    for _, f in ipairs { dead, live, other } do
      local h = io.open(f, "wb"); h:write(string.rep("x", 1000)); h:close()
    end
    ds.save_state({ w = ds.ones(3) }, dir .. "/w.safetensors")
    assert.is_nil(io.open(dead), "a dead saver's temporary file was kept")
    assert.truthy(io.open(live), "a live saver's temporary file was removed")
    assert.truthy(io.open(other), "another file's temporary was removed")
    assert.same({ 1, 1, 1 }, ds.load_state(dir .. "/w.safetensors").w:totable())
    os.execute("rm -rf " .. dir)
  end)

  it("leaves no temporary file of its own, and saves into the current directory by a bare name", function()
    local dir = H.tmp_dir()
    ds.save_state({ a = ds.zeros(2) }, dir .. "/s")
    ds.save_state({ a = ds.ones(2) }, dir .. "/s")
    local listing = io.popen("ls -a " .. dir):read("*a")
    assert.falsy(listing:find("%.tmp"), listing)
    assert.same({ 1, 1 }, ds.load_state(dir .. "/s").a:totable())
    os.execute("rm -rf " .. dir)
  end)
end)

describe("fills", function()
  it("ds.full takes NaN and infinities as PyTorch does", function()
    local n = ds.full({ 2, 2 }, 0 / 0):totable()
    assert.is_true(n[1][1] ~= n[1][1] and n[2][2] ~= n[2][2])
    assert.same({ math.huge, math.huge }, ds.full({ 2 }, math.huge):totable())
    assert.same({ -math.huge }, ds.full({ 1 }, -math.huge, { dtype = "f64" }):totable())
  end)
end)

describe("compiled views of empty tensors", function()
  it("a narrow of an empty batch compiles and runs (its view's offset lay past the empty base)", function()
    local function fn(x) return x:narrow(-2, 2, 1) * 2 end
    local x = ds.zeros(0, 3, 3)
    local y = ds.compile(fn, { x })(x)
    assert.same({ 0, 1, 3 }, y.shape)
    assert.same(fn(x).shape, y.shape)
  end)
end)
