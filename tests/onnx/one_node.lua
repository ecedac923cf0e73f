-- tests/onnx/one_node.lua: one-node ONNX models built from Lua (ds.onnx.proto), and the check that ds's
-- outputs of such a model, eagerly and compiled (freeze), equal ONNX Runtime's; for the ONNX import specs.
local H = require("helpers")
local ds = require("ds")
local ort = require("onnx.ort")
local proto = require("ds.onnx.proto")
local assert = require("luassert")

local M = {}
M.ELEM = { f32 = 1, u8 = 2, i32 = 6, i64 = 7, bool = 9, f64 = 11 }

-- an attribute of a node from a Lua value: integer, number, string, list of integers, or {floats = {...}}
function M.attribute(name, v)
  if type(v) == "string" then return { name = name, type = 3, s = v } end
  if type(v) == "table" and v.floats then return { name = name, type = 6, floats = v.floats } end
  if type(v) == "table" then return { name = name, type = 7, ints = v } end
  if v == math.floor(v) then return { name = name, type = 2, i = v } end
  return { name = name, type = 1, f = v }
end

--[[ c = {op, opset, attrs, inputs = {{name, tensor, dims = {...} (dim_params allowed), const = true} or
  {""} (an omitted optional input), ...}, outputs = number of outputs (named y1, y2, ...)} -> model bytes ]]
function M.model_bytes(c)
  local node = { op_type = c.op, input = {}, output = {}, attribute = {} }
  local graph = { name = "g", node = { node }, input = {}, output = {}, initializer = {} }
  for k, v in pairs(c.attrs or {}) do node.attribute[#node.attribute + 1] = M.attribute(k, v) end
  table.sort(node.attribute, function(a, b) return a.name < b.name end)
  for _, inp in ipairs(c.inputs) do
    local name, t = inp[1], inp[2]
    node.input[#node.input + 1] = name
    if name == "" then -- omitted
    elseif inp.const then
      local flat = t:reshape(-1):astype("f64"):totable()
      local field = t.dtype == "i64" and "int64_data" or t.dtype == "f32" and "float_data" or
        t.dtype == "f64" and "double_data" or "int32_data"
      graph.initializer[#graph.initializer + 1] = { name = name, dims = t.shape, data_type = M.ELEM[t.dtype],
        [field] = flat }
    else
      local dims = {}
      for i, d in ipairs(inp.dims or t.shape) do
        dims[i] = type(d) == "string" and { dim_param = d } or { dim_value = d }
      end
      graph.input[#graph.input + 1] = { name = name, type = { tensor_type = { elem_type = M.ELEM[t.dtype],
        shape = { dim = dims } } } }
    end
  end
  for i = 1, c.outputs or 1 do
    node.output[i] = "y" .. i
    graph.output[i] = { name = "y" .. i }
  end
  return proto.encode("ModelProto", { ir_version = 8, opset_import = { { domain = "", version = c.opset } },
    graph = graph })
end

-- the graph inputs of c (not constants, not omitted) as ORT feeds and as the list ds takes
local function feeds_of(inputs)
  local feeds, args = {}, {}
  for _, inp in ipairs(inputs) do
    if inp[1] ~= "" and not inp.const then feeds[inp[1]] = inp[2]; args[#args + 1] = inp[2] end
  end
  return feeds, args
end

--[[ ds's outputs of the model at path, eagerly and compiled (freeze), equal ONNX Runtime's on `inputs` (as in
  model_bytes): the same dtype and shape, integers exactly, floats within rtol / atol (default 1e-5) ]]
function M.agrees_at(path, inputs, noutputs, what, rtol, atol)
  local feeds, args = feeds_of(inputs)
  local r = ort.run({ { model = path, feeds = { feeds } } })[1]
  assert(not r.error, what .. ": ONNX Runtime: " .. tostring(r.error))
  local g = ds.onnx.load(path)
  for _, run in ipairs({ { "eager", g }, { "compiled", ds.compile(g, { freeze = true }) } }) do
    local got = { run[2](unpack(args)) }
    for i = 1, noutputs do
      local want, y = r.outputs[1][r.names[i]], got[i]
      local label = string.format("%s (%s) output %d", what, run[1], i)
      assert.equal(want.dtype, y.dtype, label)
      assert.same(want.shape, y.shape, label)
      if want:numel() > 0 then
        if want.dtype == "f32" or want.dtype == "f64" then H.close(y, want, rtol or 1e-5, atol or 1e-5)
        else assert.same(want:totable(), y:totable(), label) end
      end
    end
  end
end

--[[ the model at path run on each feed list ({{name, tensor}, ...}, in the model's input order) by ONNX Runtime
  and by ds, eagerly, compiled (freeze) and, with opts.loaded = a path prefix, after ds.save/ds.load there:
  outputs in ORT's output order, dtype and shape equal, values within opts.rtol / opts.atol (default 1e-5).
  Returns the imported model and its compiled form. ]]
function M.agrees_feeds(path, feeds_list, opts)
  opts = opts or {}
  local m = ds.onnx.load(path)
  local cm = ds.compile(m, { freeze = true })
  local runs = {}
  for i, feeds in ipairs(feeds_list) do
    local named = {}
    for _, f in ipairs(feeds) do named[f[1]] = f[2] end
    runs[i] = { model = path, feeds = { named } }
  end
  local ref = ort.run(runs)
  local loaded
  if opts.loaded then
    ds.save(cm, opts.loaded)
    loaded = ds.load(opts.loaded)
  end
  for i, feeds in ipairs(feeds_list) do
    assert(not ref[i].error, path .. ": ONNX Runtime: " .. tostring(ref[i].error))
    local args = {}
    for k, f in ipairs(feeds) do args[k] = f[2] end
    local results = { eager = { m(unpack(args)) }, compiled = { cm(unpack(args)) } }
    if loaded then results.loaded = { loaded(unpack(args)) } end
    for how, got in pairs(results) do
      for k, nm in ipairs(ref[i].names) do
        local want, y = ref[i].outputs[1][nm], got[k]
        local label = string.format("%s (%s, feed %d) output %s", path, how, i, nm)
        assert(y, label .. ": missing")
        assert.equal(want.dtype, y.dtype, label)
        assert.same(want.shape, y.shape, label)
        if want:numel() > 0 then H.close(y, want, opts.rtol or 1e-5, opts.atol or 1e-5) end
      end
    end
  end
  return m, cm
end

-- c (model_bytes's table, with a name) written under dir and checked by agrees_at
function M.agrees(c, dir, rtol, atol)
  local path = string.format("%s/%s.onnx", dir, c.name)
  H.write_file(path, M.model_bytes(c))
  M.agrees_at(path, c.inputs, c.outputs or 1, c.name, rtol, atol)
end

return M
