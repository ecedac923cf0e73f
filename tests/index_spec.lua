-- tests/index_spec.lua: cat, stack, gather, scatter_add, index_select, index_add, masked_fill, one_hot,
-- embedding: forward and gradients against PyTorch (tests/fixtures/index.json), views, errors.
local ds = require("ds")
local H = require("helpers")
local cjson = require("cjson")


-- a fixture tensor {shape, dtype, data (flat)} as a ds tensor
local function T(e)
  local flat = ds.tensor(#e.data > 0 and e.data or { 0 }, { dtype = e.dtype })
  if #e.data == 0 then flat = flat:narrow(1, 1, 0) end
  return flat:reshape(e.shape)
end

local function check(got, e, tol)
  assert.equal(e.dtype, got.dtype)
  assert.same(e.shape, got.shape)
  H.close(got, e.data, tol or 0, tol or 0)
end

local function leaf(e) return T(e):requires_grad_() end
local function opt(v) return v ~= cjson.null and v or nil end

-- run fn on the case's inputs; compare output and (when the fixture has them) gradients
local runners = {
  cat = function(c)
    local xs = {}
    for i, e in ipairs(c.inputs) do xs[i] = c.grads and leaf(e) or T(e) end
    return ds.cat(xs, c.dim), xs
  end,
  stack = function(c)
    local xs = {}
    for i, e in ipairs(c.inputs) do xs[i] = leaf(e) end
    return ds.stack(xs, c.dim), xs
  end,
  gather = function(c)
    local x = c.grads and leaf(c.x) or T(c.x)
    return x:gather(c.dim, T(c.index)), { x }
  end,
  scatter_add = function(c)
    local x, src = c.grads and leaf(c.x) or T(c.x), c.grads and leaf(c.src) or T(c.src)
    return ds.scatter_add(x, c.dim, T(c.index), src), { x, src }
  end,
  index_select = function(c)
    local x = c.grads and leaf(c.x) or T(c.x)
    return x:index_select(c.dim, T(c.index)), { x }
  end,
  index_add = function(c)
    local x, src = leaf(c.x), leaf(c.src)
    return ds.index_add(x, c.dim, T(c.index), src), { x, src }
  end,
  masked_fill = function(c)
    local x = c.grads and leaf(c.x) or T(c.x)
    return x:masked_fill(T(c.mask), c.value), { x }
  end,
  one_hot = function(c)
    return ds.one_hot(T(c.labels), opt(c.num_classes)), {}
  end,
  embedding = function(c)
    local w = leaf(c.weight)
    local pad = opt(c.padding_idx)
    return pad and ds.embedding(T(c.ids), w, { padding_idx = pad }) or ds.embedding(T(c.ids), w), { w }
  end,
}

describe("index ops against PyTorch", function()
  for i, c in ipairs(H.fixture("index.json").cases) do
    local shape = c.out.shape
    it(string.format("%d: %s -> %s %s", i, c.op, c.out.dtype, cjson.encode(shape)), function()
      local y, xs = runners[c.op](c)
      local tol = (c.op == "scatter_add" or c.op == "index_add") and 1e-6 or 0
      check(y, c.out, tol)
      if c.grads then
        y:backward(T(c.gy))
        for k, g in ipairs(c.grads) do check(xs[k].grad, g, 1e-12) end
      end
    end)
  end
end)

describe("index ops on views and odd shapes", function()
  local x = ds.arange(24, { dtype = "f64" }):reshape(2, 3, 4)
  local xt = x:transpose(1, 3)            -- (4,3,2), non-contiguous
  local xc = xt:contiguous()
  it("cat and stack read strided inputs", function()
    assert.is_false(xt:is_contiguous())
    assert.is_true(H.bitwise(ds.cat({ xt, xt }, 2), ds.cat({ xc, xc }, 2)))
    assert.is_true(H.bitwise(ds.stack({ xt, xc }, 4), ds.stack({ xc, xc }, 4)))
  end)
  it("gather, index_select, embedding read strided inputs and indices", function()
    local ix = ds.tensor({ { 2, 1, 3, 3 }, { 1, 1, 2, 3 } }, { dtype = "i64" }):t() -- (4,2) strided
    local v = xt:select(3, 1)                                                         -- (4,3) strided
    assert.is_true(H.bitwise(v:gather(2, ix), v:contiguous():gather(2, ix:contiguous())))
    local sel = ds.tensor({ 3, 1, 3 }, { dtype = "i64" })
    assert.is_true(H.bitwise(xt:index_select(2, sel), xc:index_select(2, sel)))
    local w = ds.arange(12, { dtype = "f32" }):reshape(3, 4)
    assert.is_true(H.bitwise(ds.embedding(ix, w:t():contiguous():t()), ds.embedding(ix:contiguous(), w)))
    assert.same({ 4, 2, 4 }, ds.embedding(ix, w).shape)
  end)
  it("scatter_add and index_add write into strided inputs", function()
    local base = ds.zeros(3, 4, { dtype = "f64" }):t()                                -- (4,3) strided
    local ix = ds.tensor({ { 1, 3, 3 }, { 2, 2, 1 } }, { dtype = "i64" })
    local src = ds.ones(2, 3, { dtype = "f64" })
    local want = ds.scatter_add(base:contiguous(), 1, ix, src)
    assert.is_true(H.bitwise(ds.scatter_add(base, 1, ix, src), want))
    local s2 = ds.ones(4, 2, { dtype = "f64" })
    local i2 = ds.tensor({ 3, 3 }, { dtype = "i64" })
    assert.same({ { 0, 0, 2 }, { 0, 0, 2 }, { 0, 0, 2 }, { 0, 0, 2 } }, ds.index_add(base, 2, i2, s2):totable())
  end)
  it("scatter_add_ and index_add_ accumulate in place, also into strided tensors", function()
    local x = ds.zeros(3, 2)
    local xt = x:t()                                                                -- (2,3) view of x
    assert.equal(xt, xt:index_add_(2, ds.tensor({ 3, 3 }, { dtype = "i64" }), ds.ones(2, 2)))
    assert.same({ { 0, 0 }, { 0, 0 }, { 2, 2 } }, x:totable())
    assert.equal(x, x:scatter_add_(1, ds.tensor({ { 1, 1 }, { 1, 2 } }, { dtype = "i64" }), ds.ones(2, 2)))
    assert.same({ { 2, 1 }, { 0, 1 }, { 2, 2 } }, x:totable())
    H.raises(function() ds.zeros(2, { dtype = "i64" }):index_add_(1, ds.tensor({ 1 }, { dtype = "i64" }), ds.ones(1)) end,
      "index_add_", "f32", "i64")
  end)
  it("masked_fill_ writes in place; i32 indices are widened", function()
    local a = ds.zeros(2, 2)
    a:masked_fill_(ds.tensor({ true, false }), 3)
    assert.same({ { 3, 0 }, { 3, 0 } }, a:totable())
    local i32 = ds.tensor({ 2, 1 }, { dtype = "i32" })
    assert.same({ { 0, 3 }, { 0, 3 } }, a:index_select(2, i32):totable())
  end)
  it("one_hot gives f32 on request and cat promotes dtypes", function()
    local oh = ds.one_hot(ds.tensor({ 2, 1 }, { dtype = "i64" }), 3, { dtype = "f32" })
    assert.equal("f32", oh.dtype)
    assert.same({ { 0, 1, 0 }, { 1, 0, 0 } }, oh:totable())
    assert.equal("f64", ds.cat({ ds.zeros(1), ds.zeros(1, { dtype = "f64" }) }).dtype)
  end)
  it("movement backward (narrow, select) uses cat", function()
    local a = ds.tensor({ 1, 2, 3, 4 }, { dtype = "f64" }):requires_grad_()
    a:narrow(1, 2, 2):backward(ds.tensor({ 5, 6 }, { dtype = "f64" }))
    assert.same({ 0, 5, 6, 0 }, a.grad:totable())
    local b = ds.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "f64" }):requires_grad_()
    b:select(2, 2):backward(ds.tensor({ 7, 8 }, { dtype = "f64" }))
    assert.same({ { 0, 7 }, { 0, 8 } }, b.grad:totable())
  end)
  it("second derivative through gather (backward of scatter_add is gather)", function()
    local a = ds.tensor({ 1, 2, 3 }, { dtype = "f64" }):requires_grad_()
    local ix = ds.tensor({ 3, 3, 1 }, { dtype = "i64" })
    local y = a:gather(1, ix) * a:gather(1, ix)                                   -- a3^2, a3^2, a1^2
    local g = ds.grad(y, { a }, { grad_outputs = ds.ones(3, { dtype = "f64" }), create_graph = true })[1]
    assert.same({ 2, 0, 12 }, g:totable())
    local gg = ds.grad(g, { a }, { grad_outputs = ds.ones(3, { dtype = "f64" }) })[1]
    assert.same({ 2, 0, 4 }, gg:totable())
  end)
