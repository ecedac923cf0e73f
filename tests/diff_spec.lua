-- tests/diff_spec.lua: the differential harness: every row of tests/diff_cases.txt run in ds against
-- PyTorch's forward and gradient (tests/fixtures/diff.json from tests/gen_diff_fixtures.py); every op
-- in the table must be named by a row that runs it, or the spec fails naming the op.
local ds = require("ds")
local D = require("ds.dispatch")
local H = require("helpers")
local S = require("ds.shape")
local null = require("cjson").null

local ROWS = "tests/diff_cases.txt"
local TOL = { f32 = { 1e-4, 1e-5 }, f64 = { 1e-9, 1e-12 } } -- rtol, atol against PyTorch

-- the rows of the cases file, as the generator reads them: {ops, inputs, ds, torch}
local function read_rows()
  local rows = {}
  for line in H.read_file(ROWS):gmatch("[^\n]+") do
    line = line:match("^%s*(.-)%s*$")
    if line ~= "" and line:sub(1, 1) ~= "#" then
      local cols, rest = {}, line
      for _ = 1, 3 do
        local a, b = rest:find(" | ", 1, true)
        if not a then break end
        cols[#cols + 1] = rest:sub(1, a - 1):match("^%s*(.-)%s*$"); rest = rest:sub(b + 1)
      end
      cols[#cols + 1] = rest:match("^%s*(.-)%s*$")
      assert(#cols == 4, ROWS .. ": a row needs 4 columns: " .. line)
      rows[#rows + 1] = cols
    end
  end
  return rows
end

local function from_json(j)
  local t = ds.tensor(j.data, { dtype = j.dtype })
  return t:reshape(j.shape)
end

-- the row's inputs as ds tensors (index inputs 1-based; float inputs require grad)
local function make_inputs(case)
  local env, floats = { ds = ds, F = ds.nn.functional, math = math }, {}
  for _, j in ipairs(case.inputs) do
    local x = from_json(j)
    if j.index then x = x + 1 end
    if j.transposed then x = x:transpose(-1, -2) end
    if x.dtype == "f32" or x.dtype == "f64" then x:requires_grad_(); floats[#floats + 1] = { j.name, x } end
    env[j.name] = x
  end
  return env, floats
end

-- results of a ds expression, flattened (lists of tensors spread out)
local function flatten(res, out)
  out = out or {}
  for _, r in ipairs(res) do
    if type(r) == "table" and not ds.is_tensor(r) then flatten(r, out) else out[#out + 1] = r end
  end
  return out
end

local function eval(expr, env)
  local f = assert(ds.loadstring("return " .. expr, "=" .. expr)) -- keeps the text: ds.trace converts f
  return flatten({ setfenv(f, env)() })
end

-- ops whose shape inference runs while fn runs (every D.call does it, eager or traced)
local function ops_run_by(fn)
  local seen, saved = {}, {}
  for _, def in ipairs(D.list) do
    saved[def] = def.infer
    if def.infer then def.infer = function(...) seen[def.name] = true; return saved[def](...) end end
  end
  local ok, err = pcall(fn)
  for _, def in ipairs(D.list) do def.infer = saved[def] end
  if not ok then error(err, 0) end
  return seen
end

local function compare(label, got, want)
  if want.scalar ~= nil then
    local g = ds.is_tensor(got) and got:item() or got
    assert(g == want.scalar, string.format("%s: %s vs PyTorch's %s", label, tostring(g), tostring(want.scalar)))
    return
  end
  assert(ds.is_tensor(got), label .. ": ds gave a " .. type(got) .. ", PyTorch a tensor")
  assert(got.dtype == want.dtype, string.format("%s: dtype %s vs PyTorch's %s", label, got.dtype, want.dtype))
  assert(S.equal(got._shape, want.shape), string.format("%s: shape %s vs PyTorch's %s", label,
    S.str(got._shape), S.str(want.shape)))
  local tol = TOL[want.dtype] or { 0, 0 }
  local ok, err = pcall(H.close, got, want.data, tol[1], tol[2])
  assert(ok, label .. ": " .. tostring(err))
end

local function check_case(case)
  local env, floats = make_inputs(case)
  local outs
  local seen = ops_run_by(function()
    outs = eval(case.ds, env)
    local loss
    for k, w in ipairs(case.weights) do
      if w ~= null then
        local y = outs[k]
        assert(ds.is_tensor(y) and y.requires_grad, "output " .. k .. " has no gradient in ds (PyTorch has one)")
        local term = (y * from_json(w)):sum()
        loss = loss and loss + term or term
      end
    end
    if case.grads then
      local xs = {}
      for i, f in ipairs(floats) do xs[i] = f[2] end
      local grads = ds.grad(loss, xs, { allow_unused = true })
      for i, f in ipairs(floats) do
        local want = case.grads[f[1]]
        if want == nil or want == null then
          assert(grads[i] == nil or grads[i]:abs():sum():item() == 0, "grad of " .. f[1] .. ": PyTorch has none")
        else
          assert(grads[i], "grad of " .. f[1] .. ": ds has none")
          compare("grad of " .. f[1], grads[i], want)
        end
      end
    end
  end)
  assert(#outs == #case.outputs, string.format("%d outputs vs PyTorch's %d", #outs, #case.outputs))
  for k, want in ipairs(case.outputs) do compare("output " .. k, outs[k], want) end
  -- traced and compiled forward equal eager bitwise (and record nodes for ops the fast eager paths skip);
  -- rows whose output shape depends on values (or that read values into Lua) must refuse to trace, saying so
  local traced = {}
  local list = {}
  for _, j in ipairs(case.inputs) do list[#list + 1] = env[j.name]:detach() end
  local function fn(...)
    local e = setmetatable({}, { __index = env })
    for i, j in ipairs(case.inputs) do e[j.name] = (select(i, ...)) end
    return unpack(eval(case.ds, e))
  end
  local all_tensors = true -- a Lua value (x:type(), allclose) is no graph output: such rows are eager only
  for _, y in ipairs(outs) do all_tensors = all_tensors and ds.is_tensor(y) end
  local ok, g = true, nil
  if all_tensors then ok, g = pcall(ds.trace, fn, { n = #list, unpack(list) }) end
  if not ok then
    local msg = tostring(g) -- a value-dependent shape, or a value read into Lua (ds.tensor of 0-d tensors)
    assert(msg:find("cannot be traced", 1, true) or msg:find("cannot read the value of an abstract tensor", 1, true),
      "trace fails: " .. msg)
  elseif g then
    for _, node in ipairs(g.nodes) do traced[node.op] = true end
    local cg = ds.compile(fn, list)
    for mode, run in pairs { traced = g, compiled = cg } do
      local res = { run(unpack(list)) }
      assert(#res == #outs, mode .. ": " .. #res .. " outputs, eager " .. #outs)
      for k, y in ipairs(res) do assert(H.bitwise(y, outs[k]), mode .. " output " .. k .. " differs from eager") end
    end
  end
  for _, op in ipairs(case.ops) do -- names of table ops must run; other names are API compositions
    assert(not D.by_name[op] or seen[op] or traced[op], "the row names " .. op .. " but does not run it")
  end
end

local cases = H.fixture("diff.json")
local rows = read_rows()

describe("differential harness against PyTorch", function()
  it("the fixture is current (regenerate: /usr/bin/python3 tests/gen_diff_fixtures.py)", function()
    assert.equal(#rows, #cases)
    for i, r in ipairs(rows) do
      local c = cases[i]
      assert(table.concat(c.ops, " ") == r[1]:gsub("%s+", " ") and c.inputs_text == r[2]
        and c.ds == r[3] and c.torch == r[4], "row " .. i .. " differs from the fixture: " .. r[3])
    end
  end)
  for i, case in ipairs(cases) do
    if not case.skip then
      it(table.concat(case.ops, " ") .. ": " .. case.ds, function() check_case(case) end)
    end
  end
end)

describe("every op has a differential row", function()
  local named = {}
  for _, case in ipairs(cases) do for _, op in ipairs(case.ops) do named[op] = true end end
  for _, def in ipairs(D.list) do
    if not def.internal then
      it(def.name, function()
        assert(named[def.name], def.name .. ": no row in " .. ROWS .. " (add one: ops | inputs | ds | torch)")
      end)
    end
  end
end)
