-- tests/misuse_spec.lua: runs tools/misuse_fuzz.lua (every public function and Tensor method with bad
-- arguments) in its own process for a bounded time (DS_FUZZ_SECONDS, default 5): a crash or a hang fails,
-- as does an op of the op table without a fuzz target or an error that does not name the function.
local H = require("helpers")

describe("misuse fuzzer", function()
  local seconds = tonumber(os.getenv("DS_FUZZ_SECONDS")) or 5
  local out_path = os.tmpname()
  local cmd = string.format("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit tools/misuse_fuzz.lua %g 1 > %s 2>/dev/null; echo $?", seconds, out_path)
  local p = io.popen(cmd)
  local rc = tonumber(p:read("*a"))
  p:close()
  local out = H.read_file(out_path)
  os.remove(out_path)
  it("runs to its end (no crash) and finds no hang and no op without a target", function()
    assert.truthy(out:find("^misuse fuzz: %d+ calls"), "the fuzzer did not finish (crash?), exit " .. tostring(rc) .. ":\n" .. out)
    assert.is_true(rc == 0 or rc == 1)
    assert.falsy(out:find("instruction limit", 1, true), out)
    assert.falsy(out:find("op without a fuzz target", 1, true), out)
  end)
  it("finds no call failing with a Lua internal instead of an error naming the function", function()
    local raw = select(2, out:gsub("\n    %-> ", ""))
    assert.are.equal(0, raw, out)
  end)
end)

-- the calls the fuzzer first found failing with a Lua internal, each through the mechanism that now
-- checks it: C.export's declared signature, Module:extend's self and argument checks, options.check,
-- an optimizer method's instance check, the scheduler state check, backward's grad check
describe("bad arguments name the function", function()
  local ds = require("ds")
  local function fails_with(pattern, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok)
    err = tostring(err):gsub("^[^\n:]*:%d+: ", "") -- the caller's position
    assert.truthy(err:find(pattern), err)
    assert.falsy(tostring(err):find("attempt to", 1, true), tostring(err))
  end
  it("declared signatures of functions", function()
    local x = ds.zeros(2, 3)
    fails_with("^view_as: argument 2 must be a tensor, got nil", ds.view_as, x, nil)
    fails_with("^expand_as: argument 2 must be a tensor", x.expand_as, x, 1)
    fails_with("^ones_like: argument 2 must be a table or nil, got 1", ds.ones_like, x, 1)
    fails_with("^scaled_dot_product_attention: argument 1 must be a tensor", ds.scaled_dot_product_attention)
    fails_with("^arange: ", ds.arange, {})
    fails_with("^repeat: sizes must be", x.repeat_tensor, x, nil, 0)
    fails_with("^view: size 1 must be a number", ds.view, x, { {} })
    fails_with("^randn_like: argument 2 must be a table or nil, got %-1", ds.randn_like, x, -1)
    fails_with("^randint: options must be a table", ds.randint, 5, { 2 }, true)
    fails_with("^kaiming_uniform_: argument 1 must be a tensor", ds.nn.init.kaiming_uniform_, {})
    fails_with("^no_grad: argument 1 must be a function", ds.no_grad)
    fails_with("^trace: options must be a table", ds.trace, function(a) return a end, {}, 1)
    fails_with("^compile: options must be a table", ds.compile, function(a) return a end, nil, true)
  end)
  it("module methods check self and their arguments; constructors their arguments", function()
    local lin, x = ds.nn.Linear(3, 2), ds.zeros(2, 3)
    fails_with("^forward: expects a Linear as self %(call it as m:forward", lin.forward, x)
    fails_with("^forward: expects a Linear as self.*got a Conv2d", lin.forward, ds.nn.Conv2d(1, 2, 3), x)
    fails_with("^LSTM:forward: argument 1 must be a tensor, got nil", ds.nn.LSTM(3, 2).forward, ds.nn.LSTM(3, 2))
    fails_with("^NLLLoss: option 'weight' must be tensor, got 1", ds.nn.NLLLoss, 1) -- PyTorch's positional weight
    fails_with("^Softplus: option 'beta' must be a number, got boolean", ds.nn.Softplus, true)
    fails_with("^Linear.load_state_dict: keys must be parameter names", lin.load_state_dict, lin, { [1] = x })
    -- a method still runs through the check: the result is the module's
    assert.are.same({ 2, 2 }, lin:forward(x):size())
  end)
  it("optimizer and scheduler methods check that self is theirs; scheduler state is checked", function()
    local p = ds.nn.Parameter(ds.ones(2))
    local sgd = ds.optim.SGD({ p }, { lr = 0.1 })
    fails_with("^step: expects the optimizer as self", ds.optim.Adam.step, sgd)
    local sched = ds.optim.StepLR(sgd, { step_size = 2 })
    local cyclic = {}; cyclic.x = cyclic
    fails_with("^StepLR.load_state_dict: the state is nested too deep", sched.load_state_dict, sched, { base_lrs = { cyclic } })
    fails_with("^StepLR.load_state_dict: 'optimizer' is not a field", sched.load_state_dict, sched, { optimizer = {} })
    fails_with("^StepLR.load_state_dict: 'last_epoch' must be a number, got string", sched.load_state_dict, sched, { last_epoch = "a" })
    local sd = sched:state_dict()
    sched:step(); sched:step()
    sched:load_state_dict(sd)
    assert.are.equal(sd.last_epoch, sched.last_epoch)
  end)
  it("backward with a grad of the wrong shape or dtype names backward and both shapes", function()
    local w = ds.ones(2, 3):requires_grad_()
    local y = w * 2
    fails_with("^backward: the grad of output 1 has shape %(3%) and dtype f32, but the output has shape %(2,3%) and dtype f32",
      y.backward, y, ds.ones(3))
    fails_with("^backward: the grad of output 1 has shape %(2,3%) and dtype f64, but the output has shape %(2,3%) and dtype f32",
      y.backward, y, ds.ones(2, 3, { dtype = "f64" }))
    fails_with("^grad: the grad of output 1 has shape %(1,1,1,1,1,1,2,3%)", ds.grad, y, w, { grad_outputs = ds.ones(1, 1, 1, 1, 1, 1, 2, 3) })
    assert.is_nil(rawget(w, "grad")) -- nothing was accumulated
    y:backward(ds.ones(2, 3))
    assert.are.same({ { 2, 2, 2 }, { 2, 2, 2 } }, w.grad:totable())
  end)
end)
