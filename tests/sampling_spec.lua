-- tests/sampling_spec.lua: multinomial (distributions by chi-square with fixed seeds, without-replacement
-- uniqueness, support, seeds reproducing, compiled == eager, PyTorch's errors), ds.distributions against PyTorch's
-- log_prob/entropy (computed by /usr/bin/python3 at test time) and F.sample_logits's filters.
local ds = require("ds")
local H = require("helpers")
local cjson = require("cjson")

-- torch's answer to a Python expression list, as JSON (each a tensor -> nested list)
local function torch_values(code)
  local script = os.tmpname()
  H.write_file(script, "import json, torch\nfrom torch import distributions as D\n"
    .. "def L(t): return t.tolist()\nprint(json.dumps(" .. code .. "))\n")
  local p = io.popen("/usr/bin/python3 " .. script .. " 2>/dev/null")
  local out = p:read("*a")
  p:close()
  os.remove(script)
  return cjson.decode(out)
end

-- chi-square statistic of counts against probabilities over n draws
local function chi2(counts, probs, n)
  local s = 0
  for j, p in ipairs(probs) do if p > 0 then s = s + (counts[j] - n * p) ^ 2 / (n * p) end end
  return s
end

local function counts_of(t, k)
  local c = {}
  for j = 1, k do c[j] = 0 end
  for _, v in ipairs(t:reshape(-1):totable()) do c[v] = c[v] + 1 end
  return c
end

describe("multinomial", function()
  local probs = { 0.1, 0.2, 0.3, 0.4 }

  it("with replacement: frequencies follow the probabilities (chi-square, 3 dof, 0.999 quantile 16.27)", function()
    for _, dt in ipairs { "f32", "f64" } do
      ds.manual_seed(11)
      local n = 20000
      local draws = ds.multinomial(ds.tensor(probs, { dtype = dt }) * 5, n, true) -- unnormalized weights
      assert.same({ n }, draws:size())
      assert.equal("i64", draws.dtype)
      assert(chi2(counts_of(draws, 4), probs, n) < 16.27)
    end
  end)

  it("batched rows draw from their own row; zero-probability categories never come", function()
    ds.manual_seed(12)
    local p = ds.tensor({ { 0, 1, 0, 3 }, { 2, 0, 2, 0 } })
    local d = p:multinomial(5000, true)
    assert.same({ 2, 5000 }, d:size())
    local c1, c2 = counts_of(d[1], 4), counts_of(d[2], 4)
    assert.equal(0, c1[1] + c1[3]); assert.equal(0, c2[2] + c2[4])
    assert(chi2(c1, { 0, 0.25, 0, 0.75 }, 5000) < 10.83) -- 1 dof
    assert(chi2(c2, { 0.5, 0, 0.5, 0 }, 5000) < 10.83)
  end)

  it("without replacement: distinct indices in 1..k; the first draw follows the probabilities", function()
    ds.manual_seed(13)
    local rows = 5000
    local p = ds.tensor(probs):reshape(1, 4):expand(rows, 4):contiguous()
    local d = ds.multinomial(p, 3, { replacement = false })
    local first = {}
    for r, row in ipairs(d:totable()) do
      local seen = {}
      for _, v in ipairs(row) do
        assert(v >= 1 and v <= 4 and not seen[v], "row " .. r .. " repeats or leaves 1..4")
        seen[v] = true
      end
      first[r] = row[1]
    end
    assert(chi2(counts_of(ds.tensor(first, { dtype = "i64" }), 4), probs, rows) < 16.27)
    -- all k draws: a permutation, zero-probability categories last (as PyTorch: [2, 0, 1]-like)
    local perm = ds.multinomial(ds.tensor({ 0.5, 0, 0.5 }), 3):totable()
    assert.equal(2, perm[3])
  end)

  it("the second draw without replacement follows PyTorch's conditional law", function()
    -- P(second = j | first = i) = p_j / (1 - p_i); marginal of the second draw for probs {0.1, 0.2, 0.3, 0.4}
    local second = {}
    for j, pj in ipairs(probs) do
      local s = 0
      for i, pi in ipairs(probs) do if i ~= j then s = s + pi * pj / (1 - pi) end end
      second[j] = s
    end
    ds.manual_seed(14)
    local d = ds.multinomial(ds.tensor(probs):reshape(1, 4):expand(8000, 4):contiguous(), 2)
    assert(chi2(counts_of(d:select(2, 2), 4), second, 8000) < 16.27)
  end)

  it("a seed reproduces the draws; the generator advances", function()
    ds.manual_seed(5)
    local a = ds.multinomial(ds.tensor(probs), 10, true)
    local b = ds.multinomial(ds.tensor(probs), 10, true)
    ds.manual_seed(5)
    assert(H.bitwise(a, ds.multinomial(ds.tensor(probs), 10, true)))
    assert(H.bitwise(b, ds.multinomial(ds.tensor(probs), 10, true)))
    assert.is_false(a:equal(b))
  end)

  it("compiled draws equal eager draws from the same state, and advance it the same", function()
    local f = function(p) return ds.multinomial(p, 6, true), p:multinomial(3) end
    local p = ds.tensor({ { 1, 2, 3, 4 }, { 4, 3, 2, 1 } })
    ds.manual_seed(9)
    local e1, e2 = f(p)
    local after = ds.get_rng_state()
    local cg = ds.compile(f, { ds.spec({ 2, 4 }, "f32") })
    ds.manual_seed(9)
    local c1, c2 = cg(p)
    assert(H.bitwise(e1, c1) and H.bitwise(e2, c2))
    assert(H.bitwise(after, ds.get_rng_state()))
  end)

  it("refuses what PyTorch refuses, with its messages", function()
    H.raises(function() ds.multinomial(ds.tensor({ 0.5, -1 }), 1) end, "multinomial: probability tensor contains")
    H.raises(function() ds.multinomial(ds.tensor({ 0.5, 0 / 0 }), 1) end, "either `inf`, `nan` or element < 0")
    H.raises(function() ds.multinomial(ds.tensor({ 0, 0 }), 1) end, "invalid multinomial distribution")
    H.raises(function() ds.multinomial(ds.tensor({ 1, 1 }), 3) end, "cannot sample n_sample > prob_dist.size(-1)")
    H.raises(function() ds.multinomial(ds.tensor({ 1, 1 }), 0) end, "cannot sample n_sample <= 0")
    H.raises(function() ds.multinomial(ds.ones(2, 2, 2), 1) end, "prob_dist must be 1 or 2 dim")
    H.raises(function() ds.multinomial(ds.tensor({ 1, 2 }, { dtype = "i64" }), 1) end, "floating-point")
    H.raises(function() ds.multinomial(ds.tensor({ 1, 2 }), 1, { replace = true }) end, "replace")
    -- a value-dependent error is raised by the kernel, compiled too
    local cg = ds.compile(function(p) return ds.multinomial(p, 1) end, { ds.spec({ 2 }, "f32") })
    H.raises(function() cg(ds.tensor({ 1, -1 })) end, "probability tensor contains")
  end)
end)

describe("ds.distributions", function()
  local ref = torch_values([=[{
    "cat_lp": L(D.Categorical(probs=torch.tensor([[0.1,0.2,0.7],[0.5,0.0,0.5]])).log_prob(torch.tensor([2,0]))),
    "cat_ent": L(D.Categorical(probs=torch.tensor([[0.1,0.2,0.7],[0.5,0.0,0.5]])).entropy()),
    "catl_lp": L(D.Categorical(logits=torch.tensor([1.0,-2.0,0.5])).log_prob(torch.tensor([0,1,2]))),
    "catl_ent": L(D.Categorical(logits=torch.tensor([1.0,-2.0,0.5])).entropy()),
    "norm_lp": L(D.Normal(torch.tensor([0.0,1.0]), torch.tensor([1.0,2.0])).log_prob(torch.tensor([0.5,-1.0]))),
    "norm_ent": L(D.Normal(torch.tensor([0.0,1.0]), torch.tensor([1.0,2.0])).entropy()),
    "bern_lp": L(D.Bernoulli(probs=torch.tensor([0.3,0.9])).log_prob(torch.tensor([1.0,0.0]))),
    "bern_ent": L(D.Bernoulli(probs=torch.tensor([0.3,0.9])).entropy()),
    "bernl_lp": L(D.Bernoulli(logits=torch.tensor([0.3,-2.0])).log_prob(torch.tensor([0.0,1.0]))),
    "bernl_ent": L(D.Bernoulli(logits=torch.tensor([0.3,-2.0])).entropy()),
    "uni_lp": L(D.Uniform(torch.tensor([0.0,-1.0]), torch.tensor([2.0,3.0])).log_prob(torch.tensor([0.5,2.0]))),
    "uni_ent": L(D.Uniform(torch.tensor([0.0,-1.0]), torch.tensor([2.0,3.0])).entropy()),
  }]=])
  local Dd = ds.distributions
  local T = ds.tensor
  local function i64(t) return T(t, { dtype = "i64" }) end

  it("log_prob and entropy equal PyTorch's (categories 1-based in ds)", function()
    local c = Dd.Categorical({ probs = T({ { 0.1, 0.2, 0.7 }, { 0.5, 0, 0.5 } }) })
    H.close(c:log_prob(i64({ 3, 1 })), ref.cat_lp); H.close(c:entropy(), ref.cat_ent)
    local cl = Dd.Categorical({ logits = T({ 1, -2, 0.5 }) })
    H.close(cl:log_prob(i64({ 1, 2, 3 })), ref.catl_lp); H.close(cl:entropy(), ref.catl_ent)
    local n = Dd.Normal(T({ 0, 1 }), T({ 1, 2 }))
    H.close(n:log_prob(T({ 0.5, -1 })), ref.norm_lp); H.close(n:entropy(), ref.norm_ent)
    local b = Dd.Bernoulli({ probs = T({ 0.3, 0.9 }) })
    H.close(b:log_prob(T({ 1, 0 })), ref.bern_lp); H.close(b:entropy(), ref.bern_ent)
    local bl = Dd.Bernoulli({ logits = T({ 0.3, -2 }) })
    H.close(bl:log_prob(T({ 0, 1 })), ref.bernl_lp); H.close(bl:entropy(), ref.bernl_ent)
    local u = Dd.Uniform(T({ 0, -1 }), T({ 2, 3 }))
    H.close(u:log_prob(T({ 0.5, 2 })), ref.uni_lp); H.close(u:entropy(), ref.uni_ent)
    assert.equal(-math.huge, Dd.Uniform(0, 1):log_prob(T({ 1.5 })):item()) -- outside the support
  end)

  it("samples: shapes, support and moments with fixed seeds", function()
    ds.manual_seed(21)
    local c = Dd.Categorical({ probs = T({ { 0.2, 0.8 }, { 1, 0 } }) })
    local s = c:sample({ 4000 })
    assert.same({ 4000, 2 }, s:size())
    assert.equal(4000, s:select(2, 2):eq(1):sum():item())                   -- probability 1
    assert(chi2(counts_of(s:select(2, 1), 2), { 0.2, 0.8 }, 4000) < 10.83)
    local n = Dd.Normal(3, 2):sample({ 20000 })
    assert(math.abs(n:mean():item() - 3) < 0.06 and math.abs(n:std():item() - 2) < 0.05)
    local b = Dd.Bernoulli({ probs = T({ 0.25 }) }):sample({ 20000 })
    assert(b:eq(0):logical_or(b:eq(1)):all():item() and math.abs(b:mean():item() - 0.25) < 0.015)
    local u = Dd.Uniform(-1, 3):sample({ 20000 })
    assert(u:ge(-1):all():item() and u:lt(3):all():item() and math.abs(u:mean():item() - 1) < 0.04)
    ds.manual_seed(21)
    assert(H.bitwise(s, c:sample({ 4000 })))
  end)

  it("rsample carries gradients to loc and scale", function()
    local loc, scale = T({ 1.0 }):requires_grad_(), T({ 2.0 }):requires_grad_()
    Dd.Normal(loc, scale):rsample({ 5 }):sum():backward()
    assert.equal(5, loc.grad:item())
    assert.is_false(Dd.Normal(loc, scale):sample({ 5 }).requires_grad == true)
  end)

  it("refuses PyTorch's invalid arguments", function()
    H.raises(function() Dd.Categorical({ probs = T({ 0.5 }), logits = T({ 0.5 }) }) end, "Categorical: either probs")
    H.raises(function() Dd.Bernoulli({}) end, "Bernoulli: either probs or logits")
    H.raises(function() Dd.Normal(0, T({ 1, -1 })) end, "Normal: scale must be positive")
    H.raises(function() Dd.Bernoulli({ probs = T({ 1.5 }) }) end, "probs must be in [0, 1]")
    H.raises(function() Dd.Uniform(2, 1) end, "Uniform: low must be less than high")
  end)
end)

describe("F.sample_logits", function()
  local logits = ds.tensor({ { 1, 2, 3, 0.5 }, { 0, 0, 5, 1 } })

  it("temperature 0 is greedy (argmax), (rows, 1)", function()
    assert.same({ { 3 }, { 3 } }, ds.F.sample_logits(logits, { temperature = 0 }):totable())
    assert.same({ 3 }, ds.F.sample_logits(logits[1], { temperature = 0 }):totable())
  end)

  it("top_k, top_p and min_p leave only the tokens they keep", function()
    ds.manual_seed(31)
    local x = logits:reshape(1, 2, 4):expand(2000, 2, 4):reshape(4000, 4)
    local function support(opts)
      local c = counts_of(ds.F.sample_logits(x, opts), 4)
      local s = {}
      for j = 1, 4 do if c[j] > 0 then s[#s + 1] = j end end
      return s
    end
    assert.same({ 2, 3, 4 }, support({ top_k = 2 }))             -- the two largest of each row (3 and 2; 3 and 4)
    assert.same({ 3 }, support({ top_k = 1, temperature = 5 }))
    -- row 1 softmax {0.086, 0.234, 0.636, 0.052}: top_p 0.8 keeps 3 and 2; row 2 {0.0066, 0.0066, 0.97, 0.018}: 3
    local c1 = counts_of(ds.F.sample_logits(logits[1]:reshape(1, 4):expand(3000, 4), { top_p = 0.8 }), 4)
    assert(c1[1] + c1[4] == 0 and c1[2] > 0 and c1[3] > 0)
    local rows2 = ds.F.sample_logits(logits[2]:reshape(1, 4):expand(3000, 4), { top_p = 0.8 })
    assert.equal(3000, rows2:eq(3):sum():item())
    -- min_p 0.1: tokens with p >= 0.1 * max: row 1 keeps 1, 2, 3 (0.086 >= 0.064), drops 4 (0.052)
    local c = counts_of(ds.F.sample_logits(logits[1]:reshape(1, 4):expand(3000, 4), { min_p = 0.1 }), 4)
    assert(c[4] == 0 and c[1] > 0 and c[2] > 0 and c[3] > 0)
  end)

  it("sampled tokens follow the tempered softmax (chi-square)", function()
    ds.manual_seed(32)
    local row = ds.tensor({ 1, 2, 3, 0.5 })
    local p = ds.softmax(row / 2, -1):totable()
    local d = ds.F.sample_logits(row:reshape(1, 4):expand(8000, 4), { temperature = 2 })
    assert(chi2(counts_of(d, 4), p, 8000) < 16.27)
  end)

  it("compiles: the same tokens as eager for the same seed", function()
    local f = function(l) return ds.F.sample_logits(l, { temperature = 0.8, top_k = 3, top_p = 0.9 }) end
    ds.manual_seed(33)
    local e = f(logits)
    local cg = ds.compile(f, { ds.spec({ 2, 4 }, "f32") })
    ds.manual_seed(33)
    assert(H.bitwise(e, cg(logits)))
  end)
end)
