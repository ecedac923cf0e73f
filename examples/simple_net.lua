-- examples/simple_net.lua: Paddle's SimpleNet (Linear(10, 3) + y) traced with specs {"batch", 10} and {3},
-- printed as IR, and run at batch sizes 1, 7 and 64 (one graph: the batch dim is symbolic), equal to eager.
-- `--dot FILE` also writes the graph as Graphviz text (make graph-demo renders it to SVG).
local ds = require("ds")
local nn = ds.nn

local SimpleNet = nn.Module:extend("SimpleNet")
function SimpleNet:init() self.linear = nn.Linear(10, 3) end
function SimpleNet:forward(x, y) return self.linear(x) + y end

ds.manual_seed(22)
local net = SimpleNet()
net:eval()

local g = ds.trace(net, { ds.spec({ "batch", 10 }, "f32", "x"), ds.spec({ 3 }, "f32", "y") })
print(g)

local y = ds.rand(3)
for _, batch in ipairs { 1, 7, 64 } do
  local x = ds.rand(batch, 10)
  local out = g(x, y)
  local same = out:eq(net(x, y)):all():item()
  print(string.format("batch %2d: output %s, equal to eager: %s", batch, require("ds.shape").str(out.shape), tostring(same)))
end

for i = 1, #arg do
  if arg[i] == "--dot" and arg[i + 1] then
    local f = assert(io.open(arg[i + 1], "w"))
    f:write(g:to_dot())
    f:close()
    print("wrote " .. arg[i + 1])
  end
end
