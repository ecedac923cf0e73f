-- tests/fuzz/make_seeds.lua: the seed corpora of the loader fuzzers (tests/fuzz/*_fuzz.c): saved models
-- (an MLP with a dynamic batch, a graph with cond and while_loop, a loop alone, integer inputs and views) as fuzzer
-- inputs: flag byte 1 (reseal), u32 length, graph JSON or plan, params bytes; the same graphs exported
-- by ds.onnx.export (where they have an ONNX form), the small PyTorch-exported ONNX fixtures and one-node
-- models on the paths hostile files took (integer attributes, folded consts, int64 past 2^53, Resize's sizes,
-- names defined twice) as onnx_fuzz's inputs (the file as it is).
-- usage: luajit tests/fuzz/make_seeds.lua OUT_DIR  (writes OUT_DIR/graph/*, OUT_DIR/plan/*, OUT_DIR/onnx/*)
local ds = require("ds")
local cjson = require("cjson")
local nn = ds.nn

local out = arg[1] or error("usage: make_seeds.lua OUT_DIR", 0)
os.execute("mkdir -p '" .. out .. "/graph' '" .. out .. "/plan' '" .. out .. "/models' '" .. out .. "/onnx'")

local function read(path) local f = assert(io.open(path, "rb")); local s = f:read("*a"); f:close(); return s end
local function u32le(n) return string.char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256, math.floor(n / 16777216)) end

local function seed(name, compiled, call)
  if call then call(compiled) end
  local base = out .. "/models/" .. name
  ds.save(compiled, base)
  local json = read(base .. ".json")
  local params = read(out .. "/models/" .. cjson.decode(json).params.file)
  local f = assert(io.open(out .. "/graph/" .. name, "wb")); f:write("\1", u32le(#json), json, params); f:close()
  local ok, err = pcall(ds.onnx.export, compiled, out .. "/onnx/" .. name)
  if not ok then io.stderr:write("make_seeds: ", name, " has no ONNX seed: ", tostring(err), "\n") end
  local pf = io.open(base .. ".plan", "rb")
  if pf then
    local plan = pf:read("*a"); pf:close()
    f = assert(io.open(out .. "/plan/" .. name, "wb")); f:write("\1", u32le(#plan), plan, params); f:close()
  end
end

ds.manual_seed(1)
local mlp = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
mlp:eval()
seed("mlp", ds.compile(mlp, { ds.spec({ "batch", 6 }, "f32", "x") }), function(cg) cg(ds.randn(2, 6)); cg(ds.randn(3, 6)) end)
local w = ds.randn(5, 4)
seed("views", ds.compile(function(ids, x)
  local e = ds.embedding(ids, w)
  return (e:transpose(1, 2) * 2.5):sum(1), x:narrow(2, 2, 2):clamp(-0.5, 1):exp()
end, { ds.tensor({ 1, 3, 5 }):astype("i64"), ds.randn(3, 4) }))
seed("control", ds.compile(function(x, n)
  local y = ds.cond(x:sum():gt(0), function(a) return a * 2 end, function(a) return a - 1 end, x)
  local i, acc = ds.while_loop(function(k, a) return k:lt(n) end, function(k, a) return k + 1, a * 0.5 + 1 end, { ds.tensor(0), y })
  return acc, i
end, { ds.randn(2, 3), ds.tensor(3) }))
-- a while_loop alone (a C loop step in the plan file) whose body updates a captured tensor in place
local hist = ds.zeros(4)
seed("loop", ds.compile(function(x, n)
  local i, acc = ds.while_loop(function(k) return k:lt(n) end, function(k, a)
    hist:index_copy_(1, (k + 1):reshape(1), a:sum():reshape(1))
    return k + 1, a * 0.5 + 1
  end, { ds.tensor(0, { dtype = "i64" }), x })
  return acc, i
end, { ds.randn(2, 3), ds.tensor(3, { dtype = "i64" }) }))
-- torch.onnx.export's models, but not the 250 KB LeNet (past the fuzzer's -max_len)
for _, name in ipairs { "resblock", "bert" } do
  local f = assert(io.open(out .. "/onnx/torch_" .. name, "wb"))
  f:write(read("tests/fixtures/onnx/" .. name .. ".onnx")); f:close()
end
-- one-node models whose attributes and constant inputs the fuzzer mutates toward the limits
local proto = require("ds.onnx.proto")
local function vi(name, dims)
  local d = {}
  for i, v in ipairs(dims or {}) do d[i] = { dim_value = v } end
  return { name = name, type = { tensor_type = { elem_type = 1, shape = dims and { dim = d } or nil } } }
end
local function i64(name, vals) return { name = name, data_type = 7, dims = { #vals }, int64_data = vals } end
local function one(name, node, inputs, inits)
  node.output = node.output or { "y" }
  local bytes = proto.encode("ModelProto", { ir_version = 8, opset_import = { { version = 17 } }, graph = { name = "g",
    node = { node }, input = inputs or {}, initializer = inits or {}, output = { vi("y") } } })
  local f = assert(io.open(out .. "/onnx/node_" .. name, "wb")); f:write(bytes); f:close()
end
local function int(n, v) return { name = n, type = 2, i = v } end
one("layernorm", { op_type = "LayerNormalization", input = { "x", "s" }, attribute = { int("axis", -1) } }, { vi("x", { 2, 3 }) },
  { { name = "s", data_type = 1, dims = { 3 }, float_data = { 1, 1, 1 } } })
one("concat", { op_type = "Concat", input = { "c", "i" }, attribute = { int("axis", 0) } }, {}, { i64("c", { 1, 2, 3 }), i64("i", { 0 }) })
one("gather", { op_type = "Gather", input = { "c", "i" }, attribute = { int("axis", 0) } }, {}, { i64("c", { 1, 2, 3 }), i64("i", { 2 }) })
one("squeeze", { op_type = "Squeeze", input = { "x", "a" } }, { vi("x", { 1, 3 }) }, { i64("a", { 0 }) })
one("div", { op_type = "Div", input = { "c", "z" } }, {}, { i64("c", { 7 }), i64("z", { 2 }) })
one("big", { op_type = "Add", input = { "c", "z" } }, {}, { i64("c", { 9007199254740993LL }), i64("z", { 0 }) })
one("conv", { op_type = "Conv", input = { "x", "w" }, attribute = { { name = "kernel_shape", type = 7, ints = { 3, 3 } } } },
  { vi("x", { 1, 1, 6, 6 }) }, { { name = "w", data_type = 1, dims = { 1, 1, 3, 3 }, raw_data = string.rep("\0", 36) } })
one("resize", { op_type = "Resize", input = { "x", "", "s" } }, { vi("x", { 1, 1, 2, 2 }) },
  { { name = "s", data_type = 1, dims = { 4 }, float_data = { 1, 1, 2, 2 } } })
one("leaky", { op_type = "LeakyRelu", input = { "x" }, attribute = { { name = "alpha", type = 1, f = 0.1 } } }, { vi("x", { 2 }) })
print("seeds in " .. out)
