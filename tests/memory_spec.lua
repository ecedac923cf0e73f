-- tests/memory_spec.lua: flat RSS over long loops of temporaries, C live bytes back to baseline, threads and BLAS info.
local ds = require("ds")

local page = 4096
local function rss_bytes()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("*n", "*n")
  f:close()
  return resident * page
end

-- Under AddressSanitizer freed blocks sit in its quarantine (256 MiB by default) before reuse, so RSS
-- grows by up to that much without a leak; the plain run holds the tight bounds.
local slack = (os.getenv("LD_PRELOAD") or ""):find("asan", 1, true) and 300 * 2 ^ 20 or 0

local function settle()
  collectgarbage("collect"); collectgarbage("collect")
end

describe("memory", function()
  -- in a process of its own: RSS saw-tooths up to the collector's high-water mark, which depends on what else the
  -- process holds (after the rest of the suite, hundreds of MiB: the saw-tooth then outgrows any tight bound)
  it("100k iterations of small temporaries keep the RSS flat", function()
    local script = [[
      local ds = require("ds")
      local function rss()
        local f = assert(io.open("/proc/self/statm"))
        local _, resident = f:read("*n", "*n")
        f:close()
        return resident * 4096
      end
      local a, b = ds.ones(10, 10), ds.rand(10, 10)
      local function step() local c = (a + b) * b - 1; return c:relu() end
      for _ = 1, 20000 do step() end              -- warm-up: caches, JIT traces, GC pace
      -- small tensors are Lua GC memory: RSS saw-tooths up to the high-water mark of the collector, then stays
      -- there unless something leaks
      local r = {}
      for round = 1, 10 do
        for _ = 1, 10000 do step() end
        r[round] = rss()
      end
      io.write(r[10] - math.max(r[1], r[2], r[3]))
    ]]
    local p = assert(io.popen("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit -e '" .. script .. "' 2>&1"))
    local out = p:read("*a")
    p:close()
    local growth = tonumber(out)
    assert(growth, out)
    assert.is_true(growth < 4 * 2 ^ 20 + slack, string.format("RSS grew by %.1f MiB", growth / 2 ^ 20))
  end)

  it("large temporaries (600 MiB in total) are collected as C memory grows", function()
    local x = ds.ones(512, 512)                  -- 1 MiB: C memory, invisible to the Lua GC
    for _ = 1, 50 do local _ = x * 2 end
    settle()
    local before = rss_bytes()
    for _ = 1, 300 do local _ = x * 2 + 1 end    -- 2 MiB of C memory per iteration
    local growth = rss_bytes() - before
    assert.is_true(growth < 160 * 2 ^ 20 + slack, string.format("RSS grew by %.1f MiB", growth / 2 ^ 20))
  end)

  it("live C bytes return to the baseline once temporaries are collected", function()
    settle()
    local base = ds.memory().live_bytes
    do
      local keep = {}
      for i = 1, 100 do keep[i] = ds.zeros(200, 100 + i) end   -- > 64 KiB each: C storage
      local v = keep[50]:reshape(-1):narrow(1, 1, 10)
      assert.is_true(ds.memory().live_bytes > base + 100 * 200 * 100 * 4)
      keep = nil; v = nil
    end
    settle()
    assert.equal(base, ds.memory().live_bytes)
    assert.is_true(ds.memory().peak_bytes >= base)
    ds.empty_cache()
    assert.equal(0, ds.memory().cached_bytes)
  end)

  it("a compiled call's outputs above 4 KiB are C memory: counted live, then cached and reused", function()
    local w = ds.randn(64, 256)
    local cg = ds.compile(function(x) return ds.matmul(x, w) end, { ds.spec({ 16, 64 }) })
    local x = ds.randn(16, 64)
    local want = ds.matmul(x, w)
    local double = ds.compile(function(v) return v * 2 end, { ds.spec({ 4 }) })
    local four = ds.ones(4)                           -- made before the count (C memory under DS_ALLOC=c)
    cg(x); double(four)                               -- the plans are built once
    settle()
    local base = ds.memory().live_bytes
    local y = cg(x)                                   -- (16, 256): 16 KiB
    assert.equal(base + 16 * 256 * 4, ds.memory().live_bytes)
    assert.is_true(require("helpers").bitwise(want, y))
    local p = y:data_ptr()
    y = nil
    settle()
    assert.equal(base, ds.memory().live_bytes)
    assert.is_true(ds.memory().cached_bytes >= 16 * 256 * 4)
    local again = cg(x)                               -- a fresh tensor on the block the dropped output left
    assert.equal(p, again:data_ptr())
    assert.is_true(require("helpers").bitwise(want, again))
    local other = cg(x)                               -- while `again` is held, another block
    assert.are_not.equal(p, other:data_ptr())
    local small = double(four)                        -- 16 bytes stay Lua GC memory (unless DS_ALLOC=c, under ASan)
    local c_small = os.getenv("DS_ALLOC") == "c" and 64 or 0
    assert.equal(base + 2 * 16 * 256 * 4 + c_small, ds.memory().live_bytes)
    assert.equal(2, small[1]:item())
  end)

  it("blocks of megabytes (on huge pages) hold their values, are reused from the cache and given back", function()
    settle()
    ds.empty_cache()
    local base = ds.memory().live_bytes
    for _, n in ipairs { 600 * 1024, 3 * 2 ^ 20 + 5, 10 * 2 ^ 20 } do   -- f32 elements: 2.3, 12 and 40 MiB
      local t = ds.arange(n):astype("f32")
      assert.equal(n - 1, t[n]:item())
      assert.equal(0, t[1]:item())
      assert.equal(math.floor(n / 2), t[math.floor(n / 2) + 1]:item())
      local p = t:data_ptr()
      t = nil
      settle()
      assert.is_true(ds.memory().cached_bytes >= n * 4)
      local again = ds.empty(n)                        -- the same size class: the cached block comes back
      assert.equal(p, again:data_ptr())
      again = nil
      settle()
    end
    assert.equal(base, ds.memory().live_bytes)
    ds.empty_cache()
    assert.equal(0, ds.memory().cached_bytes)
  end)
end)

