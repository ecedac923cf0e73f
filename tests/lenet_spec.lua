-- tests/lenet_spec.lua: the LeNet-5 example: shapes, a short real training run whose loss falls,
-- its weights surviving ds.save_state / ds.load_state, its compiled predictor.
local ds = require("ds")
local H = require("helpers")
local lenet = dofile("examples/lenet_fashion_mnist.lua")

describe("LeNet-5 on Fashion-MNIST", function()
  local train = ds.data.fashion_mnist { split = "train" }

  it("maps (N,1,28,28) images to (N,10) logits with LeNet-5's 61706 parameters", function()
    ds.manual_seed(22)
    local model = lenet.LeNet()
    local x = lenet.scale(train.images:narrow(1, 1, 3), nil)
    assert.same({ 3, 1, 28, 28 }, x.shape)
    assert.equal(0, x:min():item())
    local top = x:max():item()
    assert.is_true(top > 0.9 and top <= 1, "max pixel " .. top)
    assert.same({ 3, 10 }, model(x).shape)
    local n = 0
    for _, p in ipairs(model:parameters()) do n = n + p:numel() end
    assert.equal(6 * 25 + 6 + 16 * 6 * 25 + 16 + 400 * 120 + 120 + 120 * 84 + 84 + 84 * 10 + 10, n)
  end)

  it("trains: the loss over 12 batches of 128 falls, and the weights round-trip a state file", function()
    ds.manual_seed(22)
    local model = lenet.LeNet()
    local opt = ds.optim.Adam(model:parameters(), { lr = 3e-3 })
    local loader = ds.data.DataLoader(train, { batch_size = 128, shuffle = true, transform = lenet.scale })
    local losses = {}
    for i, x, y in loader:batches() do
      local loss = ds.nn.functional.cross_entropy(model(x), y)
      opt:zero_grad()
      loss:backward()
      opt:step()
      losses[i] = loss:item()
      if i == 12 then break end
    end
    assert.is_true(math.abs(losses[1] - math.log(10)) < 0.2) -- starts near chance
    local first = (losses[1] + losses[2] + losses[3]) / 3
    local last = (losses[10] + losses[11] + losses[12]) / 3
    assert.is_true(last < first - 0.5, string.format("loss %.3f -> %.3f", first, last))

    local path = (os.getenv("TMPDIR") or "/tmp") .. "/ds_lenet_" .. os.time() .. ".safetensors"
    ds.save_state(model:state_dict(), path)
    ds.manual_seed(1)
    local copy = lenet.LeNet()
    copy:load_state_dict(ds.load_state(path))
    os.remove(path)
    local x = lenet.scale(train.images:narrow(1, 1, 8), nil)
    assert.is_true(H.bitwise(model(x), copy(x)))
  end)

  -- the traced predictor reads its input in place: conv2d's contiguous() of an input (or of an activation, which is
  -- contiguous already) is neither a copy step nor a copy inside a fused program
  it("compiles its predictor without copies, equal to eager bit for bit", function()
    ds.manual_seed(23)
    local model = lenet.LeNet()
    model:eval()
    local predict = function(x) return ds.nn.functional.softmax(model(x), -1) end
    local cg = ds.compile(predict, { ds.spec({ "batch", 1, 28, 28 }, "f32", "image") })
    local x = lenet.scale(train.images:narrow(1, 1, 5), nil)
    assert.is_true(H.bitwise(cg(x), ds.no_grad(function() return predict(x) end)))
    local rows = cg:profile(1, x)
    local kernels = {}
    for _, r in ipairs(rows) do kernels[#kernels + 1] = r.kernel end
    assert.is_nil(table.concat(kernels, " "):find("copy"), table.concat(kernels, " "))
    assert.is_nil(tostring(cg):find("copy"), tostring(cg))
  end)

  it("parses its command line", function()
    assert.same({ epochs = 1, limit = 20, out = "w.safetensors", quiet = false },
      lenet.parse_args { "--epochs", "1", "--limit", "20", "--out", "w.safetensors" })
    H.raises(function() lenet.parse_args { "--epochs", "x" } end, "--epochs needs a positive integer")
    H.raises(function() lenet.parse_args { "--bogus" } end, "unknown argument --bogus")
  end)
end)
