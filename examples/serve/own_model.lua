-- examples/serve/own_model.lua: serve a model of your own with ds.serve, no serving code: save it, start
-- bin/ds-serve on its directory, and POST its named inputs (docs/SERVING.md, "The JSON contract").
-- usage: luajit examples/serve/own_model.lua OUT_DIR
--   bin/ds-serve /tmp/ngx 8089 OUT_DIR start
--   curl -d '{"inputs": {"features": [[1, 2, 3, 4]], "extra": [[0.5, 0, 1]]}}' http://127.0.0.1:8089/predict
--   -> {"outputs": {"output1": [[0.33763399720192, 0.6623660326004]], "output2": [11.904583930969]}}
--   bin/ds-serve /tmp/ngx 8089 OUT_DIR stop
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local ds = require("ds")
local nn, F = ds.nn, ds.nn.functional

local out = arg[1] or error("usage: own_model.lua OUT_DIR", 0)
os.execute("mkdir -p '" .. out .. "'")
ds.manual_seed(1)
local a, b, head = nn.Linear(4, 16), nn.Linear(3, 16), nn.Linear(16, 2)

-- features (batch, 4) and extra (batch, 3) -> class probabilities (batch, 2), a score (batch)
local function forward(features, extra)
  local h = F.relu(a(features) + b(extra))
  return F.softmax(head(h), -1), h:sum(2)
end

-- the input names and the symbolic "batch" dim are all ds.serve needs: requests batch along it
ds.save(ds.compile(forward, { ds.spec({ "batch", 4 }, "f32", "features"), ds.spec({ "batch", 3 }, "f32", "extra") }),
  out .. "/mlp")
print("saved " .. out .. "/mlp: serve it with bin/ds-serve PREFIX PORT " .. out .. " start")
