-- examples/trace_basics.lua: the TensorFlow article's tf.function cases in ds: print vs ds.print,
-- one graph per input signature (and per Lua constant), and ds.executing_eagerly().
local ds = require("ds")

-- case 2: plain print runs once, while the graph is built; ds.print is a graph node and runs every call
local function dynamic()
  ds.print("ds.print in dynamic code")
  print("print in dynamic code")
end
local static = ds.compile(function()
  ds.print("ds.print in static graph")
  print("print in static graph")
end)
for _ = 1, 3 do static() end
print(string.rep("*", 20))
for _ = 1, 3 do dynamic() end

-- case 3: a graph per signature: tensor dtype/shape, and the value of each Lua number
local static_x = ds.compile(function(x)
  ds.print(x)
  print(x)
  ds.print("ds.print in static graph")
  print("print in static graph")
end)
local function section(title) print(("-"):rep(8) .. " " .. title .. " " .. ("-"):rep(8)) end
section("input is an i32 tensor")
static_x(ds.tensor(1, { dtype = "i32" }))
static_x(ds.tensor(2, { dtype = "i32" }))
section("input is an f32 tensor")
static_x(ds.tensor(1.1))
static_x(ds.tensor(2.2))
section("input is an i32 tensor again")
static_x(ds.tensor(3, { dtype = "i32" }))
section("input is the Lua number 1")
static_x(1)
section("input is the Lua number 2")
static_x(2)
print("traces: " .. static_x:trace_count())

-- case 4: which mode is running
local function dynamic_mode()
  ds.print(ds.executing_eagerly())
  print(ds.executing_eagerly())
end
local static_mode = ds.compile(function()
  ds.print(ds.executing_eagerly())
  print(ds.executing_eagerly())
end)
for _ = 1, 3 do static_mode() end
print(string.rep("*", 20))
for _ = 1, 3 do dynamic_mode() end
