-- tests/onnx_hostile_spec.lua: hostile ONNX files (huge, negative and too many dims, raw_data shorter than
-- the shape, messages nested past the limit, too many nodes, repeated values or dims, files whose decoded form
-- would dwarf them, unknown ops, missing inputs, cyclic graphs, names defined twice, attributes out of range,
-- int64 past 2^53, garbage bytes) are errors naming the file, the node and the rule, before any large allocation;
-- never a crash, a hang or a Lua internal. (tests/fuzz/onnx_fuzz.c explores the rest under `make fuzz`.)
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

  -- protobuf's wire format, for files proto.encode would take long to build
  local varint = H.protobuf_varint
  local function field(tag, bytes) return string.char(tag) .. varint(#bytes) .. bytes end
  local function model_of(graph_bytes) return field(58, graph_bytes) .. field(66, "\16\17") end -- graph, opset 17

  it("bounds counts, nodes, dims and memory on the wire, before decoding (a 2 MB file took 905 MB)", function()
    local relu = field(10, "x") .. field(18, "y") .. field(34, "Relu")
    local cases = {
      { string.rep("\10\0", 1000000), "1000000 nodes", "proto.LIMITS.nodes" },                -- 2 MB of empty nodes
      { string.rep(field(10, relu), 1000000), "1000000 nodes", "proto.LIMITS.nodes" },          -- a 10^6-node chain
      { field(10, field(34, "Relu") .. string.rep("\42\0", 1000000)), "would take about", "proto.LIMITS.memory" },
      { string.rep(field(42, "\8\1\16\1"), 300000), "would take about", "proto.LIMITS.memory" }, -- initializers
      { field(90, field(10, "x") .. field(18, field(10, field(18, string.rep("\10\0", 1000000))))),
        "a tensor has 1000000 dims", "proto.LIMITS.dims" },
      { field(42, field(10, string.rep("\255\255\255\255\7", 5)) .. "\16\1"), "elements", "proto.LIMITS.elements" },
    }
    for _, c in ipairs(cases) do
      local bytes = model_of(c[1])
      collectgarbage()
      local before, t0 = collectgarbage("count"), os.clock()
      refused(bytes, c[2], c[3])
      assert.is_true(os.clock() - t0 < 2, c[3] .. ": took " .. (os.clock() - t0) .. " s")
      local grew = (collectgarbage("count") - before) * 1024 -- the file read back as a string, and little else
      assert.is_true(grew < 2 * #bytes + 2 ^ 23, c[3] .. ": the Lua heap grew by " .. grew .. " bytes")
    end
  end)

  local function int(name, v) return { name = name, type = 2, i = v } end
  local function ints(name, v) return { name = name, type = 7, ints = v } end
  local function i64(name, vals, dims) return { name = name, data_type = 7, dims = dims or { #vals }, int64_data = vals } end
  local function one(node, inputs, inits) -- a graph of one node with output y
    return { node = { node }, input = inputs or {}, initializer = inits or {}, output = { vi("y") } }
  end

  it("range-checks every integer attribute against the op's rules, naming the node and the rule", function()
    local scale = { name = "s", data_type = 1, dims = { 3 }, float_data = { 1, 1, 1 } }
    refused(one({ op_type = "LayerNormalization", input = { "x", "s" }, output = { "y" }, attribute = { int("axis", -2 ^ 31) } },
      { vi("x", { 2, 3 }) }, { scale }), "node 1 (LayerNormalization)", "axis = -2147483648 is out of range")
    refused(one({ op_type = "LayerNormalization", input = { "x", "s" }, output = { "y" }, attribute = { int("axis", -3) } },
      { vi("x", { 2, 3 }) }, { scale }), "node 1 (LayerNormalization)", "axis -3 is out of range for rank 2")
    for _, op in ipairs { "Gather", "Concat" } do
      for _, ax in ipairs { 99, 2 ^ 62, 1 } do -- on consts folded at import time
        refused(one({ op_type = op, input = { "c", "i" }, output = { "y" }, attribute = { int("axis", ax) } }, {},
          { i64("c", { 1, 2, 3 }), i64("i", { 0 }) }), "node 1 (" .. op .. ")", "out of range")
      end
    end
    refused(one({ op_type = "Squeeze", input = { "x", "a" }, output = { "y" } }, { vi("x", { 1, 3 }) }, { i64("a", { 99 }) }),
      "node 1 (Squeeze)", "axis 99 is out of range for rank 2")
    refused(one({ op_type = "Conv", input = { "x", "w" }, output = { "y" }, attribute = { ints("kernel_shape", { 5, 5 }) } },
      { vi("x", { 1, 1, 6, 6 }) }, { { name = "w", data_type = 1, dims = { 1, 1, 3, 3 }, raw_data = string.rep("\0", 36) } }),
      "node 1 (Conv)", "kernel_shape does not match the weight's shape")
    refused(one({ op_type = "DepthToSpace", input = { "x" }, output = { "y" }, attribute = { int("blocksize", 2 ^ 40) } },
      { vi("x", { 1, 4, 2, 2 }) }), "node 1 (DepthToSpace)", "blocksize = 1099511627776 is out of range")
    refused(one({ op_type = "Transpose", input = { "x" }, output = { "y" }, attribute = { ints("perm", { 99, 0 }) } },
      { vi("x", { 2, 2 }) }), "node 1 (Transpose)", "perm = 99 is out of range")
    refused(one({ op_type = "Resize", input = { "x", "", "s" }, output = { "y" } }, { vi("x", { 1, 1, 2, 2 }) },
      { { name = "s", data_type = 1, dims = { 4 }, float_data = { 1, 1, 1e9, 1e9 } } }), "node 1 (Resize)", "out of range")
  end)

  it("refuses names defined twice and attributes given twice (the last one won)", function()
    refused(one({ op_type = "LeakyRelu", input = { "x" }, output = { "y" },
      attribute = { { name = "alpha", type = 1, f = 0.1 }, { name = "alpha", type = 1, f = 0.5 } } }, { vi("x", { 2 }) }),
      "node 1 (LeakyRelu): attribute alpha is given twice")
    refused({ node = { { op_type = "Relu", input = { "x" }, output = { "y" } }, { op_type = "Neg", input = { "x" }, output = { "y" } } },
      input = { vi("x", { 2 }) }, output = { vi("y") } }, "node 2 (Neg) defines y, which node 1 (Relu) defines already")
    refused(one({ op_type = "Relu", input = { "x" }, output = { "x" } }, { vi("x", { 2 }) }),
      "node 1 (Relu) defines x, which graph input x defines already")
    refused(one({ op_type = "Identity", input = { "c" }, output = { "y" } }, {}, { i64("c", { 1 }), i64("c", { 2 }) }),
      "an initializer defines c, which an initializer defines already")
  end)

  it("keeps int64 constants past 2^53 exact or refuses them, and refuses integer division by a constant 0", function()
    local ffi = require("ffi")
    local big = 9007199254740993LL -- 2^53 + 1: a Lua number rounds it to 2^53
    for _, op in ipairs { "Identity", "Add", "Gather", "Unsqueeze" } do
      local node = { op_type = op, input = op == "Identity" and { "c" } or { "c", "z" }, output = { "y" } }
      local g = one(node, {}, { i64("c", { big, 1 }), i64("z", { 0 }) })
      g.output = { vi("y", nil, 7) }
      g.name = "g"
      local path = dir .. "/big.onnx"
      H.write_file(path, proto.encode("ModelProto", { ir_version = 8, opset_import = { { version = 17 } }, graph = g }))
      local ok, m = pcall(ds.onnx.load, path)
      if ok then
        local y = m():contiguous()
        assert.equal(big, ffi.cast("int64_t *", y:data_ptr())[0], op .. " rounded 2^53 + 1")
      else
        assert.truthy(tostring(m):find("cannot be folded exactly", 1, true), m)
      end
    end
    local g = one({ op_type = "Div", input = { "c", "z" }, output = { "y" } }, {}, { i64("c", { 7 }), i64("z", { 0 }) })
    refused(g, "node 1 (Div)", "integer division by the constant 0")
  end)

  it("knows the input counts of every op it reads (lua/ds/onnx/arity.lua, from ONNX's schemas; com.microsoft's in import.lua)", function()
    local arity, microsoft = require("ds.onnx.arity"), require("ds.onnx.import").MICROSOFT
    for op in pairs(require("ds.onnx.import_ops").OPS) do
      assert.truthy(arity.ops[op] or microsoft[op], op .. " has no entry in lua/ds/onnx/arity.lua: run `make onnx-arity`")
    end
  end)
end)
