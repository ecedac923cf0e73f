-- tests/pictures_spec.lua: ds.plot line charts, graph:to_svg / cg:to_svg (Graphviz), the profile as a
-- Chrome trace and a flame-style SVG, and model:summary. SVGs are checked for well-formed XML (Python's
-- parser) and rendered once to PNG with rsvg-convert.
local ds = require("ds")
local cjson = require("cjson")
local H = require("helpers")

local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
local CLEAN = "env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS "

local function read(path) local f = assert(io.open(path, "rb")); local s = f:read("*a"); f:close(); return s end

-- the file parses as XML with an <svg> root, and (when rsvg-convert is there) renders to a PNG
local function assert_svg(path)
  local ok = os.execute(CLEAN .. "/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; " ..
    "r = E.parse(sys.argv[1]).getroot(); sys.exit(0 if r.tag.endswith(\"svg\") else 1)' " .. path .. " 2>/dev/null")
  assert.equal(0, ok, path .. " is not well-formed SVG")
  if os.execute("command -v rsvg-convert >/dev/null 2>&1") == 0 then
    assert.equal(0, os.execute(CLEAN .. "rsvg-convert -o " .. path .. ".png " .. path))
    local png = read(path .. ".png")
    assert.equal("\137PNG", png:sub(1, 4))
  end
end

teardown(function() os.execute("rm -rf " .. dir) end)

describe("ds.plot", function()
  it("draws stacked panels with a line per series and a legend, breaking lines at NaN", function()
    local path = ds.plot.lines(dir .. "/curves.svg", {
      { title = "loss <train & test>", xlabel = "epoch", ylabel = "loss",
        series = { { name = "train", y = { 2.3, 1.1, 0 / 0, 0.6, 0.5 } }, { name = "test", x = { 1, 3, 5 }, y = { 2, 1, 0.7 } } } },
      { title = "lr", series = { { name = "lr", y = { 1e-3, 5e-4 } } } },
    })
    local svg = read(path)
    assert.truthy(svg:find("loss &lt;train &amp; test&gt;", 1, true)) -- text is escaped
    local _, lines = svg:gsub("<polyline", "")
    assert.equal(4, lines) -- train in two runs around the NaN, test, lr
    assert.truthy(svg:find(">train</text>", 1, true) and svg:find(">test</text>", 1, true))
    assert_svg(path)
  end)

  it("plots a history table, one panel per metric", function()
    local path = ds.plot.history(dir .. "/history.svg", { loss = { 1, 0.5, 0.25 }, accuracy = { train = { 0.5, 0.7, 0.8 }, test = { 0.4, 0.6, 0.7 } } })
    local svg = read(path)
    assert.truthy(svg:find(">accuracy</text>", 1, true) and svg:find(">loss</text>", 1, true))
    assert_svg(path)
  end)

  it("names what is wrong with the data", function()
    H.raises(function() ds.plot.lines(dir .. "/x.svg", {}) end, "plot: expects a list of panels")
    H.raises(function() ds.plot.lines(dir .. "/x.svg", { { series = { { y = { 1, "a" } } } } }) end, "plot: panel 1 series 1: y[2] is a string")
    H.raises(function() ds.plot.lines(dir .. "/x.svg", { { series = { { x = { 1 }, y = { 1, 2 } } } } }) end, "x has 1 values, y has 2")
    H.raises(function() ds.plot.lines(dir .. "/no/such/dir/x.svg", { { series = { { y = { 1 } } } } }) end, "plot: cannot write")
  end)
end)

describe("pictures of graphs and profiles", function()
  local function model()
    ds.manual_seed(1)
    local fc1, fc2 = ds.nn.Linear(8, 16), ds.nn.Linear(16, 4)
    return function(x) return ds.F.softmax(fc2(ds.relu(fc1(x)) * 2 + 1), -1) end
  end
  local spec = { ds.spec({ "batch", 8 }, "f32", "x") }

  it("graph:to_svg draws ops with their source lines as tooltips", function()
    local g = ds.trace(model(), spec)
    local path = g:to_svg(dir .. "/graph.svg")
    local svg = read(path)
    assert.truthy(svg:find("matmul", 1, true) or svg:find("linear", 1, true))
    assert.truthy(svg:find("pictures_spec.lua:%d+"))
    assert_svg(path)
  end)

  it("cg:to_svg groups each fused region in a cluster", function()
    local cg = ds.compile(model(), spec)
    local dot = cg:to_dot()
    assert.truthy(dot:find("subgraph cluster_", 1, true))
    assert.truthy(dot:find("(one kernel)", 1, true))
    local path = cg:to_svg(dir .. "/compiled.svg")
    assert_svg(path)
  end)

  it("the profile becomes a Chrome trace (steps end to end) and a flame-style SVG", function()
    local cg = ds.compile(model(), spec)
    local rows, total = cg:profile(3, ds.randn(4, 8))
    local trace = cjson.decode(read(ds.save_profile(rows, total, dir .. "/profile.json")))
    assert.equal(#rows, #trace.traceEvents)
    local t = 0
    for i, e in ipairs(trace.traceEvents) do
      assert.equal("X", e.ph)
      assert.equal(i, e.args.step)
      assert.is_true(math.abs(e.ts - t) < 1e-2)
      t = e.ts + e.dur
    end
    local svg_path = ds.save_profile(rows, total, dir .. "/profile.svg")
    assert.truthy(read(svg_path):find("compiled plan:", 1, true))
    assert_svg(svg_path)
    H.raises(function() ds.save_profile(rows, total, dir .. "/profile.txt") end, "save_profile: the path must end in .json")
  end)
end)

describe("model:summary", function()
  it("lists the called layers with output shapes and parameter counts, and the totals", function()
    local nn = ds.nn
    local m = nn.Sequential(nn.Conv2d(1, 6, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(6 * 14 * 14, 10))
    m[1].weight:requires_grad_(false)
    local s = m:summary({ 2, 1, 28, 28 })
    assert.equal(6 * 25 + 6 + 1176 * 10 + 10, s.total_params)
    assert.equal(6 + 1176 * 10 + 10, s.trainable_params)
    assert.same({ "Sequential", "Conv2d", "ReLU", "MaxPool2d", "Flatten", "Linear" },
      (function() local t = {}; for i, r in ipairs(s.rows) do t[i] = r.type end; return t end)())
    assert.equal("(2,6,14,14)", s.rows[4].output)
    assert.equal(156, s.rows[2].params)
    local text = tostring(s)
    assert.truthy(text:find("Total params: 11,926", 1, true))
    assert.truthy(text:find("1 (Conv2d)", 1, true))
    H.raises(function() m:summary("x") end, "summary: expects an input shape")
    -- the forwards are restored: the model runs as before
    assert.same({ 1, 10 }, m(ds.zeros(1, 1, 28, 28)).shape)
    assert.is_nil(rawget(m[1], "forward"))
  end)
end)
