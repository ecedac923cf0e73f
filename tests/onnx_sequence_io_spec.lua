-- tests/onnx_sequence_io_spec.lua: ONNX models with sequence and optional graph inputs and outputs (a sequence
-- given and returned as a Lua list of tensors, an optional as its value or nil): each model written by
-- tests/onnx/sequence_io_models.py with onnx.helper, run eagerly and compiled against the outputs NumPy computed
-- there (ONNX Runtime's Node API takes tensors only).
local H = require("helpers")
local ds = require("ds")
local cjson = require("cjson")
local ort = require("onnx.ort")

local RTOL, ATOL = 1e-5, 1e-6
local dir = H.tmp_dir()
local made = os.execute(string.format("env -u LD_PRELOAD %s tests/onnx/sequence_io_models.py %q 2>%q/gen.err",
  ort.PYTHON, dir, dir))
assert(made == 0 or made == true, "sequence_io_models.py failed: " .. (io.open(dir .. "/gen.err") and
  H.read_file(dir .. "/gen.err") or ""))
local CASES = {}
for _, c in ipairs(cjson.decode(H.read_file(dir .. "/cases.json"))) do CASES[c.model] = c.calls end

-- a value of cases.json as ds values: a tensor, a Lua list, nil (an empty optional)
local function value(v)
  if v.none then return nil end
  if v.seq then
    local list = {}
    for i, x in ipairs(v.seq) do list[i] = value(x) end
    return list
  end
  local data = v.data
  if v.dtype == "bool" then
    data = {}
    for i, x in ipairs(v.data) do data[i] = x ~= 0 and x ~= false end
  end
  if #v.shape == 0 then return ds.tensor(data[1], { dtype = v.dtype }) end
  if #data == 0 then return ds.zeros(v.shape, { dtype = v.dtype }) end
  return ds.tensor(data, { dtype = v.dtype }):reshape(v.shape)
end

-- got equals want: tensors (dtype, shape, values), lists item by item, nil for an empty optional
local function same(got, want, what)
  if want == nil then
    assert(got == nil, what .. ": a value, expected an empty optional (nil)")
  elseif ds.is_tensor(want) then
    assert(ds.is_tensor(got), what .. ": not a tensor")
    assert.equal(want.dtype, got.dtype, what)
    assert.same(want.shape, got.shape, what)
    H.close(got, want, RTOL, ATOL)
  else
    assert(type(got) == "table" and not ds.is_tensor(got), what .. ": not a Lua list")
    assert.equal(#want, #got, what .. ": length")
    for i, w in ipairs(want) do same(got[i], w, what .. " item " .. i) end
  end
end

-- every call of the case through the model eagerly and compiled; returns the model
local function agrees(name)
  local m = ds.onnx.load(dir .. "/" .. name .. ".onnx")
  local cm = ds.compile(m, { freeze = true })
  for k, call in ipairs(CASES[name]) do
    local args = {}
    for i, v in ipairs(call.inputs) do args[i] = value(v) end
    local n = #call.inputs
    for how, f in pairs({ eager = m, compiled = cm }) do
      local got = { f(unpack(args, 1, n)) }
      for j, w in ipairs(call.outputs) do
        same(got[j], value(w), string.format("%s call %d %s output %d", name, k, how, j))
      end
    end
  end
  return m
end

describe("ONNX sequence and optional inputs and outputs against NumPy", function()
  it("a sequence input: one graph per length and item shapes, its items graph inputs", function()
    local m = agrees("seq_concat")
    assert.matches("one graph per the structure of xs; 2 traced", tostring(m), 1, true)
    local y = m({ ds.full({ 2, 3 }, 1), ds.full({ 1, 3 }, 2), ds.full({ 4, 3 }, 3) }) -- a known structure: no retrace
    assert.same({ 1, 1, 2, 3, 3, 3, 3 }, y:select(2, 1):totable())
    assert.matches("2 traced", tostring(m), 1, true)
  end)
  it("a sequence output, with a position given as a graph input (specialized on its value)", function()
    local m = agrees("seq_insert")
    assert.matches("the value of pos", tostring(m), 1, true)
  end)
  it("SequenceMap on a sequence input with a tensor input: two sequence outputs, also empty", function()
    agrees("seq_map")
  end)
  it("an optional tensor input given as a tensor or nil", function() agrees("opt_add") end)
  it("an optional sequence passed through: a list, an empty list, nil", function() agrees("opt_seq_identity") end)
  it("a model with tensor inputs and a sequence output returns a Lua list", function()
    local m = agrees("split_seq")
    assert.matches("ONNX model split_seq (sequence or optional outputs)", tostring(m), 1, true)
  end)
  it("a Loop carrying a sequence given as an input, its trip count a graph input", function() agrees("loop_seq") end)
end)

describe("ONNX sequence and optional inputs: bad arguments", function()
  local m = ds.onnx.load(dir .. "/seq_concat.onnx")
  it("a tensor where a sequence is expected", function()
    H.raises(function() m(ds.ones(2, 3)) end, "input 1 (xs) is a sequence: give a Lua list, got a tensor")
  end)
  it("an item of the wrong dtype", function()
    H.raises(function() m({ ds.ones(2, 3), ds.ones({ 2, 3 }, { dtype = "i64" }) }) end,
      "input 1 (xs), item 2 is i64; the model declares f32")
  end)
  it("a table that is not a list", function()
    H.raises(function() m({ a = ds.ones(2, 3) }) end, "give a Lua list (keys 1..n)")
  end)
  it("an empty sequence reaching ConcatFromSequence", function()
    H.raises(function() m({}) end, "ConcatFromSequence: the sequence is empty")
  end)
  it("nil for an optional is accepted, a number is not", function()
    local opt = ds.onnx.load(dir .. "/opt_add.onnx")
    H.raises(function() opt(3, ds.ones(3)) end, "input 1 (opt) must be a tensor, got number")
  end)
end)
