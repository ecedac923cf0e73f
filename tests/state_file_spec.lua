-- tests/state_file_spec.lua: ds.save_state / ds.load_state (safetensors layout): round trips for every
-- dtype, interchange with an independent reader/writer (tests/safetensors_ref.py), corrupted files.
local ds = require("ds")
local H = require("helpers")
local ffi = require("ffi")
local cjson = require("cjson")

local dir = os.getenv("TMPDIR") or "/tmp"
local function tmp(name) return string.format("%s/ds_state_%s_%s", dir, name, tostring(os.time())) end

local function u64le(n)
  local b = {}
  for i = 1, 8 do b[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(b)
end
-- a file from a header string and a data buffer
local function raw_file(path, header, data) H.write_file(path, u64le(#header) .. header .. (data or "")) end
local function python(cmd)
  -- the reference runs without make test-asan's sanitizer preload (Python is not built for it)
  local p = assert(io.popen("env -u LD_PRELOAD /usr/bin/python3 tests/safetensors_ref.py " .. cmd))
  local out = p:read("*a"); p:close(); return out
end

local function every_dtype()
  return {
    ["a.f32"] = ds.tensor({ { 1.5, -2 }, { 3, 0.25 } }),
    ["a.f64"] = ds.tensor({ 0.1, -1e300, 2.5 }, { dtype = "f64" }),
    ["b.i64"] = ds.tensor({ -(2 ^ 40) - 3, 2 ^ 52 + 1 }, { dtype = "i64" }),
    ["b.i32"] = ds.tensor({ { -7, 0, 2 ^ 31 - 1 } }, { dtype = "i32" }),
    ["c.u8"] = ds.tensor({ 0, 1, 128, 255 }, { dtype = "u8" }),
    ["c.bool"] = ds.tensor({ true, false, true }),
    scalar = ds.tensor(42),
    empty = ds.zeros(0, 3),
  }
end

describe("state files", function()
  it("round-trips every dtype, 0-d and empty tensors, and metadata", function()
    local path = tmp("rt")
    local src = every_dtype()
    ds.save_state(src, path, { note = "hello", format = "pt" })
    local got, meta = ds.load_state(path)
    os.remove(path)
    local n = 0
    for name, t in pairs(src) do
      n = n + 1
      local g = got[name]
      assert.is_not_nil(g, name)
      assert.equal(t.dtype, g.dtype)
      assert.same(t.shape, g.shape)
      assert.is_true(H.bitwise(t, g), name)
    end
    local m = 0
    for _ in pairs(got) do m = m + 1 end
    assert.equal(n, m)
    assert.same({ note = "hello", format = "pt" }, meta)
  end)

  it("saves non-contiguous tensors by value", function()
    local path = tmp("nc")
    local x = ds.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    ds.save_state({ xt = x:t() }, path)
    local got = ds.load_state(path)
    os.remove(path)
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, got.xt:totable())
  end)

  it("writes atomically: no temporary file is left next to the target", function()
    local d = tmp("dir")
    os.execute("mkdir -p " .. d)
    ds.save_state({ w = ds.ones(3) }, d .. "/w.safetensors")
    ds.save_state({ w = ds.zeros(3) }, d .. "/w.safetensors") -- replaces
    local p = io.popen("ls -A " .. d); local listing = p:read("*a"); p:close()
    os.execute("rm -rf " .. d)
    assert.equal("w.safetensors\n", listing)
  end)

  it("a file written by ds reads with an independent reader", function()
    local path = tmp("py")
    ds.save_state(every_dtype(), path, { who = "ds" })
    local out = cjson.decode(python("read " .. path))
    os.remove(path)
    assert.same({ who = "ds" }, out.metadata)
    local t = out.tensors
    assert.same({ "F32", { 2, 2 }, { 1.5, -2, 3, 0.25 } }, { t["a.f32"].dtype, t["a.f32"].shape, t["a.f32"].values })
    assert.same({ "I64", { -(2 ^ 40) - 3, 2 ^ 52 + 1 } }, { t["b.i64"].dtype, t["b.i64"].values })
    assert.same({ "I32", { 1, 3 }, { -7, 0, 2 ^ 31 - 1 } }, { t["b.i32"].dtype, t["b.i32"].shape, t["b.i32"].values })
    assert.same({ "U8", { 0, 1, 128, 255 } }, { t["c.u8"].dtype, t["c.u8"].values })
    assert.same({ "BOOL", { true, false, true } }, { t["c.bool"].dtype, t["c.bool"].values })
    assert.same({ "F64", { 0.1, -1e300, 2.5 } }, { t["a.f64"].dtype, t["a.f64"].values })
    assert.same({ {}, { 42 } }, { t.scalar.shape, t.scalar.values })
    assert.same({ 0, 3 }, t.empty.shape)
  end)

  it("reads a file made by hand in the spec's layout", function()
    local path = tmp("hand")
    python("write " .. path)
    local got, meta = ds.load_state(path)
    os.remove(path)
    assert.same({ made = "by hand" }, meta)
    assert.equal("f32", got["w.f32"].dtype)
    assert.same({ 2, 2 }, got["w.f32"].shape)
    H.close(got["w.f32"], { 1.5, -2.25, 3, 1e-3 })
    assert.same({ 0.1, -1e300, 2.5 }, got["w.f64"]:totable())
    local i64 = ffi.cast("int64_t *", got["i.i64"]:data_ptr())
    assert.equal(-(2 ^ 40) - 3, tonumber(i64[0]))
    assert.equal("9007199254740993LL", tostring(i64[1])) -- 2^53 + 1, exact
    assert.same({ { -7, 0, 2 ^ 31 - 1 } }, got["i.i32"]:totable())
    assert.same({ 0, 1, 128, 255 }, got.u:totable())
    assert.same({ true, false }, got.mask:totable())
    assert.equal(42, got.scalar:item())
    assert.same({}, got.scalar.shape)
    assert.same({ 0, 3 }, got.empty.shape)
  end)

  describe("corrupted files give a clear error naming the file", function()
    local path = tmp("bad")
    after_each(function() os.remove(path) end)
    local good = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'

    it("missing file", function()
      H.raises(function() ds.load_state(path .. ".none") end, path .. ".none", "cannot open")
    end)
    it("shorter than the header length field", function()
      H.write_file(path, "\1\0\0")
      H.raises(function() ds.load_state(path) end, path, "truncated")
    end)
    it("header length beyond the file", function()
      H.write_file(path, u64le(1000) .. good)
      H.raises(function() ds.load_state(path) end, path, "header length 1000 goes beyond the end of the file")
    end)
    it("truncated data", function()
      ds.save_state({ w = ds.ones(100) }, path)
      local s = H.read_file(path)
      H.write_file(path, s:sub(1, #s - 10))
      H.raises(function() ds.load_state(path) end, path, "'w'", "out of range", "truncated")
    end)
    it("bad JSON", function()
      raw_file(path, '{"w":{"dtype":"F32",', string.rep("\0", 8))
      H.raises(function() ds.load_state(path) end, path, "not valid JSON")
    end)
    it("header that is not an object", function()
      raw_file(path, "[1,2]")
      H.raises(function() ds.load_state(path) end, path, "not a JSON object")
    end)
    it("unknown dtype", function()
      raw_file(path, '{"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,4]}}', string.rep("\0", 4))
      H.raises(function() ds.load_state(path) end, path, "unknown dtype 'F8_E4M3'")
    end)
    it("shape and size disagree", function()
      raw_file(path, '{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', string.rep("\0", 8))
      H.raises(function() ds.load_state(path) end, path, "shape [3] of F32 needs 12 bytes", "hold 8")
    end)
    it("overlapping tensors", function()
      raw_file(path, '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
        .. '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', string.rep("\0", 12))
      H.raises(function() ds.load_state(path) end, path, "overlap")
    end)
    it("offsets that end before they begin", function()
      raw_file(path, '{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}', string.rep("\0", 8))
      H.raises(function() ds.load_state(path) end, path, "end before they begin")
    end)
    it("negative or fractional shape entries", function()
      raw_file(path, '{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}')
      H.raises(function() ds.load_state(path) end, path, "shape entry 1")
      raw_file(path, '{"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}}')
      H.raises(function() ds.load_state(path) end, path, "shape entry 1")
    end)
    it("every truncation of a valid file is an error, never a crash", function()
      ds.save_state({ a = ds.ones(3), b = ds.tensor({ 1, 2 }, { dtype = "i64" }) }, path, { k = "v" })
      local s = H.read_file(path)
      for cut = 0, #s - 1 do
        H.write_file(path, s:sub(1, cut))
        local ok, err = pcall(ds.load_state, path)
        assert.is_false(ok)
        assert.truthy(tostring(err):find(path, 1, true))
      end
    end)
  end)

  it("rejects what it cannot save, naming it", function()
    H.raises(function() ds.save_state({ w = 3 }, tmp("x")) end, "'w' is a number, not a tensor")
    H.raises(function() ds.save_state(ds.ones(2), tmp("x")) end, "save_state", "a tensor")
    H.raises(function() ds.save_state({ w = ds.ones(2) }, "/nonexistent_dir/w.safetensors") end,
      "/nonexistent_dir/w.safetensors", "cannot write")
  end)
end)
