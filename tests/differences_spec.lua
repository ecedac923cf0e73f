-- tests/differences_spec.lua: docs/differences.md checked against the code. Each claim below quotes the line it
-- checks (the quote must still be in the document, whitespace aside) and runs what the line says: an option it
-- says is refused is refused, a call it says is missing is missing, a behaviour it describes happens. A line
-- that goes stale (the code changed, or the line was edited) fails here. Every `ds.*` name the document writes
-- must exist.
local ds = require("ds")
local H = require("helpers")
local help = require("ds.help")

local F, nn = ds.F, ds.nn

-- the document with its whitespace runs made single spaces
local function squash(s) return (s:gsub("%s+", " ")) end
local doc = squash(H.read_file("docs/differences.md"))

local function i64(v) return ds.tensor(v, { dtype = "i64" }) end
local function fails(f, ...)
  local ok, err = pcall(f)
  assert(not ok, "expected an error")
  for _, want in ipairs { ... } do assert(tostring(err):find(want, 1, true), tostring(err) .. " lacks " .. want) end
end
local function works(f) local ok, err = pcall(f); assert(ok, tostring(err)) end
local function traced(f, inputs) return function() return ds.trace(f, inputs) end end

-- { quote from the document, check }
local CLAIMS = {
  { "Lua's `<` and `==` must give a boolean, so `<` on tensors is an error and `==` compares identity", function()
    local x = ds.ones(2)
    fails(function() return x < x end)
    assert.is_false(x == ds.ones(2))
  end },
  { "`torch.equal` is `ds.equal`", function() assert.is_true(ds.equal(ds.ones(2), ds.ones(2))) end },
  { "ds has no slice keys (`x[{{1, 2}}]` is an error", function()
    fails(function() return ds.ones(3)[{ { 1, 2 } }] end)
  end },
  { "`#x` is 0", function() assert.equal(0, #ds.ones(3)) end },
  { "`x:repeat_tensor(...)`", function() assert.same({ 2, 2 }, ds.ones(1, 2):repeat_tensor(2, 1).shape) end },
  { "`x.mT` and `x.T` are fields", function() assert.same({ 3, 2 }, ds.ones(2, 3).mT.shape) end },
  { "`reduce` only takes `\"add\"` (`\"multiply\"` is an error)", function()
    fails(function() return ds.ones(2, 2):scatter(2, i64({ { 1 }, { 2 } }), ds.ones(2, 1), { reduce = "multiply" }) end,
      "multiply")
  end },
  { "**einsum**: up to 4 operands (more are an error); `...` and repeated letters (diagonals) as PyTorch", function()
    local o = ds.ones(2)
    fails(function() return ds.einsum("a,a,a,a,a->", o, o, o, o, o) end, "einsum")
    assert.equal(5, ds.einsum("ii->", ds.tensor({ { 1, 2 }, { 3, 4 } })):item())
    assert.same({ 2 }, ds.einsum("...i->...", ds.ones(2, 3)).shape)
  end },
  { "**norm**: `p` is a number, `math.huge`/`-math.huge` or `'fro'`; `'nuc'` is not implemented", function()
    fails(function() return ds.ones(2, 2):norm("nuc") end, "nuc")
    works(function() return ds.ones(2, 2):norm("fro") end)
  end },
  { "`matrix_norm`/`norm` with `ord = 2`, `-2` or `'nuc'` are errors", function()
    for _, ord in ipairs { 2, -2, "nuc" } do fails(function() return ds.linalg.matrix_norm(ds.ones(2, 2), ord) end) end
  end },
  { "svd, eig(h), qr, lstsq, pinv do not exist", function()
    for _, n in ipairs { "svd", "eig", "eigh", "qr", "lstsq", "pinv" } do
      assert(ds.linalg[n] == nil, "ds.linalg." .. n .. " exists now")
    end
  end },
  { "a matrix that is not positive-definite is an error eagerly", function()
    fails(function() return ds.linalg.cholesky(-ds.eye(2, 2)) end, "not positive-definite")
  end },
  { "bool matmul is an error", function()
    local b = ds.ones(2, 2):gt(0)
    fails(function() return b:matmul(b) end, "matmul")
  end },
  { "`mean`/`var`/`std` of integers are errors", function()
    for _, f in ipairs { "mean", "var", "std" } do fails(function() return i64({ 1, 2 })[f](i64({ 1, 2 })) end, f) end
  end },
  { "`floor_divide` of floats is PyTorch's (Python's //), but its in-place form `floor_divide_` takes integers only",
    function()
      assert.equal(-4, ds.floor_divide(ds.tensor({ -7.5 }), 2):item())
      fails(function() return ds.tensor({ 7.5 }):floor_divide_(2) end, "floor_divide")
    end },
  { "**interpolate** has PyTorch's modes and `recompute_scale_factor` but no `antialias`", function()
    local x = ds.ones(1, 1, 2, 2)
    for _, m in ipairs { "bicubic", "area", "nearest-exact" } do
      works(function() return F.interpolate(x, { size = { 4, 4 }, mode = m }) end)
    end
    works(function() return F.interpolate(x, { scale_factor = 1.5, recompute_scale_factor = true }) end)
    fails(function() return F.interpolate(x, { size = { 4, 4 }, antialias = true }) end, "antialias")
    works(function() return F.interpolate(ds.ones(1, 1, 2, 2, 2), { size = { 4, 4, 4 }, mode = "trilinear" }) end)
  end },
  { "**instance_norm** has no running statistics", function()
    fails(function() return F.instance_norm(ds.ones(1, 2, 4), { running_mean = ds.zeros(2) }) end, "running_mean")
  end },
  { "**embedding_bag** has modes sum and mean (not max), 1-based `offsets` and no `include_last_offset` or "
    .. "`padding_idx`",
    function()
      local ids, w, off = i64({ 1, 2 }), ds.ones(3, 2), i64({ 1 })
      for _, o in ipairs { { mode = "max" }, { include_last_offset = true }, { padding_idx = 1 } } do
        o.offsets = off
        fails(function() return F.embedding_bag(ids, w, o) end, "embedding_bag")
      end
      works(function() return F.embedding_bag(ids, w, { offsets = off, mode = "sum" }) end)
    end },
  { "**F.one_hot** without `num_classes` reads the labels' values: eager only", function()
    fails(traced(function(l) return F.one_hot(l) end, { i64({ 1, 2 }) }), "one_hot")
    works(traced(function(l) return F.one_hot(l, 3) end, { i64({ 1, 2 }) }))
  end },
  { "**Eager only**: `nonzero`, `argwhere`, one-argument `where`, `masked_select`, `unique`, `tensor_split` with a "
    .. "tensor of indices and `repeat_interleave` with a tensor of repeats (shapes depend on values) refuse to trace",
    function()
      local x = ds.ones(4)
      for name, f in pairs {
        nonzero = function(a) return ds.nonzero(a) end, argwhere = function(a) return ds.argwhere(a) end,
        where = function(a) return ds.where(a:gt(0))[1] end,
        masked_select = function(a) return a:masked_select(a:gt(0)) end,
        unique = function(a) return ds.unique(a) end,
        tensor_split = function(a, i) return ds.tensor_split(a, i)[1] end,
        repeat_interleave = function(a, i) return a:repeat_interleave(i) end,
      } do
        -- (the error names the op that refuses: argwhere and where are built on nonzero)
        local by = ({ argwhere = "nonzero", where = "nonzero", tensor_split = "" })[name] or name
        fails(traced(f, { x, i64({ 1, 2, 1, 1 }) }), by)
      end
    end },
  { "PyTorch's deprecated `size_average` and `reduce` are refused (give `reduction`), `inplace = true` is refused",
    function()
      fails(function() return nn.MSELoss({ size_average = true }) end, "size_average")
      fails(function() return nn.MSELoss({ reduce = true }) end, "reduce")
      fails(function() return nn.ReLU({ inplace = true }) end, "inplace")
    end },
  { "**return_indices** of the max pools: `max_pool2d` only, without `dilation` or `ceil_mode` (the 1-D and 3-D "
    .. "pools take none); `cdist` always computes the distances directly (`compute_mode` is accepted and ignored",
    function()
      fails(function() return F.max_pool1d(ds.ones(1, 2, 6), 2, { return_indices = true }) end, "return_indices")
      fails(function() return F.max_pool3d(ds.ones(1, 1, 2, 2, 2), 2, { return_indices = true }) end, "return_indices")
      fails(function() return F.max_pool2d(ds.ones(1, 1, 6, 6), 2, { dilation = 2, return_indices = true }) end,
        "return_indices")
      fails(function() return F.max_pool2d(ds.ones(1, 1, 5, 5), 2, { ceil_mode = true, return_indices = true }) end,
        "return_indices")
      works(function() return F.max_pool2d(ds.ones(1, 1, 4, 4), 2, { return_indices = true }) end)
      works(function()
        return ds.cdist(ds.ones(2, 3), ds.ones(4, 3), 2, { compute_mode = "use_mm_for_euclid_dist" })
      end)
    end },
  { "**ds.save** of a predictor traced in train mode with dropout or batch-norm-training sites is an error unless "
    .. "given "
    .. "`{allow_train_mode = true}`", function()
      local m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
      m:train()
      local c = ds.compile(m, { ds.spec({ 1, 2 }) })
      local dir = H.tmp_dir()
      fails(function() ds.save(c, dir .. "/m") end, "train mode")
      works(function() ds.save(c, dir .. "/m", { allow_train_mode = true }) end)
    end },
  { "a grad of another dtype is an error naming both", function()
    local a = ds.ones(3):requires_grad_()
    fails(function() (a * a):backward(ds.ones(3, { dtype = "f64" })) end, "f64", "f32")
  end },
  { "A second `backward` through a graph is an error without `retain_graph = true`", function()
    local a = ds.ones(3):requires_grad_()
    local l = (a * a):sum()
    l:backward()
    fails(function() l:backward() end, "retain_graph")
    local l2 = (a * a):sum()
    l2:backward({ retain_graph = true })
    works(function() l2:backward() end)
  end },
  { "**sort** is always stable, NaN sorts above every number", function()
    local v, i = ds.sort(ds.tensor({ 1, 0 / 0, -1, 1 }))
    assert.same({ 3, 1, 4, 2 }, i:totable())
    assert.is_true(v:totable()[4] ~= v:totable()[4])
  end },
  { "`topk(..., {sorted = false})` gives them sorted too", function()
    assert.same({ 5, 3 }, ds.tensor({ 3, 1, 2, 5 }):topk(2, { sorted = false }):totable())
  end },
  { "its default is PyTorch's -100, so padded batches labelled -100 work unchanged", function()
    local logits = ds.tensor({ { 1, 2, 3 }, { 3, 2, 1 } })
    local both = F.cross_entropy(logits, i64({ -100, 1 })):item()
    assert.near(F.cross_entropy(logits:narrow(1, 2, 1), i64({ 1 })):item(), both, 1e-6)
  end },
  { "the forward hooks' options table takes `prepend`, and refuses `with_kwargs` and `always_call`", function()
    local m = nn.Linear(2, 2)
    fails(function() m:register_forward_hook(function() end, { with_kwargs = true }) end, "with_kwargs")
    fails(function() m:register_forward_hook(function() end, { always_call = true }) end, "always_call")
    works(function() m:register_forward_hook(function() end, { prepend = true }) end)
  end },
  { "the deprecated `register_backward_hook` is refused", function()
    fails(function() nn.Linear(2, 2):register_backward_hook(function() end) end)
  end },
  { "`vectorize = true` and the forward-mode strategies are refused", function()
    local f = function(x) return x * 2 end
    fails(function() ds.autograd.functional.jacobian(f, ds.ones(2), { vectorize = true }) end, "vectorize")
    fails(function() ds.autograd.functional.jacobian(f, ds.ones(2), { strategy = "forward-mode" }) end, "forward")
  end },
  { "static `nn.Transformer.generate_square_subsequent_mask(sz)`, also `ds.nn.generate_square_subsequent_mask(sz)` and "
    .. "a static of `nn.TransformerEncoder`", function()
      for _, f in ipairs { nn.Transformer.generate_square_subsequent_mask, nn.generate_square_subsequent_mask,
        nn.TransformerEncoder.generate_square_subsequent_mask } do
        assert.same({ 3, 3 }, f(3).shape)
      end
    end },
  { "a module with `convert_forward = false` or after `ds.convert_modules(false)`", function()
    -- there a tensor is always true in plain Lua: the module keeps x for a negative sum
    local Abs = nn.Module:extend("DifferencesAbs")
    function Abs:forward(x) if x:sum():gt(0) then return x else return -x end end
    local m, neg = Abs(), ds.tensor({ -1, -2 })
    assert.same({ 1, 2 }, m(neg):totable())
    m.convert_forward = false
    assert.same({ -1, -2 }, m(neg):totable())
    m.convert_forward = nil
    local was = ds.convert_modules(false)
    assert.same({ -1, -2 }, m(neg):totable())
    ds.convert_modules(was)
  end },
  { "A `goto` under a tensor condition is an error eagerly too", function()
    local f = ds.loadstring([[
return function(x)
  if x:sum():gt(0) then goto done end
  x = -x
  ::done::
  return x
end]], "=differences_goto")()
    fails(function() ds.convert(f)(ds.ones(2)) end, "goto")
  end },
  { "**ctc_loss** / `nn.CTCLoss`: `blank` is a class, so 1-based (default 1, PyTorch's 0)", function()
    local lp = ds.randn(4, 1, 3):log_softmax(3)
    local t = i64({ { 2, 3 } })
    fails(function() return F.ctc_loss(lp, t, { 4 }, { 2 }, { blank = 0 }) end, "blank")
    -- blank 1 (the default) and blank 3 read different classes as the blank
    assert.is_false(ds.equal(F.ctc_loss(lp, t, { 4 }, { 2 }), F.ctc_loss(lp, i64({ { 1, 2 } }), { 4 }, { 2 },
      { blank = 3 })))
  end },
  { "An input length of 0 gives 0 for an empty target and inf otherwise", function()
    local l = F.ctc_loss(ds.randn(3, 2, 4):log_softmax(3), i64({ { 2 }, { 2 } }), { 0, 0 }, { 0, 1 },
      { reduction = "none" })
    assert.equal(0, l[1]:item())
    assert.equal(math.huge, l[2]:item())
  end },
  { "`ConvTranspose*` take `padding_mode = \"zeros\"` only, as PyTorch. **gaussian_nll_loss**'s check that `var` "
    .. "has no negative entry reads its values, so it runs eagerly only (not while tracing)", function()
    fails(function() return nn.ConvTranspose1d(2, 2, 3, { padding_mode = "reflect" }) end, "padding_mode")
    local x = ds.ones(3)
    fails(function() return F.gaussian_nll_loss(x, x, -x) end, "negative")
    works(traced(function(a, b, v) return F.gaussian_nll_loss(a, b, v) end, { x, x, x }))
  end },
  { "**DataParallel** runs its module as it is (ds has no CUDA devices): `device_ids` are refused; the parameters "
    .. "are still named `module.<name>`", function()
    local lin = nn.Linear(2, 2)
    fails(function() return nn.DataParallel(lin, { 0 }) end, "device_ids")
    local x = ds.ones(1, 2)
    assert.is_true(ds.equal(nn.DataParallel(lin)(x), lin(x)))
    assert.is_true(nn.DataParallel(lin):state_dict()["module.weight"] ~= nil)
  end },
}

describe("docs/differences.md", function()
  for _, c in ipairs(CLAIMS) do
    it(c[1]:sub(1, 90), function()
      assert(doc:find(squash(c[1]), 1, true), "docs/differences.md no longer says: " .. c[1]
        .. "\n(update this claim in tests/differences_spec.lua with the line)")
      c[2]()
    end)
  end

  it("names only ds functions, modules and libraries that exist", function()
    local names = {}
    for name in doc:gmatch("`(ds%.[%w_.]+)") do names[name:gsub("%.$", "")] = true end
    for name in doc:gmatch("`(nn%.[A-Z][%w_.]*)") do names["ds." .. name] = true end
    assert.is_true(next(names) ~= nil)
    for name in pairs(names) do
      assert(help.resolve(ds, name:sub(4)) ~= nil, name .. " is named in docs/differences.md but does not exist")
    end
  end)
end)
