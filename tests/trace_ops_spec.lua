-- tests/trace_ops_spec.lua: every op in the table, traced and run, equals eager bitwise (one loop, no per-op code).
-- Inputs come from def.sample() when an op has one, else from generic candidates by dtype/shape/attr type:
-- the first candidate the eager op accepts is used, and the traced graph must reproduce it bit for bit.
local ds = require("ds")
local H = require("helpers")
local D = require("ds.dispatch")

local DTYPES = { "f32", "f64", "i64", "i32", "u8", "bool" }
local SHAPES = { { 2, 3 }, { 3 }, { 2 }, { 2, 3, 4 }, { 2, 2, 4, 4 }, {} }
-- per-input shapes: all alike, trailing vectors (bias/affine params), conv-like (x, w, b)
local function patterns(nin)
  local out = {}
  for _, s in ipairs(SHAPES) do
    local p = {}
    for i = 1, nin do p[i] = s end
    out[#out + 1] = p
  end
  if nin >= 2 then
    local p = { { 2, 3 } }
    for i = 2, nin do p[i] = { 3 } end
    out[#out + 1] = p
    out[#out + 1] = { { 2, 2, 4, 4 }, { 2, 2, 3, 3 }, { 2 } }
  end
  return out
end

-- deterministic values of every sign (floats), small 1-based values (integers, usable as indices)
local function make(shape, dt, seed)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local flat = {}
  for i = 1, n do
    local k = i + seed
    if dt == "bool" then flat[i] = k % 3 ~= 0
    elseif dt == "f32" or dt == "f64" then flat[i] = ((k * 7) % 11 - 5) / 4
    else flat[i] = k % 2 + 1 end
  end
  local t = ds.tensor(flat, { dtype = dt })
  return t:reshape(shape)
end

local NVARIANTS = 5
local function fill_attrs(def, shape, variant)
  local rank = #shape
  local attrs, dim_no = {}, 0
  for _, a in ipairs(def.attrs) do
    local name, ty, default = a[1], a[2], a[3]
    if default == -1 and ty == "int" and variant > 1 then attrs[name] = 3 end
    if default == nil then
      if ty == "dim" then dim_no = dim_no + 1; attrs[name] = math.min(dim_no, math.max(rank, 1))
      elseif ty == "int" then attrs[name] = 1
      elseif ty == "float" then attrs[name] = 0.5
      elseif ty == "bool" then attrs[name] = false
      elseif ty == "dtype" then attrs[name] = "f64"
      elseif ty == "enum" then attrs[name] = a[4][1]
      elseif ty == "dims" then
        local d = {}
        for i = 1, math.max(rank, 1) do d[i] = variant == 1 and (rank - i + 1) or i end
        attrs[name] = variant == 3 and { 1 } or d
      elseif ty == "ints" then
        local v = ({ { -1 }, { 2, 3 }, { 3, 2 }, { shape[rank] or 1 }, shape })[variant]
        attrs[name] = v
      end
    end
  end
  return attrs
end

-- candidate samples: {make_inputs = function() -> inputs, attrs = ..., fn = optional}
local function candidates(def)
  if def.sample then
    local inputs, attrs, fn = def.sample()
    return { { make_inputs = function() return (def.sample()) end, attrs = attrs or {}, fn = fn, from_sample = true,
               n = #inputs } }
  end
  local out = {}
  local nin = def.ninputs or 1
  local dts = {}
  for _, dt in ipairs(DTYPES) do if not def.dtypes or def.dtypes[dt] then dts[#dts + 1] = dt end end
  if not (def.dtypes and def.dtypes.i64) then dts[#dts + 1] = "i64" end
  for _, dt in ipairs(dts) do
    for _, pat in ipairs(patterns(nin)) do
      for variant = 1, NVARIANTS do
        for _, mixed in ipairs { false, true } do
          out[#out + 1] = {
            make_inputs = function()
              local ins = {}
              for i = 1, nin do ins[i] = make(pat[i], (mixed and i > 1) and "i64" or dt, i) end
              return ins
            end,
            attrs = fill_attrs(def, pat[1] or { 2, 3 }, variant), n = nin,
          }
        end
      end
    end
  end
  return out
end

local function copy(t) local o = {}; for k, v in pairs(t) do o[k] = v end; return o end

-- the function both modes run: the op through dispatch (or the sample's fn); mutated inputs are results too
local function op_fn(def, cand)
  if cand.fn then return cand.fn end
  return function(...)
    local ins = { ... }
    local outs = { D.call(def, ins, copy(cand.attrs)) }
    for _, j in ipairs(def.mutates or {}) do outs[#outs + 1] = ins[j] end
    return unpack(outs, 1, (def.noutputs or 1) + #(def.mutates or {}))
  end
end

-- run f with a fixed random seed and ds.print's output swallowed
local function seeded(f, ...)
  if ds.manual_seed then ds.manual_seed(1234) end
  local write = io.write
  io.write = function() end
  local res = { pcall(f, ...) }
  io.write = write
  if not res[1] then error(res[2], 0) end
  table.remove(res, 1)
  return res
end

-- trace fn on the sample's inputs, run the graph, compare with eager; returns the graph
local function check_traced(name, f, cand, eager)
  local inputs = cand.make_inputs()
  local g = ds.trace(f, { n = cand.n, unpack(inputs, 1, cand.n) })
  local traced = seeded(function(...) return g(...) end, unpack(cand.make_inputs(), 1, cand.n))
  assert.equal(#eager, #traced)
  for i = 1, #eager do
    assert.is_true(H.bitwise(eager[i], traced[i]), name .. ": output " .. i .. " differs")
  end
  return g
end

-- the first candidate that runs eagerly and traces
local function choose(def)
  local first_err
  for _, cand in ipairs(candidates(def)) do
    local f = op_fn(def, cand)
    local ok, res = pcall(seeded, f, unpack(cand.make_inputs(), 1, cand.n))
    if ok and #res > 0 then
      local tok, terr = pcall(ds.trace, f, { n = cand.n, unpack(cand.make_inputs(), 1, cand.n) })
      if tok then return cand, res end
      first_err = first_err or terr
    else
      first_err = first_err or res
    end
    if cand.from_sample then return nil, "def.sample of " .. def.name .. " fails: " .. tostring(first_err) end
  end
  return nil, first_err
end

-- d(sum of outputs)/d(float inputs) as a function of the inputs (records the op's backward ops)
local function grad_fn(def, cand)
  return function(...)
    local ins = { ... }
    local xs = {}
    for i, x in ipairs(ins) do
      if x.dtype == "f32" or x.dtype == "f64" then ins[i] = x:detach():requires_grad_(); xs[#xs + 1] = ins[i] end
    end
    local outs = { D.call(def, ins, copy(cand.attrs)) }
    local loss
    for _, y in ipairs(outs) do
      if rawget(y, "requires_grad") then loss = loss and loss + y:sum() or y:sum() end
    end
    return unpack(ds.grad(loss, xs, { allow_unused = true }))
  end
end

local chosen, why, covered_by = {}, {}, {}

describe("every op in the table traces", function()
  it("has ops to check", function() assert.is_true(#D.list > 20) end)
  for _, def in ipairs(D.list) do
    if not def.internal then
      chosen[def], why[def] = choose(def)
      local cand = chosen[def]
      if cand then
        it(def.name .. ": traced and run equals eager bitwise", function()
          local f = op_fn(def, cand)
          local g = check_traced(def.name, f, cand, seeded(f, unpack(cand.make_inputs(), 1, cand.n)))
          local found = false
          for _, node in ipairs(g.nodes) do if node.op == def.name then found = true end end
          assert.is_true(found, def.name .. " is not a node of its own trace:\n" .. tostring(g))
        end)
      end
    end
  end
end)

describe("every differentiable op's gradient traces", function()
  for _, def in ipairs(D.list) do
    local cand = chosen[def]
    local has_float = false
    if cand and def.backward and not cand.fn then
      for _, x in ipairs(cand.make_inputs()) do if x.dtype == "f32" or x.dtype == "f64" then has_float = true end end
    end
    if has_float then
      local f = grad_fn(def, cand)
      local ok, eager = pcall(seeded, f, unpack(cand.make_inputs(), 1, cand.n))
      if ok and #eager > 0 then
        local tok, g = pcall(ds.trace, f, { n = cand.n, unpack(cand.make_inputs(), 1, cand.n) })
        if tok then for _, node in ipairs(g.nodes) do covered_by[node.op] = covered_by[node.op] or def.name end end
        it(def.name .. ": traced gradient equals eager bitwise", function()
          check_traced(def.name .. " grad", f, cand, eager)
        end)
      end
    end
  end
end)

describe("ops without a sample of their own", function()
  if os.getenv("DS_TRACE_COVERAGE") then
    for _, def in ipairs(D.list) do
      if not chosen[def] then print(def.name, covered_by[def.name], why[def]) end
    end
  end
  for _, def in ipairs(D.list) do
    if not def.internal and not chosen[def] then
      it(def.name .. " is covered by a traced gradient", function()
        assert(covered_by[def.name], def.name .. ": no sample runs eagerly and traces (add def.sample), and no traced "
          .. "gradient uses it; first error: " .. tostring(why[def]))
      end)
    end
  end
end)