describe("threads and BLAS", function()
  it("ds.info() names the BLAS core type and the thread counts", function()
    local info = ds.info()
    assert.is_string(info.blas_core)
    assert.is_true(#info.blas_core > 0)
    assert.is_true(info.threads >= 1)
    assert.is_true(info.blas_threads >= 1)
    assert.truthy(info.blas_config:find("OpenBLAS", 1, true))
  end)

  it("set_num_threads drives OpenMP and OpenBLAS together", function()
    local n0 = ds.get_num_threads()
    ds.set_num_threads(1)
    assert.equal(1, ds.get_num_threads())
    assert.equal(1, ds.info().blas_threads)
    ds.set_num_threads(2)
    assert.equal(2, ds.get_num_threads())
    assert.equal(2, ds.info().blas_threads)
    ds.set_num_threads(n0)
  end)

  it("large elementwise results are identical with 1 and 2 threads", function()
    local n0 = ds.get_num_threads()
    ds.manual_seed(1)
    local x = ds.randn(300, 1000)
    ds.set_num_threads(1)
    local a = (x * 3 + 1):tanh():exp()
    ds.set_num_threads(2)
    local b = (x * 3 + 1):tanh():exp()
    ds.set_num_threads(n0)
    assert.is_true(require("helpers").bitwise(a, b))
  end)

  it("respects OPENBLAS_CORETYPE when the user sets it", function()
    local lib = ds.info().library
    for _, core in ipairs { "Haswell", "SkylakeX" } do
      local cmd = string.format("OPENBLAS_CORETYPE=%s DS_LIB='%s' LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' "
        .. "luajit -e 'io.write(require(\"ds\").info().blas_core)'", core, lib)
      local p = assert(io.popen(cmd))
      local out = p:read("*a")
      p:close()
      assert.equal(core:lower(), out:lower())
    end
  end)
end)