end)

describe("index ops on random shapes against naive Lua loops", function()
  -- nested-table access and an odometer over a shape
  local function at(t, ix) for _, i in ipairs(ix) do t = t[i] end; return t end
  local function each(shape, fn)
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    local ix = {}
    for d = 1, #shape do ix[d] = 1 end
    for _ = 1, n do
      fn(ix)
      for d = #shape, 1, -1 do
        ix[d] = ix[d] + 1
        if ix[d] <= shape[d] then break end
        ix[d] = 1
      end
    end
  end
  local seed = 12345
  local function rand(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
  local function random_case()
    local nd = rand(3)
    local shape = {}
    for d = 1, nd do shape[d] = rand(4) end
    local x = ds.randn(shape, { dtype = "f64" })
    if nd >= 2 and rand(2) == 1 then x = x:transpose(1, nd):contiguous():transpose(1, nd) end -- strided
    return x, shape, nd, rand(nd)
  end
  it("gather and scatter_add", function()
    for _ = 1, 40 do
      local x, shape, nd, dim = random_case()
      local ishape = {}
      for d = 1, nd do ishape[d] = d == dim and rand(5) or rand(shape[d]) end
      local flat = {}
      each(ishape, function() flat[#flat + 1] = rand(shape[dim]) end)
      local ix = ds.tensor(flat, { dtype = "i64" }):reshape(ishape)
      local y, xt, it_ = x:gather(dim, ix):totable(), x:totable(), ix:totable()
      local src = ds.randn(ishape, { dtype = "f64" })
      local s, st = ds.scatter_add(x, dim, ix, src):totable(), src:totable()
      local want = x:totable()
      each(ishape, function(p)
        local q = {}
        for d = 1, nd do q[d] = p[d] end
        q[dim] = at(it_, p)
        assert.equal(at(xt, q), at(y, p))
        local row = want
        for d = 1, nd - 1 do row = row[q[d]] end
        row[q[nd]] = row[q[nd]] + at(st, p)
      end)
      H.close(ds.tensor(s), ds.tensor(want), 1e-12, 1e-12)
    end
  end)
  it("index_select and index_add", function()
    for _ = 1, 40 do
      local x, shape, nd, dim = random_case()
      local m = rand(5) - 1
      local flat = {}
      for k = 1, m do flat[k] = rand(shape[dim]) end
      local ix = m > 0 and ds.tensor(flat, { dtype = "i64" }) or ds.tensor({ 1 }, { dtype = "i64" }):narrow(1, 1, 0)
      local y = x:index_select(dim, ix)
      local oshape = x.shape
      oshape[dim] = m
      assert.same(oshape, y.shape)
      local yt, xt = y:totable(), x:totable()
      each(oshape, function(p)
        local q = {}
        for d = 1, nd do q[d] = p[d] end
        q[dim] = flat[p[dim]]
        assert.equal(at(xt, q), at(yt, p))
      end)
      local back = ds.index_add(ds.zeros_like(x), dim, ix, y)
      local counts = ds.zeros(shape[dim], { dtype = "f64" })
      for k = 1, m do counts[flat[k]] = counts[flat[k]]:item() + 1 end
      local cshape = {}
      for d = 1, nd do cshape[d] = d == dim and shape[d] or 1 end
      H.close(back, x * counts:reshape(cshape), 1e-12, 1e-12)
    end
  end)
end)

describe("index ops traced, compiled, saved", function()
  local i64 = function(t) return ds.tensor(t, { dtype = "i64" }) end
  it("cat along a symbolic dim gives a symbolic size", function()
    local g = ds.trace(function(x, y) return ds.cat({ x, y }, 1) end,
      { ds.spec({ "n", 3 }, "f32", "x"), ds.spec({ 2, 3 }, "f32", "y") })
    assert.matches("(n+2,3)", tostring(g), 1, true)
    for _, n in ipairs { 1, 4 } do
      local x, y = ds.randn(n, 3), ds.randn(2, 3)
      assert.is_true(H.bitwise(g(x, y), ds.cat({ x, y }, 1)))
    end
  end)
  it("compiled graphs equal eager bitwise and check indices in C", function()
    local w = ds.randn(10, 4)
    local function fn(x, ix, ids, m)
      local a = ds.cat({ x:gather(2, ix), x }, 2):index_select(1, i64({ 2, 1 }))
      local e = ds.embedding(ids, w)
      return ds.stack({ a:masked_fill(m, 0), a }, 1), e, ds.one_hot(ids, 10, { dtype = "f32" })
    end
    local f = ds.compile(fn)
    local x, ix, ids, m = ds.randn(2, 3), i64({ { 3 }, { 1 } }), i64({ { 1, 10 }, { 3, 3 } }), ds.tensor({ true, false, true, false })
    local got, want = { f(x, ix, ids, m) }, { fn(x, ix, ids, m) }
    for k = 1, 3 do assert.is_true(H.bitwise(got[k], want[k]), "output " .. k) end
    H.raises(function() f(x, i64({ { 4 }, { 1 } }), ids, m) end, "gather", "index 4", "size 3")
    H.raises(function() f(x, ix, i64({ { 11, 1 }, { 1, 1 } }), m) end, "embedding", "id 11")
  end)
  it("a saved graph with cat and gather loads and runs", function()
    local cg = ds.compile(function(x, ix) return ds.cat({ x, x:gather(1, ix) }, 1) end,
      { ds.spec({ 2, 3 }, "f64", "x"), ds.spec({ 1, 3 }, "i64", "ix") })
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    ds.save(cg, dir .. "/catgather")
    local m = ds.load(dir .. "/catgather")
    local x, ix = ds.randn(2, 3, { dtype = "f64" }), i64({ { 2, 1, 2 } })
    assert.is_true(H.bitwise(m(x, ix), ds.cat({ x, x:gather(1, ix) }, 1)))
    os.execute("rm -rf " .. dir)
  end)
end)

describe("index op errors", function()
  local x = ds.zeros(2, 3)
  local i64 = function(t) return ds.tensor(t, { dtype = "i64" }) end
  it("out-of-range indices name the op, the index and the size", function()
    H.raises(function() x:gather(2, i64({ { 4 }, { 1 } })) end, "gather", "index 4", "size 3")
    H.raises(function() x:gather(1, i64({ { 0, 1, 1 } })) end, "gather", "index 0", "size 2")
    H.raises(function() x:index_select(1, i64({ 1, 3 })) end, "index_select", "index 3", "size 2")
    H.raises(function() ds.index_add(x, 2, i64({ 9 }), ds.zeros(2, 1)) end, "index_add", "index 9", "size 3")
    H.raises(function() ds.scatter_add(x, 1, i64({ { -1 } }), ds.zeros(1, 1)) end, "scatter_add", "index -1", "size 2")
    H.raises(function() ds.embedding(i64({ 1, 5 }), ds.zeros(4, 2)) end, "embedding", "id 5", "4 embeddings")
    H.raises(function() ds.one_hot(i64({ 1, 5 }), 3) end, "one_hot", "class 5", "3 classes")
    H.raises(function() ds.one_hot(i64({ 0 }), 3) end, "one_hot", "class 0")
  end)
  it("shape mismatches name the shapes", function()
    H.raises(function() ds.cat({ x, ds.zeros(3, 2) }, 1) end, "cat", "(3,2)", "(2,3)")
    H.raises(function() ds.cat({ x, ds.zeros(3) }, 1) end, "cat", "(3)", "(2,3)")
    H.raises(function() ds.stack({ x, ds.zeros(3, 2) }) end, "stack", "(3,2)", "(2,3)")
    H.raises(function() x:gather(1, i64({ 1, 2 })) end, "gather", "(2,3)", "(2)")
    H.raises(function() x:gather(2, i64({ { 1 }, { 1 }, { 1 } })) end, "gather", "(3,1)", "(2,3)")
    H.raises(function() ds.scatter_add(x, 1, i64({ { 1, 1 } }), ds.zeros(1, 1)) end, "scatter_add", "(1,1)", "(1,2)")
    H.raises(function() ds.index_add(x, 1, i64({ 1 }), ds.zeros(2, 3)) end, "index_add", "(2,3)", "(1,3)")
    H.raises(function() x:index_select(1, i64({ { 1 } })) end, "index_select", "0-d or 1-D", "(1,1)")
    H.raises(function() x:masked_fill(ds.tensor({ true, false }), 0) end, "masked_fill", "(2)", "(2,3)")
    H.raises(function() ds.embedding(i64({ 1 }), ds.zeros(4)) end, "embedding", "2-D", "(4)")
  end)
  it("wrong dtypes and bad dims are refused", function()
    H.raises(function() x:gather(1, ds.zeros(1, 3)) end, "gather", "integer", "f32")
    H.raises(function() x:index_select(1, ds.tensor({ true })) end, "index_select", "integer", "bool")
    H.raises(function() x:masked_fill(ds.ones(2, 3), 0) end, "masked_fill", "bool", "f32")
    H.raises(function() ds.one_hot(ds.tensor({ 1.5 }), 3) end, "one_hot", "integer", "f32")
    H.raises(function() ds.one_hot(i64({ 1 }), 3, { dtype = "bool" }) end, "one_hot", "dtype")
    H.raises(function() ds.scatter_add(ds.zeros(2, { dtype = "bool" }), 1, i64({ 1 }), ds.zeros(1, { dtype = "bool" })) end,
      "scatter_add", "dtype bool not supported")
    H.raises(function() ds.cat({ x, x }, 3) end, "cat", "dim 3 out of range")
    H.raises(function() x:gather(-3, i64({ { 1 } })) end, "gather", "dim -3 out of range")
    H.raises(function() ds.stack({ x }, 4) end, "stack", "dim 4 out of range")
    H.raises(function() ds.cat({}, 1) end, "cat", "non-empty")
    H.raises(function() ds.cat(x, 1) end, "cat", "list")
    H.raises(function() ds.cat({ ds.tensor(1) }, 1) end, "cat", "0-d")
    H.raises(function() ds.embedding(i64({ 1 }), ds.zeros(4, 2), { padding_idx = 5 }) end, "padding_idx 5")
  end)
  it("the C kernels refuse bad operands on their own", function()
    local D = require("ds.dispatch")
    local ffi = require("ffi")
    local k = D.kernel(D.by_name.gather, "f32")
    local out, ix = ds.zeros(1, 1), i64({ { 1 } })
    local tb = ffi.new("ds_tensor*[3]", { out._c, x._c, ix._c })
    assert.equal(0, k(tb, ffi.new("double[1]", { 0 })))
    assert.is_true(k(tb, ffi.new("double[1]", { 2 })) ~= 0)                        -- dim 3 of a 2-d tensor
    assert.matches("out of range", ffi.string(require("ds.ffi").C.ds_last_error()))
    tb[2] = ds.zeros(1, 1)._c                                                       -- f32 index
    assert.is_true(k(tb, ffi.new("double[1]", { 0 })) ~= 0)
    assert.matches("i64", ffi.string(require("ds.ffi").C.ds_last_error()))
    local kc = D.kernel(D.by_name.cat, "f32")
    local tc = ffi.new("ds_tensor*[3]", { ds.zeros(3, 3)._c, x._c, x._c })           -- 2 + 2 ~= 3 rows
    assert.is_true(kc(tc, ffi.new("double[2]", { 0, 2 })) ~= 0)
    assert.matches("add up to 4", ffi.string(require("ds.ffi").C.ds_last_error()))
  end)
end)
