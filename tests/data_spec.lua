-- tests/data_spec.lua: ds.data: IDX files (tests/make_idx_fixtures.py), Fashion-MNIST, TensorDataset, DataLoader.
local ds = require("ds")
local H = require("helpers")
local ffi = require("ffi")

local FIX = "tests/fixtures/"
local dir = os.getenv("TMPDIR") or "/tmp"
local function tmp(name) return string.format("%s/ds_data_%s_%d", dir, name, os.time()) end
-- a plain (uncompressed) IDX u8 file
local function idx_u8(shape, bytes)
  local h = { "\0\0\8", string.char(#shape) }
  for _, d in ipairs(shape) do h[#h + 1] = string.char(math.floor(d / 2 ^ 24) % 256, math.floor(d / 2 ^ 16) % 256, math.floor(d / 256) % 256, d % 256) end
  return table.concat(h) .. bytes
end

describe("IDX files", function()
  it("reads a gzip u8 file", function()
    local t = ds.data.read_idx(FIX .. "tiny-u8-idx3.gz")
    assert.equal("u8", t.dtype)
    assert.same({ 3, 2, 2 }, t.shape)
    assert.same({ { { 0, 20 }, { 40, 60 } }, { { 80, 100 }, { 120, 140 } }, { { 160, 180 }, { 200, 220 } } }, t:totable())
  end)

  it("reads big-endian i32, f32 and f64 files", function()
    local i = ds.data.read_idx(FIX .. "tiny-i32-idx1.gz")
    assert.equal("i32", i.dtype)
    assert.same({ -1, 0, 70000, 2 ^ 31 - 1 }, i:totable())
    local f = ds.data.read_idx(FIX .. "tiny-f32-idx2.gz")
    assert.equal("f32", f.dtype)
    assert.same({ 2, 3 }, f.shape)
    H.close(f, { 0.5, -1.25, 3, 1e-3, 0, -7.5 }, 1e-7, 0)
    local d = ds.data.read_idx(FIX .. "tiny-f64-idx1.gz")
    assert.same({ 0.1, -2.5e300 }, d:totable())
  end)

  it("reads an uncompressed file", function()
    local path = tmp("plain")
    H.write_file(path, idx_u8({ 2, 3 }, "\1\2\3\4\5\6"))
    local t = ds.data.read_idx(path)
    os.remove(path)
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t:totable())
  end)

  describe("malformed files give an error naming the file", function()
    local path = tmp("bad")
    after_each(function() os.remove(path) end)
    it("missing", function() H.raises(function() ds.data.read_idx(path .. ".none") end, path .. ".none", "cannot open") end)
    it("bad magic", function()
      H.write_file(path, "\1\2\8\1\0\0\0\1x")
      H.raises(function() ds.data.read_idx(path) end, path, "not an IDX file")
    end)
    it("unsupported element type", function()
      H.write_file(path, "\0\0\11\1\0\0\0\1xx")
      H.raises(function() ds.data.read_idx(path) end, path, "unsupported IDX element type 0x0b")
    end)
    it("too many dims", function()
      H.write_file(path, "\0\0\8\9" .. string.rep("\0\0\0\1", 9) .. "x")
      H.raises(function() ds.data.read_idx(path) end, path, "9 dims")
    end)
    it("truncated data", function()
      H.write_file(path, idx_u8({ 2, 3 }, "\1\2\3\4"))
      H.raises(function() ds.data.read_idx(path) end, path, "truncated: 4 of 6 data bytes")
    end)
    it("trailing bytes", function()
      H.write_file(path, idx_u8({ 2 }, "\1\2\3"))
      H.raises(function() ds.data.read_idx(path) end, path, "trailing bytes")
    end)
    it("every truncation or corruption of a gzip file is an error, never a crash", function()
      local s = H.read_file(FIX .. "tiny-f32-idx2.gz")
      for cut = 1, #s - 1 do
        H.write_file(path, s:sub(1, cut))
        local ok, err = pcall(ds.data.read_idx, path)
        assert.is_false(ok, "cut at " .. cut)
        assert.truthy(tostring(err):find(path, 1, true))
      end
      for i = 11, #s - 8 do -- flip each byte of the deflate stream
        H.write_file(path, s:sub(1, i - 1) .. string.char((s:byte(i) + 128) % 256) .. s:sub(i + 1))
        local ok, t = pcall(ds.data.read_idx, path)
        assert.truthy(not ok or ds.is_tensor(t))
      end
    end)
  end)
end)

describe("Fashion-MNIST", function()
  it("loads the train split: u8 (60000,28,28), i64 labels in 1..10", function()
    local d = ds.data.fashion_mnist { split = "train" }
    assert.equal("u8", d.images.dtype)
    assert.same({ 60000, 28, 28 }, d.images.shape)
    assert.equal("i64", d.labels.dtype)
    assert.same({ 60000 }, d.labels.shape)
    -- the first records (the first image is an ankle boot, class 10)
    assert.same({ 10, 1, 1, 4, 1, 3, 8, 3, 6, 6 }, d.labels:narrow(1, 1, 10):totable())
    assert.equal("Ankle boot", d.classes[10])
    local p = ffi.cast("int64_t *", d.labels:data_ptr())
    local counts = {}
    for i = 0, 59999 do local c = tonumber(p[i]); counts[c] = (counts[c] or 0) + 1 end
    for c = 1, 10 do assert.equal(6000, counts[c]) end -- balanced, nothing outside 1..10
    assert.equal(60000 * 28 * 28, d.images:numel())
    assert.equal(60000, d:len())
  end)

  it("loads the test split", function()
    local d = ds.data.fashion_mnist { split = "test" }
    assert.same({ 10000, 28, 28 }, d.images.shape)
    assert.same({ 10, 3, 2, 2, 7 }, d.labels:narrow(1, 1, 5):totable())
  end)

  it("names the Debian package when the files are missing", function()
    H.raises(function() ds.data.fashion_mnist { split = "train", root = "/nonexistent" } end,
      "/nonexistent/train-images-idx3-ubyte.gz", "dataset-fashion-mnist")
    H.raises(function() ds.data.fashion_mnist { split = "valid" } end, "split")
  end)
end)

describe("DataLoader", function()
  -- x row i = {i, -i} (f32), y = i (i64)
  local N = 10
  local function dataset()
    local x, y = {}, {}
    for i = 1, N do x[i] = { i, -i }; y[i] = i end
    return ds.data.TensorDataset(ds.tensor(x), ds.tensor(y, { dtype = "i64" }))
  end
  local function epoch_labels(loader, f)
    local seen, sizes = {}, {}
    for x, y in loader:iter() do
      sizes[#sizes + 1] = y:size(1)
      for _, v in ipairs(y:totable()) do seen[#seen + 1] = v end
      if f then f(x, y) end
    end
    return seen, sizes
  end

  it("batches in order, with a short last batch", function()
    local loader = ds.data.DataLoader(dataset(), { batch_size = 4 })
    assert.equal(3, loader:len())
    local seen, sizes = epoch_labels(loader, function(x, y)
      assert.equal("f32", x.dtype)
      assert.same({ y:size(1), 2 }, x.shape)
      for k, v in ipairs(y:totable()) do assert.same({ v, -v }, x[k]:totable()) end
    end)
    assert.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, seen)
    assert.same({ 4, 4, 2 }, sizes)
  end)

  it("drop_last drops the short batch", function()
    local loader = ds.data.DataLoader(dataset(), { batch_size = 4, drop_last = true })
    assert.equal(2, loader:len())
    local seen, sizes = epoch_labels(loader)
    assert.same({ 4, 4 }, sizes)
    assert.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, seen)
  end)

  it("shuffles deterministically from a seed, differently each pass, keeping rows together", function()
    local a = ds.data.DataLoader(dataset(), { batch_size = 3, shuffle = true, seed = 7 })
    local b = ds.data.DataLoader(dataset(), { batch_size = 3, shuffle = true, seed = 7 })
    local check = function(x, y)
      for k, v in ipairs(y:totable()) do assert.same({ v, -v }, x[k]:totable()) end
    end
    local a1, a2 = epoch_labels(a, check), epoch_labels(a, check)
    local b1, b2 = epoch_labels(b), epoch_labels(b)
    assert.same(a1, b1)
    assert.same(a2, b2)
    assert.are_not.same(a1, a2)
    assert.are_not.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, a1)
    local sorted = { unpack(a1) }
    table.sort(sorted)
    assert.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, sorted)
    local c1 = epoch_labels(ds.data.DataLoader(dataset(), { batch_size = 3, shuffle = true, seed = 8 }))
    assert.are_not.same(a1, c1)
  end)

  it("without a seed, follows ds.manual_seed", function()
    ds.manual_seed(22)
    local a = epoch_labels(ds.data.DataLoader(dataset(), { batch_size = 5, shuffle = true }))
    ds.manual_seed(22)
    local b = epoch_labels(ds.data.DataLoader(dataset(), { batch_size = 5, shuffle = true }))
    assert.same(a, b)
    assert.are_not.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, a)
  end)

  it("applies the transform to whole batches; batches() gives the batch number", function()
    local loader = ds.data.DataLoader(dataset(), {
      batch_size = 4, transform = function(x, y) return x * 2, y - 1 end })
    local count = 0
    for i, x, y in loader:batches() do
      count = count + 1
      assert.equal(count, i)
      for k, v in ipairs(y:totable()) do assert.same({ 2 * (v + 1), -2 * (v + 1) }, x[k]:totable()) end
    end
    assert.equal(3, count)
  end)

  it("takes a list of tensors and multi-dim rows", function()
    local imgs = ds.arange(0, 24, { dtype = "f32" }):reshape(4, 2, 3)
    local loader = ds.data.DataLoader({ imgs }, { batch_size = 2, shuffle = true, seed = 1 })
    local total = 0
    for x in loader:iter() do
      assert.same({ 2, 2, 3 }, x.shape)
      for k = 1, 2 do
        local first = x[k][1][1]:item()
        assert.equal(0, first % 6)
        H.close(x[k], imgs[first / 6 + 1])
        total = total + first
      end
    end
    assert.equal(0 + 6 + 12 + 18, total)
  end)

  it("rejects bad arguments clearly", function()
    H.raises(function() ds.data.DataLoader(dataset(), { batch_size = 0 }) end, "batch_size")
    H.raises(function() ds.data.DataLoader(dataset(), { batchsize = 4 }) end, "unknown option 'batchsize'")
    H.raises(function() ds.data.DataLoader(dataset(), { seed = -1 }) end, "seed")
    H.raises(function() ds.data.TensorDataset(ds.zeros(3), ds.zeros(4)) end, "disagree", "(3)", "(4)")
    H.raises(function() dataset():get(11) end, "out of range")
  end)
end)
