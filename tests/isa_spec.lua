-- tests/isa_spec.lua: the kernel ISA path (ds.info().isa, DS_ISA) and the same bits on every path: the
-- products of tests/isa_cases.lua computed here (the host's widest path) and in a child forced to AVX2.
local ds = require("ds")
local H = require("helpers")
local ffi = require("ffi")

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)

-- run tests/isa_cases.lua in a fresh process with env set; returns its results' bytes by case name
local function child_bytes(env)
  local script = dir .. "/child.lua"
  H.write_file(script, string.format([[
    local ds = require("ds")
    local ffi = require("ffi")
    local f = assert(io.open(%q, "wb"))
    f:write(ds.info().isa, "\n")
    for _, c in ipairs(require("isa_cases")()) do
      local t = c[2]:contiguous()
      f:write(c[1], "\n", t:numel() * t:element_size(), "\n", ffi.string(t:data_ptr(), t:numel() * t:element_size()))
    end
    f:close()
  ]], dir .. "/out.bin"))
  local cmd = string.format("%s LUA_PATH='./lua/?.lua;./lua/?/init.lua;./tests/?.lua;;' luajit %s 2>&1", env, script)
  local p = io.popen(cmd)
  local log = p:read("*a")
  p:close()
  local f = io.open(dir .. "/out.bin", "rb")
  assert(f, "child failed: " .. log)
  local isa = f:read("*l")
  local got = {}
  while true do
    local name = f:read("*l")
    if not name then break end
    local n = tonumber(f:read("*l"))
    got[name] = n > 0 and f:read(n) or ""
  end
  f:close()
  os.remove(dir .. "/out.bin")
  return isa, got
end

local function bytes(t)
  local c = t:contiguous()
  return ffi.string(c:data_ptr(), c:numel() * c:element_size())
end

describe("ISA paths", function()
  it("ds.info() names the path in use; DS_ISA=avx2 forces the narrow one", function()
    local isa, forced = ds.info().isa, os.getenv("DS_ISA")
    if forced and forced ~= "" then assert.equal(forced, isa) else assert.is_true(isa == "avx2" or isa == "avx512") end
    assert.equal("avx2", (child_bytes("DS_ISA=avx2")))
  end)

  it("AVX-512 and AVX2 give the same bits for matmul, linear, conv2d (and their gradients) and compiled code", function()
    if ds.info().isa ~= "avx512" then
      print("isa_spec: this host has no AVX-512; comparing the AVX2 path with itself")
    end
    local cases = require("isa_cases")()
    local isa, narrow = child_bytes("DS_ISA=avx2")
    assert.equal("avx2", isa)
    for _, c in ipairs(cases) do
      assert(narrow[c[1]], "child lacks case " .. c[1])
      assert(narrow[c[1]] == bytes(c[2]), c[1] .. ": bits differ between " .. ds.info().isa .. " and avx2")
    end
  end)

  it("a product is the same with 1 and 2 threads on the narrow path too", function()
    local _, one = child_bytes("DS_ISA=avx2 OMP_NUM_THREADS=1")
    local _, two = child_bytes("DS_ISA=avx2 OMP_NUM_THREADS=2")
    for name, b in pairs(one) do assert(two[name] == b, name .. ": 1 vs 2 threads") end
  end)

  it("an unknown DS_ISA is an error at load naming the variable", function()
    local p = io.popen("DS_ISA=sse2 LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit -e 'require(\"ds\")' 2>&1")
    local log = p:read("*a")
    p:close()
    assert.truthy(log:find("DS_ISA=sse2", 1, true), log)
  end)
end)
