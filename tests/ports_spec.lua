-- tests/ports_spec.lua: the calls PyTorch ports hit first (issue 28) against PyTorch's values and gradients
-- (tests/fixtures/ports.json from tests/gen_ports_fixtures.py): each case eagerly, traced and compiled (both
-- equal to eager bit for bit), its gradient against PyTorch's and a finite-difference gradcheck; then the
-- modules, initializers, hooks and random layers, whose values PyTorch's stream cannot give.
local ds = require("ds")
local H = require("helpers")
local FC = require("fixture_cases")
local F, nn = ds.F, ds.nn

local fx = H.fixture("ports.json")

local lstm, gru, rnn = {}, {}, {}
-- a cell with the fixture's parameters (inputs first + 1 .. first + 4)
local function cell_of(slot, cls, first, inputs, ...)
  local m = cls(3, 4, ...)
  ds.no_grad(function()
    for i, name in ipairs { "weight_ih", "weight_hh", "bias_ih", "bias_hh" } do
      m[name] = nn.Parameter(inputs[first + i]:clone())
    end
  end)
  slot.m = m
end

-- case name -> {fn, eager = true (values decide shapes), nogc = true (ties: no finite differences),
-- setup = function(inputs) before the calls, args = how many inputs fn takes}
local CASES = {
  cross_entropy_ignore = { function(x, t) return F.cross_entropy(x, t) end },
  cross_entropy_ignore_none = { function(x, t) return F.cross_entropy(x, t, { reduction = "none" }) end },
  cross_entropy_ignore_weight_smooth = { function(x, t, w)
    return F.cross_entropy(x, t, { weight = w, label_smoothing = 0.1 })
  end },
  cross_entropy_ignore_seq = { function(x, t) return F.cross_entropy(x, t) end },
  -- PyTorch's ignore_index = 1 (a class) is ds's 2
  cross_entropy_ignore_index_1 = { function(x, t) return F.cross_entropy(x, t, { ignore_index = 2 }) end },
  nll_loss_ignore = { function(x, t) return F.nll_loss(x:log_softmax(2), t) end },
  sum_dtype_i32 = { function(x) return x:sum({ dtype = "i32" }) end },
  sum_dim_dtype_f64 = { function(x) return x:sum(2, { dtype = "f64" }) end },
  mean_dtype_f64 = { function(x) return x:mean(1, { dtype = "f64" }) end },
  cumsum_dtype_f64 = { function(x) return x:cumsum(2, { dtype = "f64" }) end },
  sum_f32_as_f64 = { function(x) return x:sum(1, { keepdim = true, dtype = "f64" }) end },
  softmax_dtype_f64 = { function(x) return x:softmax(2, { dtype = "f64" }) end },
  median_all = { function(x) return x:median() end },
  median_dim = { function(x) return x:median(2) end },
  median_dim_keepdim = { function(x) return x:median(1, true) end },
  median_nan = { function(x) return x:median(2) end },
  nanmedian_dim = { function(x) return x:nanmedian(2) end },
  nanmedian_all = { function(x) return x:nanmedian() end },
  kthvalue = { function(x) return x:kthvalue(2, 2) end },
  kthvalue_dim0_keepdim = { function(x) return x:kthvalue(3, 1, true) end },
  mode = { function(x) return x:mode(2) end, nogc = true },
  mode_dim0 = { function(x) return x:mode(1) end, nogc = true },
  quantile_scalar = { function(x) return x:quantile(0.3, 2) end },
  quantile_all = { function(x) return x:quantile(0.75) end },
  quantile_list_keepdim = { function(x, q) return x:quantile(q, 1, true) end },
  quantile_list_all_keepdim = { function(x, q) return x:quantile(q, nil, true) end },
  quantile_nan = { function(x) return x:quantile(0.5, 2) end },
  nanquantile = { function(x, q) return x:nanquantile(q, 2) end },
  count_nonzero = { function(x) return ds.count_nonzero(x) end },
  count_nonzero_dim = { function(x) return x:count_nonzero(2) end },
  nansum = { function(x) return x:nansum(2) end },
  nanmean = { function(x) return x:nanmean(2, true) end },
  nanmean_all = { function(x) return x:nanmean() end },
  aminmax_dim = { function(x) return ds.aminmax(x, { dim = 1 }) end },
  aminmax_all = { function(x) return x:aminmax() end },
  logcumsumexp = { function(x) return x:logcumsumexp(2) end },
  logcumsumexp_dim0 = { function(x) return x:logcumsumexp(1) end },
  diff = { function(x) return x:diff() end },
  diff_n2_dim0_prepend = { function(x, p) return ds.diff(x, 2, 1, p) end },
  diff_bool = { function(x) return x:diff() end },
  var_mean = { function(x) return ds.var_mean(x, 2) end },
  std_mean_keepdim_biased = { function(x) return x:std_mean(1, false, true) end },
  repeat_interleave_int = { function(x) return x:repeat_interleave(2, 2) end },
  repeat_interleave_flat = { function(x) return x:repeat_interleave(3) end },
  repeat_interleave_tensor = { function(x, r) return x:repeat_interleave(r, 1) end, eager = true },
  repeat_interleave_counts = { function(r) return ds.repeat_interleave(r) end, eager = true },
  index_fill = { function(x, i) return x:index_fill(2, i, -1.5) end },
  index_fill_tensor_value = { function(x, i, v) return x:index_fill(1, i, v) end },
  index_copy = { function(x, i, s) return x:index_copy(2, i, s) end },
  masked_scatter = { function(x, m, s) return x:masked_scatter(m, s) end },
  masked_scatter_broadcast = { function(x, m, s) return x:masked_scatter(m, s) end },
  take_along_dim = { function(x, i) return ds.take_along_dim(x, i, 2) end },
  take_along_dim_broadcast = { function(x, i) return x:take_along_dim(i, 1) end },
  take_along_dim_flat = { function(x, i) return ds.take_along_dim(x, i) end },
  searchsorted = { function(s, v) return ds.searchsorted(s, v) end },
  searchsorted_right = { function(s, v) return ds.searchsorted(s, v, { right = true }) end },
  searchsorted_nd = { function(s, v) return ds.searchsorted(s, v, { side = "right" }) end },
  bucketize = { function(v, b) return ds.bucketize(v, b) end },
  bucketize_right_int32 = { function(v, b) return v:bucketize(b, { right = true, out_int32 = true }) end },
  diagonal = { function(x) return x:diagonal() end },
  diagonal_offset_dims = { function(x) return x:diagonal(1, 2, 3) end },
  diagonal_negative = { function(x) return ds.diagonal(x, -1, 3, 1) end },
  trace = { function(x) return x:trace() end },
  trace_int = { function(x) return x:trace() end },
  mT = { function(x) return x.mT end },
  movedim = { function(x) return ds.movedim(x, { 1, 3 }, { 3, 1 }) end },
  clamp_tensors = { function(x, a, b) return x:clamp(a, b) end },
  clamp_min_tensor = { function(x, a) return ds.clamp(x, a) end },
  fmax = { function(a, b) return ds.fmax(a, b) end, nogc = true },
  fmin = { function(a, b) return a:fmin(b) end, nogc = true },
  baddbmm = { function(i, a, b) return ds.baddbmm(i, a, b, { beta = 0.5, alpha = 2 }) end },
  addbmm = { function(i, a, b) return ds.addbmm(i, a, b) end },
  addmv = { function(i, m, v) return ds.addmv(i, m, v, { beta = 2, alpha = -1 }) end },
  tensordot = { function(a, b) return ds.tensordot(a, b, 2) end },
  tensordot_lists = { function(a, b) return ds.tensordot(a, b, { { 1, 3 }, { 2, 1 } }) end },
  cdist = { function(a, b) return ds.cdist(a, b) end },
  cdist_p1_batched = { function(a, b) return ds.cdist(a, b, 1) end },
  cdist_p3 = { function(a, b) return ds.cdist(a, b, 3) end },
  cdist_inf = { function(a, b) return ds.cdist(a, b, math.huge) end },
  kron = { function(a, b) return ds.kron(a, b) end },
  kron_ranks = { function(a, b) return a:kron(b) end },
  prelu = { function(x, w) return F.prelu(x, w) end },
  prelu_shared = { function(x, w) return F.prelu(x, w) end },
  threshold = { function(x) return F.threshold(x, 0.1, 20) end },
  softmin = { function(x) return F.softmin(x, 2) end },
  max_pool1d = { function(x) return F.max_pool1d(x, 3, { stride = 2, padding = 1 }) end },
  max_pool1d_ceil = { function(x) return F.max_pool1d(x, 2, { ceil_mode = true }) end },
  avg_pool1d = { function(x) return F.avg_pool1d(x, 3, { stride = 2, padding = 1, count_include_pad = false }) end },
  avg_pool1d_unbatched = { function(x) return F.avg_pool1d(x, 2) end },
  adaptive_avg_pool1d = { function(x) return F.adaptive_avg_pool1d(x, 3) end },
  adaptive_max_pool1d = { function(x) return F.adaptive_max_pool1d(x, 4) end },
  pixel_shuffle = { function(x) return F.pixel_shuffle(x, 2) end },
  pixel_unshuffle = { function(x) return F.pixel_unshuffle(x, 2) end },
  lstm_cell = { function(x, h, c) return lstm.m(x, { h, c }) end, args = 3,
    setup = function(inputs) cell_of(lstm, nn.LSTMCell, 3, inputs) end },
  gru_cell = { function(x, h) return gru.m(x, h) end, args = 2,
    setup = function(inputs) cell_of(gru, nn.GRUCell, 2, inputs) end },
  rnn_cell_relu = { function(x, h) return rnn.m(x, h) end, args = 2,
    setup = function(inputs) cell_of(rnn, nn.RNNCell, 2, inputs, true, "relu") end },
  square_subsequent_mask = { function() return nn.TransformerEncoder.generate_square_subsequent_mask(4) end },
}
for _, how in ipairs { "lower", "higher", "midpoint", "nearest" } do
  CASES["quantile_" .. how] = { function(x) return x:quantile(0.4, 2, false, { interpolation = how }) end }
