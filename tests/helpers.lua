-- tests/helpers.lua: shared assertions and setup for the specs (close-to, bitwise equality, errors, temp dirs, an MLP).
local ds = require("ds")
local H = {}

-- max |a - b| <= atol + rtol * |b| elementwise; a, b tensors or nested tables/numbers
function H.close(a, b, rtol, atol)
  rtol, atol = rtol or 1e-5, atol or 1e-6
  local ta = ds.is_tensor(a) and a:astype("f64"):reshape(-1):totable() or a
  local tb = ds.is_tensor(b) and b:astype("f64"):reshape(-1):totable() or b
  if type(ta) == "number" then ta = { ta } end
  if type(tb) == "number" then tb = { tb } end
  assert(#ta == #tb, string.format("length %d vs %d", #ta, #tb))
  for i = 1, #ta do
    local x, y = ta[i], tb[i]
    if not (x ~= x and y ~= y) and not (x == y) then
      if math.abs(x - y) > atol + rtol * math.abs(y) then
        error(string.format("element %d: %.9g vs %.9g (rtol %g, atol %g)", i, x, y, rtol, atol), 2)
      end
    end
  end
  return true
end

-- bitwise equality of two tensors of the same dtype and shape
function H.bitwise(a, b)
  local ffi = require("ffi")
  assert(a.dtype == b.dtype, "dtype " .. a.dtype .. " vs " .. b.dtype)
  assert(#a._shape == #b._shape, "rank differs")
  for i = 1, #a._shape do assert(a._shape[i] == b._shape[i], "shape differs") end
  local ca, cb = a:contiguous(), b:contiguous()
  local n = ca:numel() * ca:element_size()
  return n == 0 or ffi.string(ca:data_ptr(), n) == ffi.string(cb:data_ptr(), n)
end

-- the contents of a file / write s to a file (binary)
function H.read_file(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
function H.write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- a JSON fixture of tests/fixtures/, decoded
function H.fixture(name) return require("cjson").decode(H.read_file("tests/fixtures/" .. name)) end

-- a new empty directory under the system's temp dir (the caller removes it, if it cares)
function H.tmp_dir()
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir) == 0, "cannot create " .. dir)
  return dir
end

-- a small MLP in eval mode, Linear(nin, nhidden) -> GELU -> Linear(nhidden, nout), initialized after manual_seed(seed)
function H.mlp(seed, nin, nhidden, nout)
  local nn = ds.nn
  ds.manual_seed(seed)
  local m = nn.Sequential(nn.Linear(nin, nhidden), nn.GELU(), nn.Linear(nhidden, nout))
  m:eval()
  return m
end

-- fn must raise an error whose message contains every pattern (plain find)
function H.raises(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error")
  err = tostring(err)
  for _, p in ipairs { ... } do
    assert(err:find(p, 1, true), "error '" .. err .. "' lacks '" .. p .. "'")
  end
  return err
end

-- n (a non-negative integer) as a protobuf varint: 7 bits a byte, low first, the high bit set on all but the last
function H.protobuf_varint(n)
  local b = {}
  repeat
    local low = n % 128
    n = math.floor(n / 128)
    b[#b + 1] = string.char(n > 0 and low + 128 or low)
  until n == 0
  return table.concat(b)
end

-- the kernel paths and thread counts a same-bits check runs under, each in a child luajit
H.PATH_ENVS = { "", "DS_ISA=avx2", "DS_ISA=scalar", "OMP_NUM_THREADS=1", "DS_ISA=avx2 OMP_NUM_THREADS=1" }

-- the start of a same_bits_on_every_path script: ds, ffi and wave(phase, shape), a smooth f32 tensor of that shape
-- (sin of a ramp, in [-2, 2]) that every path builds the same
H.WAVE_PRELUDE = [[
      local ds = require("ds")
      local ffi = require("ffi")
      local function wave(phase, shape)
        local n = 1
        for _, d in ipairs(shape) do n = n * d end
        return ds.sin(ds.arange(n, { dtype = "f32" }) * 0.37 + phase):reshape(shape) * 2
      end
]]

-- runs script (Lua source without single quotes; it writes "<kernel path> <hash of its outputs' bytes>") under
-- each of H.PATH_ENVS, checks that every hash equals the first and returns the kernel path each run named
function H.same_bits_on_every_path(script)
  local seen = {}
  for i, env in ipairs(H.PATH_ENVS) do
    local p = io.popen(env .. " LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit -e '" .. script .. "' 2>&1")
    local out = p:read("*a")
    p:close()
    local path, h = out:match("^(%S+) (%d+)$")
    assert(h, out)
    seen[i] = { env = env, path = path, hash = h }
  end
  local paths = {}
  for i, r in ipairs(seen) do
    assert(r.hash == seen[1].hash, string.format("'%s' (%s) differs from '%s' (%s)", r.env, r.path, seen[1].env,
      seen[1].path))
    paths[i] = r.path
  end
  return paths
end

return H
