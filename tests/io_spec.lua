-- io_spec.lua: ds.save / ds.load: round trips bit for bit (also in a fresh process without the model
-- code), atomic writes, and clear errors for truncated, corrupted and hand-edited files.
local ds = require("ds")
local H = require("helpers")
local cjson = require("cjson")
local nn = ds.nn

local dir = H.tmp_dir()


local function mlp() return H.mlp(1, 8, 16, 4) end

describe("io: save/load round trip", function()
  it("a module with a dynamic batch dim: loaded == compiled == eager, bitwise", function()
    local net = mlp()
    local cg = ds.compile(net, { ds.spec({ "batch", 8 }, "f32", "x") })
    ds.save(cg, dir .. "/mlp")
    local m = ds.load(dir .. "/mlp")
    for _, b in ipairs { 1, 5 } do
      local x = ds.randn(b, 8)
      local want = net(x)
      assert(H.bitwise(cg(x), want))
      assert(H.bitwise(m(x), want))
    end
    assert.truthy(tostring(m):find("matmul_packed_ep", 1, true))   -- frozen weights, prepacked
  end)

  it("constants, several outputs, integer inputs and views survive", function()
    local w = ds.randn(6, 4)
    local f = function(ids, x)
      local e = ds.embedding(ids, w)
      return (e:transpose(1, 2) * 2.5):sum(1), x:narrow(2, 2, 2):clamp(-0.5, math.huge)
    end
    local ids, x = ds.tensor({ 1, 3, 6 }):astype("i64"), ds.randn(3, 4)
    local cg = ds.compile(f, { ids, x })
    ds.save(cg, dir .. "/multi")
    local m = ds.load(dir .. "/multi")
    local a1, a2 = m(ids, x)
    local b1, b2 = f(ids, x)
    assert(H.bitwise(a1, b1)); assert(H.bitwise(a2, b2))
  end)

  it("runs in a fresh process that never saw the model code", function()
    local net = mlp()
    ds.save(ds.compile(net, { ds.spec({ "batch", 8 }, "f32", "x") }), dir .. "/fresh")
    local x = ds.randn(3, 8)
    ds.save_state({ x = x }, dir .. "/fresh_in.safetensors")
    local script = string.format([[
      local ds = require("ds")
      local m = ds.load(%q)
      local x = ds.load_state(%q).x
      ds.save_state({ y = m(x) }, %q)
    ]], dir .. "/fresh", dir .. "/fresh_in.safetensors", dir .. "/fresh_out.safetensors")
    H.write_file(dir .. "/fresh.lua", script)
    local ok = os.execute(string.format("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit %s", dir .. "/fresh.lua"))
    assert.truthy(ok == 0 or ok == true)
    local y = ds.load_state(dir .. "/fresh_out.safetensors").y
    assert(H.bitwise(y, net(x)))
  end)

  it("a lazily compiled function (no specs) saves its one traced graph", function()
    local f = function(x) return (x * 2):exp():sum(1) end
    local lazy = ds.compile(f)
    local x = ds.randn(3, 4)
    lazy(x)
    ds.save(lazy, dir .. "/lazy")
    assert(H.bitwise(ds.load(dir .. "/lazy")(x), f(x)))
    lazy(ds.randn(5, 4))
    H.raises(function() ds.save(lazy, dir .. "/lazy2") end, "traced 2 times")
  end)

  it("control flow (cond, while_loop, print) is saved with its sub-graphs", function()
    local w = ds.randn(4)
    local f = function(x, n)
      local y = ds.cond(x:sum():gt(0), function(a) return a * w end, function(a) return a - w end, x)
      local i, acc = ds.while_loop(function(k, a) return k:lt(n) end, function(k, a) return k + 1, a * 0.5 + 1 end,
        { ds.tensor(0), y })
      return acc, i
    end
    local x, n = ds.randn(3, 4), ds.tensor(3)
    local cg = ds.compile(f, { x, n })
    ds.save(cg, dir .. "/control")
    local m = ds.load(dir .. "/control")
    for _, sign in ipairs { 1, -1 } do
      local xs = x:abs() * sign
      local a1, i1 = m(xs, n)
      local a2, i2 = f(xs, n)
      assert(H.bitwise(a1, a2)); assert(H.bitwise(i1, i2))
    end
    local doc = cjson.decode(H.read_file(dir .. "/control.json"))
    local found = false
    for _, node in ipairs(doc.nodes) do if node.op == "cond" and node.attrs.then_graph["$graph"] then found = true end end
    assert.truthy(found)
  end)

  it("writes through temporary files and leaves no temporaries behind", function()
    ds.save(ds.compile(mlp(), { ds.spec({ 2, 8 }, "f32", "x") }), dir .. "/atomic")
    local p = io.popen("ls -a " .. dir)
    local names = p:read("*a"); p:close()
    assert.falsy(names:find("%.tmp"))
    local doc = cjson.decode(H.read_file(dir .. "/atomic.json"))
    assert.are.equal(1, doc.format_version)
    assert.truthy(doc.params.file:match("^atomic%.%x%x%x%x%x%x%x%x%.safetensors$"))
    assert.truthy(#doc.nodes > 0 and doc.nodes[1].source)
  end)
end)

describe("io: bounded work", function()
  local function counter()
    -- counts to n one step at a time: a hostile file can make n huge
    return ds.compile(function(n)
      local i = ds.while_loop(function(k) return k:lt(n) end, function(k) return k + 1 end, { ds.tensor(0) })
      return i
    end, { ds.tensor(5) })
  end
  it("a loaded while_loop stops at max_loop_trips (default 1e6, a load option) with an error naming it", function()
    ds.save(counter(), dir .. "/loop")
    local function bound(m)
      for _, node in ipairs(m.base.nodes) do if node.op == "while_loop" then return node.attrs.max_trips end end
    end
    local m = ds.load(dir .. "/loop")
    assert.are.equal(5, m(ds.tensor(5)):item())
    assert.are.equal(1e6, bound(m))
    local small = ds.load(dir .. "/loop", { max_loop_trips = 10 })
    assert.are.equal(10, small(ds.tensor(10)):item())
    H.raises(function() small(ds.tensor(11)) end, "while_loop: more than 10 trips", "max_loop_trips")
    local unbounded = ds.load(dir .. "/loop", { max_loop_trips = math.huge })
    assert.are.equal(math.huge, bound(unbounded))
    assert.are.equal(20, unbounded(ds.tensor(20)):item())
    H.raises(function() ds.load(dir .. "/loop", { max_loop_trips = 0 }) end, "load", "max_loop_trips", "positive integer")
    H.raises(function() ds.load(dir .. "/loop", { max_trips = 3 }) end, "unknown option 'max_trips'")
  end)
  it("the loop's own max_trips attr in the file is honoured (the smaller bound wins) and checked", function()
    ds.save(counter(), dir .. "/loop2")
    local doc = cjson.decode(H.read_file(dir .. "/loop2.json"))
    doc.nodes[1].attrs.max_trips = 3
    H.write_file(dir .. "/loop2.json", cjson.encode(doc))
    local m = ds.load(dir .. "/loop2")
    assert.are.equal(3, m(ds.tensor(3)):item())
    H.raises(function() m(ds.tensor(4)) end, "while_loop: more than 3 trips")
    doc.nodes[1].attrs.max_trips = -2
    H.write_file(dir .. "/loop2.json", cjson.encode(doc))
    H.raises(function() ds.load(dir .. "/loop2") end, "node 1 (while_loop", "max_trips must be a positive integer")
  end)
  it("FIFOs, devices and directories are refused before they are opened for reading", function()
    os.execute("mkfifo " .. dir .. "/fifo.json " .. dir .. "/fifo2.safetensors && mkdir -p " .. dir .. "/adir.json")
    H.raises(function() ds.load(dir .. "/fifo") end, "fifo.json", "not a regular file (a FIFO)")
    H.raises(function() ds.load(dir .. "/adir") end, "adir.json", "a directory")
    H.raises(function() ds.load_state(dir .. "/fifo2.safetensors") end, "fifo2.safetensors", "a FIFO")
    H.raises(function() ds.load_state("/dev/zero") end, "/dev/zero", "a device")
    H.raises(function() ds.load_state(dir) end, "a directory")
  end)
end)

describe("io: bad files give clear errors", function()
  local base = dir .. "/bad"
  local json, params, params_path
  setup(function()
    ds.save(ds.compile(mlp(), { ds.spec({ "batch", 8 }, "f32", "x") }), base)
    json = H.read_file(base .. ".json")
    params_path = dir .. "/" .. cjson.decode(json).params.file
    params = H.read_file(params_path)
  end)
  local function with(j, p, ...)
    H.write_file(base .. ".json", j); H.write_file(params_path, p)
    local err = H.raises(function() ds.load(base) end, ...)
    H.write_file(base .. ".json", json); H.write_file(params_path, params)
    return err
  end
  local function edit(fn)
    local doc = cjson.decode(json)
    fn(doc)
    return cjson.encode(doc)
  end

  it("missing files", function()
    H.raises(function() ds.load(dir .. "/nothing_here") end, "cannot open", "nothing_here.json")
  end)
  it("truncated graph file and truncated params", function()
    with(json:sub(1, 100), params, "not valid JSON")
    with(json, params:sub(1, #params - 10), "bytes", "truncated")
  end)
  it("corrupted params (checksum)", function()
    local p = params:sub(1, 200) .. string.char((params:byte(201) + 1) % 256) .. params:sub(202)
    with(json, p, "checksum")
  end)
  it("format version and unknown ops", function()
    with(edit(function(d) d.format_version = 99 end), params, "format version 99", "reads version 1")
    with(edit(function(d) d.nodes[2].op = "frobnicate" end), params, "node 2", "unknown op 'frobnicate'")
  end)
  it("a params file with tensors the graph does not name, or absurd shapes, fails before tensors are made", function()
    local tensors = ds.load_state(params_path)
    tensors.extra = ds.zeros(2)
    ds.save_state(tensors, dir .. "/extra.safetensors")
    local p = H.read_file(dir .. "/extra.safetensors")
    with(edit(function(d) d.params.bytes = #p; d.params.crc32 = string.format("%08x", tonumber(require("ds.ffi").C.ds_crc32(p, #p))) end),
      p, "holds tensor 'extra' that the graph does not name")
    -- [0, 2^40, 2^40]: no bytes, but its strides would overflow
    local hdr = '{"w":{"dtype":"F32","shape":[0,1099511627776,1099511627776],"data_offsets":[0,0]}}'
    hdr = hdr .. string.rep(" ", (8 - #hdr % 8) % 8)
    local n = #hdr
    local len = ""
    for _ = 1, 8 do len = len .. string.char(n % 256); n = math.floor(n / 256) end
    H.write_file(dir .. "/huge.safetensors", len .. hdr)
    H.raises(function() ds.load_state(dir .. "/huge.safetensors") end, "tensor 'w'", "too large")
  end)
  it("hand-edited attrs, shapes, ids", function()
    with(edit(function(d) d.nodes[1].attrs.dim0 = "x" end), params, "node 1 (transpose", "dim0")
    with(edit(function(d) d.nodes[1].attrs.bogus = 1 end), params, "unknown option 'bogus'")
    with(edit(function(d) d.nodes[2].outputs[1].shape = { "batch", 17 } end), params, "node 2 (matmul", "the op gives")
    with(edit(function(d) d.nodes[2].inputs = { 1, 999 } end), params, "node 2", "used before it is defined")
    with(edit(function(d) d.outputs = { 12345 } end), params, "output 1", "used before it is defined")
    with(edit(function(d) d.state[1].shape = { 3, 3 } end), params, "state 1", "params file has")
    with(edit(function(d) d.inputs[1].shape = { "batch**", 8 } end), params, "input 1", "dim")
  end)
end)

describe("io: the C embedding API (name.plan, src/model.c)", function()
  local ffi = require("ffi")
  local C = require("ds.ffi").C
  it("examples/embed/predict (make embed) prints and writes the same bits as ds.load", function()
    local lib = os.getenv("DS_LIB")
    local build = lib and lib:match("^(.*)/[^/]*$") or "build"
    -- -o: use the library as built (do not rebuild it for sources edited since); a sanitized library
    -- (make test-asan) needs the program linked with the sanitizers too
    local cc = build:find("asan", 1, true) and " CC='cc -fsanitize=address,undefined'" or ""
    -- make and the compiler run without make test-asan's sanitizer preload (they are not built for it)
    local ok = os.execute(string.format("env -u LD_PRELOAD make -s BUILD=%s%s -o %s/libds.so embed >/dev/null",
      build, cc, build))
    assert.truthy(ok == 0 or ok == true)
    ds.manual_seed(3)
    local net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    net:eval()
    ds.save(ds.compile(net, { ds.spec({ 3, 8 }, "f32", "x") }), dir .. "/embed")
    local x = ds.randn(3, 8)
    H.write_file(dir .. "/x.raw", ffi.string(x:data_ptr(), 3 * 8 * 4))
    local p = io.popen(string.format("%s/predict %s %s -o %s", build, dir .. "/embed", dir .. "/x.raw", dir .. "/y.raw"))
    local text = p:read("*a"); p:close()
    assert.truthy(text:find("output 1: f32 (3,4)", 1, true))
    local y = ds.load(dir .. "/embed")(x)
    assert.are.equal(ffi.string(y:data_ptr(), 3 * 4 * 4), H.read_file(dir .. "/y.raw"))
  end)
  it("the plan file has its own checksum and names its elementwise ops: other numbering is refused by name", function()
    local net = mlp()
    ds.save(ds.compile(net, { ds.spec({ 2, 8 }, "f32", "x") }), dir .. "/sealed")
    local plan = H.read_file(dir .. "/sealed.plan")
    local HEADER, OPNAME = ffi.sizeof("ds_planfile_header"), ffi.sizeof("ds_planfile_opname")
    local function reseal(bytes)
      local h = ffi.new("ds_planfile_header")
      ffi.copy(h, bytes, HEADER)
      local body = bytes:sub(HEADER + 1)
      h.body_bytes = #body; h.body_crc32 = C.ds_crc32(body, #body)
      return ffi.string(h, HEADER) .. body
    end
    local function load_with(bytes, ...)
      H.write_file(dir .. "/sealed.plan", bytes)
      assert.truthy(C.ds_model_load(dir .. "/sealed") == nil)
      local err = require("ds.ffi").last_error()
      for _, want in ipairs { ... } do assert.truthy(err:find(want, 1, true), err .. " lacks " .. want) end
    end
    local last = #plan - 3
    load_with(plan:sub(1, last - 1) .. string.char((plan:byte(last) + 1) % 256) .. plan:sub(last + 1), "checksum", "sealed.plan")
    load_with(plan:sub(1, #plan - 8), "truncated")
    -- opcode 0 renamed: this engine has no such op
    local name0 = ffi.string(plan:sub(HEADER + 1, HEADER + OPNAME))
    local renamed = plan:sub(1, HEADER) .. "frobnicate" .. string.rep("\0", OPNAME - 10) .. plan:sub(HEADER + OPNAME + 1)
    load_with(reseal(renamed), "elementwise op 'frobnicate'", "does not have")
    -- opcodes 0 and 1 swapped: the numbers differ from this engine's
    local op1 = plan:sub(HEADER + OPNAME + 1, HEADER + 2 * OPNAME)
    local swapped = plan:sub(1, HEADER) .. op1 .. plan:sub(HEADER + 1, HEADER + OPNAME) .. plan:sub(HEADER + 2 * OPNAME + 1)
    load_with(reseal(swapped), "is opcode 0 in the plan and 1 in this libds")
    assert.truthy(#name0 > 0)
    H.write_file(dir .. "/sealed.plan", plan)
    local m = C.ds_model_load(dir .. "/sealed")
    assert.truthy(m ~= nil)
    C.ds_model_free(m)
  end)
  it("a dynamic graph saves one plan per shape it was called with; the C API picks by shape", function()
    local net = mlp()
    local cg = ds.compile(net, { ds.spec({ "batch", 8 }, "f32", "x") })
    local xs = { ds.randn(2, 8), ds.randn(5, 8) }
    local want = { cg(xs[1]), cg(xs[2]) }
    ds.save(cg, dir .. "/dyn")
    local m = C.ds_model_load(dir .. "/dyn")
    assert.truthy(m ~= nil)
    assert.are.equal(1, C.ds_model_num_inputs(m))
    assert.are.equal(2, C.ds_model_num_plans(m))
    for k = 1, 2 do
      local out = ds.empty(xs[k]:size(1), 4)
      local ins = ffi.new("const ds_tensor*[1]", { xs[k]._c })
      local outs = ffi.new("ds_tensor*[1]", { out._c })
      assert.are.equal(0, C.ds_model_run(m, ins, outs))
      assert(H.bitwise(out, want[k]))
    end
    local bad, out = ds.randn(3, 8), ds.empty(3, 4)
    assert.are_not.equal(0, C.ds_model_run(m, ffi.new("const ds_tensor*[1]", { bad._c }), ffi.new("ds_tensor*[1]", { out._c })))
    assert.truthy(require("ds.ffi").last_error():find("no plan for these input shapes", 1, true))
    C.ds_model_free(m)
    assert.truthy(C.ds_model_load(dir .. "/nothing") == nil)
    assert.truthy(require("ds.ffi").last_error():find("cannot open", 1, true))
  end)
end)
