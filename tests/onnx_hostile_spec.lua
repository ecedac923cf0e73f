-- tests/onnx_hostile_spec.lua: hostile ONNX files (huge, negative and too many dims, raw_data shorter than
-- the shape, messages nested past the limit, unknown ops, missing inputs, cyclic graphs, garbage bytes)
-- are errors naming the file and what is wrong, before any large allocation; never a crash, a hang or a
-- Lua internal. (tests/fuzz/onnx_fuzz.c explores the rest under `make fuzz`.)
local H = require("helpers")
local ds = require("ds")

local describe_or_skip = ds.onnx and describe or pending
describe_or_skip("ds.onnx.load of hostile files", function()
  local proto = require("ds.onnx.proto")
  local dir = os.tmpname()
  os.execute("rm -f '" .. dir .. "' && mkdir -p '" .. dir .. "'")
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function vi(name, dims, elem_type)
    local d = {}
    for i, v in ipairs(dims or {}) do d[i] = { dim_value = v } end
    return { name = name, type = { tensor_type = { elem_type = elem_type or 1, shape = dims and { dim = d } or nil } } }
  end
  local function relu_of(x_dims) -- y = relu(x)
    return { node = { { op_type = "Relu", input = { "x" }, output = { "y" } } }, input = { vi("x", x_dims) }, output = { vi("y") } }
  end
  local function add_init(init) -- y = x + w, w an initializer
    return { node = { { op_type = "Add", input = { "x", "w" }, output = { "y" } } }, input = { vi("x", { 2 }) },
             output = { vi("y") }, initializer = { init } }
  end
  -- the load of graph (a GraphProto as a Lua table) or of raw bytes fails naming the file and each of ...
  local function refused(graph_or_bytes, ...)
    local path = dir .. "/m.onnx"
    local bytes = graph_or_bytes
    if type(bytes) == "table" then
      bytes.name = "g"
      bytes = proto.encode("ModelProto", { ir_version = 8, opset_import = { { domain = "", version = 17 } }, graph = bytes })
    end
    H.write_file(path, bytes)
    local ok, err = pcall(ds.onnx.load, path)
    assert.is_false(ok, "the file loaded")
    err = tostring(err)
    assert.truthy(err:find("ds.onnx.load: " .. path, 1, true), err)
    for _, want in ipairs { ... } do assert.truthy(err:find(want, 1, true), err) end
    assert.falsy(err:find("attempt to", 1, true), err)
  end

  it("refuses huge, negative and too many dims", function()
    refused(add_init({ name = "w", dims = { 2 ^ 31 }, data_type = 1, raw_data = "abcd" }),
      "initializer w: raw_data has 4 bytes, its shape 2147483648 of f32 needs 8589934592")
    refused(add_init({ name = "w", dims = { 2 ^ 40, 2 ^ 40, 0 }, data_type = 1 }), "too large")
    refused(add_init({ name = "w", dims = { -3 }, data_type = 1, float_data = { 1, 2, 3 } }), "initializer w has the invalid dim -3")
    refused(relu_of({ -5 }), "input x has the invalid dim -5")
    refused(relu_of({ 2 ^ 62, 2 ^ 62 }), "input x has the invalid dim")
    refused(relu_of({ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 }), "node 1 (Relu)", "at most 8 dims")
    refused({ node = { { op_type = "Reshape", input = { "x", "s" }, output = { "y" } } }, input = { vi("x", { 2 }) }, output = { vi("y") },
      initializer = { { name = "s", dims = { 2 }, data_type = 7, int64_data = { 2 ^ 40, 2 ^ 40 } } } }, "node 1 (Reshape)", "cannot reshape")
  end)

  it("refuses data shorter or longer than the shape", function()
    refused(add_init({ name = "w", dims = { 4 }, data_type = 1, raw_data = "12345678" }), "raw_data has 8 bytes, its shape 4 of f32 needs 16")
    refused(add_init({ name = "w", dims = { 2 }, data_type = 1, float_data = { 1, 2, 3 } }), "initializer w holds 3 values, its shape 2 needs 2")
  end)

  it("reads NaNs with payload bits in float_data as NaN (LuaJIT took them for other types)", function()
    local graph = add_init({ name = "w", dims = { 2 }, data_type = 1, float_data = { 1.5, 2.5 } })
    graph.name = "g"
    local bytes = proto.encode("ModelProto", { ir_version = 8, opset_import = { { domain = "", version = 17 } },
      graph = graph })
    local at = bytes:find("\0\0\192\63\0\0\32\64", 1, true)   -- 1.5f, 2.5f as packed little-endian floats
    assert.truthy(at)
    -- 0xFFF00001 and 0xFFFC0000: negative NaNs with payloads
    bytes = bytes:sub(1, at - 1) .. "\1\0\240\255\0\0\252\255" .. bytes:sub(at + 8)
    local path = dir .. "/nan.onnx"
    H.write_file(path, bytes)
    local y = ds.onnx.load(path)(ds.ones(2)):totable()
    assert.equal("number", type(y[1])); assert.equal("number", type(y[2]))
    assert.is_true(y[1] ~= y[1] and y[2] ~= y[2])
  end)

  it("refuses unknown ops, missing inputs and cyclic graphs, naming the node", function()
    refused({ node = { { op_type = "FooBar", input = { "x" }, output = { "y" } } }, input = { vi("x", { 2 }) }, output = { vi("y") } },
      "node 1 (FooBar)", "not supported")
    refused({ node = { { op_type = "Add", input = { "x" }, output = { "y" } } }, input = { vi("x", { 2 }) }, output = { vi("y") } },
      "node 1 (Add): it has no input 2; the op needs at least 2")
    refused({ node = { { op_type = "Relu", input = { "x", "x" }, output = { "y" } } }, input = { vi("x", { 2 }) }, output = { vi("y") } },
      "node 1 (Relu): it has 2 inputs; the op takes at most 1")
    refused({ node = { { op_type = "Relu", input = { "b" }, output = { "a" } }, { op_type = "Relu", input = { "a" }, output = { "b" } } },
      input = { vi("x", { 2 }) }, output = { vi("b") } }, "node 1 (Relu) reads b, which no node or input defines")
  end)

  it("refuses messages nested past the limit and bytes that are not a model", function()
    local leaf = { name = "e", node = { { op_type = "Relu", input = { "x" }, output = { "y" } } }, output = { vi("y") } }
    local g = leaf
    for i = 1, 80 do -- If inside If ...: 80 graphs deep
      g = { name = "b" .. i, output = { vi("y") }, node = { { op_type = "If", input = { "c" }, output = { "y" },
        attribute = { { name = "then_branch", type = 5, g = g }, { name = "else_branch", type = 5, g = leaf } } } } }
    end
    g.input = { vi("x", { 2 }), vi("c", {}, 9) }
    refused(g, "nested deeper than 64")
    refused("\255\255\255\255garbage", "is not a valid")
    refused("", "has no graph")
  end)

  it("knows the input counts of every op it reads (lua/ds/onnx/arity.lua, from ONNX's schemas)", function()
    local arity = require("ds.onnx.arity")
    for op in pairs(require("ds.onnx.import_ops").OPS) do
      assert.truthy(arity.ops[op], op .. " has no entry in lua/ds/onnx/arity.lua: run `make onnx-arity`")
    end
  end)
end)
