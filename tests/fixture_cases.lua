-- tests/fixture_cases.lua: the runner of PyTorch fixture cases shared by ports_spec, nn_more_spec and
-- tensor_more_spec. A fixture holds, per case name, {inputs, want (outputs), grad (input index -> gradient of
-- sum(w * outputs) for fixed weights w)}; a case is {fn, eager = no trace/compile, nogc = no gradcheck, setup =
-- function(inputs) before the call, args = how many inputs fn takes}. Each case runs eagerly against PyTorch's
-- values and gradients, traced and compiled bit for bit against eager, and f64 cases pass a gradcheck.
local ds = require("ds")
local cjson = require("cjson")
local H = require("helpers")
local assert = require("luassert")   -- busted's assert (a spec's own is not global)

local M = {}
local inf = math.huge

-- a fixture tensor {shape, dtype, data (flat; null for NaN, "inf"/"-inf")} as a ds tensor
function M.T(e)
  local data = {}
  for i, v in ipairs(e.data) do
    data[i] = v == cjson.null and 0 / 0 or v == "inf" and inf or v == "-inf" and -inf or v
  end
  local flat = ds.tensor(#data > 0 and data or { 0 }, { dtype = e.dtype })
  if #data == 0 then flat = flat:narrow(1, 1, 0) end
  return flat:reshape(e.shape)
end

-- got against the fixture tensor e: dtype, shape, values within 1e-5 (f32) or 1e-10 (f64)
function M.check(got, e, what)
  assert(ds.is_tensor(got), what .. ": not a tensor")
  assert.equal(e.dtype, got.dtype, what .. " dtype")
  assert.same(e.shape, got.shape, what .. " shape")
  local tol = got.dtype == "f32" and 1e-5 or 1e-10
  local ok, err = pcall(H.close, got, M.T(e), tol, tol)
  assert(ok, what .. ": " .. tostring(err))
end

function M.pack(...) return { n = select("#", ...), ... } end

-- the fixed weights of an output (the generators use cos(1..n) too)
local function weights(o)
  local n = o:numel()
  return ds.cos(ds.arange(1, n + 1, { dtype = "f64" })):reshape(o.shape):astype(o.dtype)
end

-- sum(w * o) over the floating outputs
local function loss(outs)
  local total
  for k = 1, outs.n do
    local o = outs[k]
    if o.dtype == "f32" or o.dtype == "f64" then
      local term = (o * weights(o)):sum()
      total = total and total + term or term
    end
  end
  return total
end

local function run_case(name, c, e, opts)
  local inputs = {}
  for i, t in ipairs(e.inputs) do inputs[i] = M.T(t) end
  if c.setup then c.setup(inputs) end
  local args = { unpack(inputs, 1, c.args or #inputs) }
  for k in pairs(e.grad or {}) do args[tonumber(k)]:requires_grad_() end
  local fn = c[1]
  local outs = M.pack(fn(unpack(args)))
  assert.equal(#e.want, outs.n, name .. ": number of outputs")
  for k, want in ipairs(e.want) do M.check(outs[k], want, name .. " output " .. k) end
  if not c.eager and #args > 0 then
    local traced = M.pack(ds.trace(fn, args)(unpack(args)))
    local compiled = M.pack(ds.compile(fn, args)(unpack(args)))
    for k = 1, outs.n do
      assert(H.bitwise(traced[k], outs[k]), name .. ": traced output " .. k .. " differs from eager")
      assert(H.bitwise(compiled[k], outs[k]), name .. ": compiled output " .. k .. " differs from eager")
    end
  end
  if not e.grad then return end
  local wrt, keys = {}, {}
  for k in pairs(e.grad) do keys[#keys + 1] = tonumber(k) end
  table.sort(keys)
  for i, k in ipairs(keys) do wrt[i] = args[k] end
  local grads = ds.grad(loss(outs), wrt)
  for i, k in ipairs(keys) do M.check(grads[i], e.grad[tostring(k)], name .. " grad of input " .. k) end
  if opts.compiled_grads and not c.eager then
    -- the gradients compiled: ds.grad inside the compiled function, equal to eager's bit for bit
    local function grad_fn(...)
      local a = { ... }
      for _, k in ipairs(keys) do a[k] = a[k]:requires_grad_() end
      local w = {}
      for i, k in ipairs(keys) do w[i] = a[k] end
      return unpack(ds.grad(loss(M.pack(fn(unpack(a, 1, #args)))), w))
    end
    local compiled = M.pack(ds.compile(grad_fn, args)(unpack(args)))
    for i, k in ipairs(keys) do
      assert(H.bitwise(compiled[i], grads[i]), name .. ": compiled gradient of input " .. k .. " differs")
    end
  end
  if not c.nogc and args[keys[1]].dtype == "f64" then
    assert(ds.autograd.gradcheck(fn, args), name .. ": gradcheck")
  end
end

-- a check that every case of fx (name -> fixture case) has a call in cases (name -> case) and every call a case
function M.coverage(fx, cases)
  return function()
    for name in pairs(fx) do assert(cases[name], "no call for fixture case " .. name) end
    for name in pairs(cases) do assert(fx[name], "no fixture for " .. name) end
  end
end

-- for name, run in M.cases(fx, cases, opts): each case with a call, in name order, and the function running it;
-- opts.compiled_grads: also compile each case's gradient and compare it with eager's bit for bit
function M.cases(fx, cases, opts)
  opts = opts or {}
  local names = {}
  for name in pairs(fx) do if cases[name] then names[#names + 1] = name end end
  table.sort(names)
  local i = 0
  return function()
    i = i + 1
    local name = names[i]
    if name then return name, function() run_case(name, cases[name], fx[name], opts) end end
  end
end

return M
