-- tests/progress_spec.lua: ds.progress bars with a fake clock and a captured stream (no real timing).
local ds = require("ds")
local H = require("helpers")

local function capture()
  local s = { text = "" }
  function s:write(...) for _, v in ipairs { ... } do self.text = self.text .. v end end
  return s
end
local function fake_clock()
  local c = { t = 100 }
  return c, function() return c.t end
end
local function lines(text)
  local out = {}
  for l in text:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

describe("progress bar", function()
  it("prints plain periodic lines when not on a terminal", function()
    local out = capture()
    local c, clock = fake_clock()
    local bar = ds.progress.bar { total = 100, desc = "epoch 1", out = out, clock = clock, interval = 10, tty = false }
    for i = 1, 100 do
      c.t = c.t + 0.5 -- 2 steps per second
      bar:update(1, { loss = i })
    end
    local means = bar:close()
    local l = lines(out.text)
    -- one line every 10 s (20 steps) for 50 s, then the final line
    assert.equal(6, #l)
    assert.equal("epoch 1 20/100  20% 2.0 it/s ETA 0:40 loss 10.5000", l[1])
    assert.equal("epoch 1 100/100 100% 2.0 it/s 0:50 loss 50.5000", l[6])
    assert.is_nil(out.text:find("\r", 1, true))
    assert.equal(50.5, means.loss)
  end)

  it("redraws one line in place on a terminal", function()
    local out = capture()
    local c, clock = fake_clock()
    local bar = ds.progress.bar { total = 4, out = out, clock = clock, tty = true, width = 8, unit = "batch" }
    for _ = 1, 4 do c.t = c.t + 1; bar:update() end
    bar:close()
    assert.truthy(out.text:find("\r[####....] 2/4  50% 1.0 batch/s ETA 0:02\27[K", 1, true))
    local final = "\r[########] 4/4 100% 1.0 batch/s 0:04\27[K\n"
    assert.equal(final, out.text:sub(-#final))
    assert.equal(1, select(2, out.text:gsub("\n", "")))
  end)

  it("works without a total and accepts one-element tensors as values", function()
    local out = capture()
    local c, clock = fake_clock()
    local bar = ds.progress.bar { out = out, clock = clock, tty = false }
    c.t = c.t + 2
    bar:update(3, { loss = ds.tensor(0.25) })
    bar:close()
    assert.equal("3 1.5 it/s 0:02 loss 0.2500\n", out.text)
    H.raises(function() bar:update(1, { loss = "x" }) end, "loss", "must be a number")
  end)

  it("wrap() counts the iterations of a loop", function()
    local out = capture()
    local _, clock = fake_clock()
    local n, sum = 0, 0
    local items, k = { 5, 6, 7 }, 0
    local function iter() k = k + 1; if items[k] then return k, items[k] end end
    for i, v in ds.progress.wrap(iter, { total = 3, out = out, clock = clock, tty = false }) do
      n = n + 1; sum = sum + i * v
    end
    assert.equal(3, n)
    assert.equal(5 + 12 + 21, sum)
    assert.truthy(out.text:find("3/3 100%", 1, true))
  end)
end)
