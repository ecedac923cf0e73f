-- tests/convert_rnn_spec.lua: the issue's RNN, written with a plain Lua `for t = 1, T` over a tensor-length
-- sequence, trains the same bits four ways: eagerly through ds.convert, as a traced graph, compiled, and loaded
-- from disk (ds.save / ds.load of the compiled training step), and its loss falls.
local ds = require("ds")
local H = require("helpers")

local same = H.bitwise
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)

local RNN = ds.nn.Module:extend("RNN")
function RNN:init()
  self.wx = ds.nn.Linear(3, 4)
  self.wh = ds.nn.Linear(4, 4, { bias = false })
  self.out = ds.nn.Linear(4, 1)
end
function RNN:forward(xs, T)
  local h = ds.zeros({ 4 })
  for t = 1, T do
    h = (self.wx(xs[t]) + self.wh(h)):tanh()
  end
  return self.out(h)
end

-- a fresh RNN (same seed, same weights) and its SGD training step; forward: how the step runs the model
local function trainer(forward)
  ds.manual_seed(7)
  local net = RNN()
  local opt = ds.optim.SGD(net:parameters(), { lr = 0.1 })
  local function step(xs, T, y)
    opt:zero_grad()
    local loss = ((forward(net, xs, T) - y) ^ 2):sum()
    loss:backward()
    opt:step()
    return loss
  end
  return net, step
end

local specs = { ds.spec({ 5, 3 }), ds.spec({}, "i64"), ds.spec({ 1 }) }
local XS = ds.tensor({ { 0.1, 0.2, 0.3 }, { -0.5, 0.4, 0.1 }, { 0.3, 0.3, -0.2 }, { 0.9, -0.1, 0.0 }, { 0, 0, 1 } })
local Y = ds.tensor({ 0.5 })

describe("a converted RNN over a tensor-length sequence", function()
  it("trains eagerly, traced, compiled and loaded with the same losses and weights, bit for bit", function()
    local net_e, step_e = trainer(ds.convert(RNN.forward))
    local call = function(net, xs, T) return net(xs, T) end -- converted by ds.trace / ds.compile
    local net_t, step_t = trainer(call)
    local traced = ds.trace(step_t, specs)
    local net_c, step_c = trainer(call)
    local compiled = ds.compile(step_c, specs)
    local _, step_l = trainer(call)
    ds.save(ds.compile(step_l, specs), dir .. "/rnn")
    local loaded = ds.load(dir .. "/rnn")
    -- the loop's captured weights are the graph's own state entries (no second copy for the backward), plus the
    -- optimizer's hyper-parameters (read at every call)
    assert.equal(6, #traced.state)
    local first, last
    for it = 1, 6 do
      local T = ds.tensor(it % 2 == 0 and 5 or 3, { dtype = "i64" })
      local le = step_e(XS, T, Y)
      for way, f in pairs { traced = traced, compiled = compiled, loaded = loaded } do
        assert.is_true(same(le, f(XS, T, Y)), way .. " loss at step " .. it)
      end
      first = first or le:item()
      last = le:item()
    end
    assert.is_true(last < first / 2, "the loss falls: " .. first .. " -> " .. last)
    local want = net_e:state_dict()
    for way, net in pairs { traced = net_t, compiled = net_c } do
      for name, p in pairs(net:state_dict()) do assert.is_true(same(want[name], p), way .. " " .. name) end
    end
    for _, s in ipairs(loaded.ir.state) do
      local name = s.name:gsub("^net%.", "")
      assert.is_true(same(want[name], s.tensor), "loaded " .. s.name)
    end
    local ops = {}
    for _, n in ipairs(traced.nodes) do ops[n.op] = (ops[n.op] or 0) + 1 end
    assert.equal(2, ops.while_loop) -- the forward loop and the reverse loop of its gradient
  end)
end)

teardown(function() os.execute("rm -rf " .. dir) end)
