-- tests/eager_memory_spec.lua: backward releases the graph's saved tensors (live C bytes drop with no GC by the
-- caller), retain_graph keeps them, and a training loop's live bytes stay bounded; ds.memory_stats.
local ds = require("ds")

local MiB = 2 ^ 20
local function live() return ds.memory_stats().live_bytes end
local function settle() collectgarbage("collect"); collectgarbage("collect") end

-- x: (512, 4096) f32, 8 MiB, no grad; w: (4096) requires grad. The loss's graph saves 5 intermediates of 8 MiB.
local x = ds.rand(512, 4096)
local function loss_of(w) return ((((x * w):tanh() * w):sin() + w):exp() * w):mean() end

describe("eager memory", function()
  it("ds.memory_stats reports live, cached and peak C bytes (ds.memory is the same function)", function()
    local st = ds.memory_stats()
    assert.is_true(st.live_bytes >= 8 * MiB)        -- x
    assert.is_true(st.peak_bytes >= st.live_bytes)
    assert.is_true(st.cached_bytes >= 0)
    assert.equal(ds.memory_stats, ds.memory)
  end)

  it("backward releases the forward's saved tensors without a collection by the caller", function()
    local w = ds.rand(4096):requires_grad_()
    settle()
    local base = live()
    local loss = loss_of(w)
    assert.is_true(live() > base + 40 * MiB, string.format("graph holds %.1f MiB", (live() - base) / MiB))
    loss:backward()
    local after = live()
    assert.is_true(after < base + 2 * MiB, string.format("%.1f MiB still live after backward", (after - base) / MiB))
    assert.is_not_nil(w.grad)
    assert.is_true(math.abs(loss:item()) < math.huge) -- the loss itself stays usable
  end)

  it("retain_graph keeps the saved tensors for a second backward with the same grads", function()
    local w = ds.rand(4096):requires_grad_()
    settle()
    local base = live()
    local loss = loss_of(w)
    loss:backward({ retain_graph = true })
    assert.is_true(live() > base + 40 * MiB)
    local g1 = w.grad:clone()
    w.grad = nil
    loss:backward()
    assert.is_true(ds.equal(g1, w.grad))
    local ok, err = pcall(function() loss:backward() end)
    assert.is_false(ok)
    assert.matches("second time", tostring(err))
  end)

  it("a 30-step Adam loop's live bytes stay bounded (forward peak and end of step)", function()
    local w = ds.rand(4096):requires_grad_()
    local opt = ds.optim.Adam({ w }, { lr = 1e-3 })
    settle()
    local forward, finish = {}, {}
    for step = 1, 30 do
      opt:zero_grad()
      local loss = loss_of(w)
      forward[step] = live()
      loss:backward()
      opt:step()
      finish[step] = live()
    end
    for step = 2, 30 do
      assert.is_true(forward[step] < 1.5 * forward[1], string.format("step %d: %.1f MiB live after the forward, " ..
        "%.1f in step 1", step, forward[step] / MiB, forward[1] / MiB))
      assert.is_true(finish[step] < finish[1] + 2 * MiB, string.format("step %d: %.1f MiB live at its end, %.1f " ..
        "in step 1", step, finish[step] / MiB, finish[1] / MiB))
    end
  end)
end)