end

describe("PyTorch ports: values, traced, compiled, gradients", function()
  it("every fixture case has a call and every call a fixture", FC.coverage(fx, CASES))
  for name, run in FC.cases(fx, CASES) do it(name, run) end
end)

describe("PyTorch ports: modules, hooks, initializers, random layers", function()
  it("forward pre-hooks and hooks run eagerly, traced and compiled, and go with their handles", function()
    local m = nn.Linear(3, 2)
    local x = ds.randn(4, 3)
    local plain = m(x * 2) + 1
    local calls = 0
    local pre = m:register_forward_pre_hook(function(mod, args)
      assert.equal(m, mod)
      return args[1] * 2
    end)
    local post = m:register_forward_hook(function(_, args, out)
      calls = calls + 1
      assert.same({ 4, 3 }, args[1].shape)
      return out + 1
    end)
    assert(H.bitwise(m(x), plain))
    assert(H.bitwise(ds.compile(m, { x })(x), plain))
    assert(calls >= 2)
    pre.remove(); post.remove()
    assert(H.bitwise(m(x), m:forward(x)))
    H.raises(function() m:register_forward_hook(3) end, "register_forward_hook", "function")
  end)
  it("cross_entropy ignores PyTorch's default -100 labels (all ignored: NaN, as PyTorch's mean)", function()
    local loss = F.cross_entropy(ds.randn(2, 3), ds.tensor({ -100, -100 }, { dtype = "i64" }))
    assert(loss:item() ~= loss:item())
    assert.equal(0, F.cross_entropy(ds.randn(2, 3), ds.tensor({ -100, -100 }, { dtype = "i64" }),
      { reduction = "sum" }):item())
  end)
  it("Dropout1d/2d/3d zero whole channels and scale the rest; eval mode is the identity", function()
    ds.manual_seed(3)
    -- class, input shape, number of channels (dims up to the channel dim; Dropout3d's input is unbatched)
    for _, c in ipairs { { nn.Dropout1d, { 4, 6, 5 }, 24 }, { nn.Dropout2d, { 4, 6, 2, 3 }, 24 },
                         { nn.Dropout3d, { 6, 2, 2, 2 }, 6 } } do
      local m = c[1](0.5)
      local per = m(ds.ones(c[2])):reshape(c[3], -1)
      assert(ds.equal(per:amax(2), per:amin(2)), "a channel is not dropped whole")
      assert(per:eq(0):any():item() and per:eq(2):any():item())
      m:eval()
      assert(ds.equal(m(ds.ones(c[2])), ds.ones(c[2])))
    end
    H.raises(function() nn.Dropout2d(1.5) end, "Dropout2d", "p")
    H.raises(function() F.dropout1d(ds.ones(2, 3, 4, 5), 0.5) end, "dropout1d", "(N,C,L)")
  end)
  it("AlphaDropout keeps a standard normal input's mean and variance", function()
    ds.manual_seed(5)
    local y = nn.AlphaDropout(0.3)(ds.randn(200000, { dtype = "f64" }))
    assert(math.abs(y:mean():item()) < 0.02 and math.abs(y:std():item() - 1) < 0.02)
  end)
  it("orthogonal_ gives orthonormal rows or columns times gain; trunc_normal_ stays in [a, b]", function()
    for _, s in ipairs { { 6, 4 }, { 3, 8 }, { 4, 2, 3 } } do
      local w = nn.init.orthogonal_(ds.empty(s, { dtype = "f64" }), 1.5):reshape(s[1], -1)
      local g = s[1] >= w.shape[2] and w:t():matmul(w) or w:matmul(w:t())
      H.close(g, ds.eye(g.shape[1], nil, { dtype = "f64" }) * 2.25, 1e-9, 1e-9)
    end
    local t = nn.init.trunc_normal_(ds.empty(20000), 1, 2, 0, 1.5)
    assert(t:min():item() >= 0 and t:max():item() <= 1.5 and t:std():item() > 0.3)
  end)
  it("PReLU learns one slope per channel; the pools, shuffles and cells take PyTorch's constructor", function()
    local m = nn.PReLU(3)
    local x = ds.randn(2, 3, 5)
    m(x):sum():backward()
    assert.same({ 3 }, m.weight.grad.shape)
    assert.equal(0.25, m.weight[1]:item())
    assert(ds.equal(nn.MaxPool1d(3, 2, 1)(x), F.max_pool1d(x, 3, { stride = 2, padding = 1 })))
    assert(ds.equal(nn.AvgPool1d(2, nil, 0, true)(x), F.avg_pool1d(x, 2, { ceil_mode = true })))
    assert(ds.equal(nn.AdaptiveMaxPool1d(2)(x), F.adaptive_max_pool1d(x, 2)))
    local img = ds.randn(1, 8, 2, 3)
    assert(ds.equal(nn.PixelUnshuffle(2)(nn.PixelShuffle(2)(img)), img))
    assert(ds.equal(nn.Threshold(0, -1)(ds.tensor({ -1, 2 })), ds.tensor({ -1, 2 })))
    local h, c = nn.LSTMCell(3, 4)(ds.randn(3))
    assert.same({ 4 }, h.shape); assert.same({ 4 }, c.shape)
    assert.same({ 2, 4 }, nn.GRUCell(3, 4, false)(ds.randn(2, 3)).shape)
    H.raises(function() nn.RNNCell(3, 4, true, "sigmoid") end, "RNNCell", "nonlinearity")
    H.raises(function() nn.GRUCell(3, 4)(ds.randn(2, 3), ds.randn(3, 4)) end, "GRUCell", "hx")
  end)
  it("refuses what it does not take, naming the call", function()
    H.raises(function() ds.randn(3):sum({ dtype = "f8" }) end, "sum", "dtype")
    H.raises(function() ds.randn(3):quantile(1.5) end, "quantile", "q")
    H.raises(function() ds.randn(3):quantile(0.5, 1, false, { interpolation = "cubic" }) end, "quantile", "interpolation")
    H.raises(function() ds.randn(3):kthvalue(4) end, "kthvalue", "k = 4")
    H.raises(function() F.max_pool1d(ds.randn(1, 2, 6), 2, { return_indices = true }) end, "max_pool1d",
      "return_indices")
    H.raises(function() ds.searchsorted(ds.randn(3), ds.randn(2), { side = "middle" }) end, "searchsorted", "side")
    H.raises(function() ds.trace(function(x, r) return x:repeat_interleave(r) end,
      { ds.randn(2), ds.tensor({ 1, 2 }, { dtype = "i64" }) }) end, "repeat_interleave", "traced")
    H.raises(function() return ds.randn(3).mT end, "mT", "2 dims")
    H.raises(function() ds.baddbmm(ds.randn(3), ds.randn(2, 2, 3), ds.randn(2, 3, 4), { gamma = 1 }) end, "baddbmm",
      "gamma")
  end)
end)
