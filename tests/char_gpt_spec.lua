-- tests/char_gpt_spec.lua: the character GPT example, briefly (12 steps of batch 8): its text encoding, eager and
-- compiled training with bitwise-equal losses that go down, and generation: greedy text eagerly == by the compiled
-- decoding loop == by that loop saved and loaded (and the same tokens without the cache), sampled text equal three ways
-- for the same seed, the stream seeing every greedy token; the saved weights generating the same in a 2-row model.
local ds = require("ds")
local H = require("helpers")
local ex = dofile("examples/char_gpt.lua")

describe("the character GPT example", function()
  it("encodes the license texts as 1-based ids over their sorted characters", function()
    local text = ex.corpus()
    local ids, chars = ex.encode(text)
    assert.equal(#text, ids:numel())
    assert.equal(#chars, ids:max():item())
    for i = 2, #chars do assert(chars[i - 1] < chars[i]) end
    assert.equal(text:sub(1, 80), ex.decode(ids:narrow(1, 1, 80):totable(), chars))
  end)

  it("trains (eager == compiled, loss going down) and generates the same text eagerly, compiled and loaded", function()
    local streamed = {}
    local r = ex.run({ steps = 12, batch = 8, generate = 20, out = H.tmp_dir(),
                       stream = function(c) streamed[#streamed + 1] = c end })
    assert(r.params > 750000 and r.params < 900000, "parameters: " .. r.params)
    assert.same(r.eager_losses, r.compiled_losses)
    local n = #r.eager_losses
    assert(r.eager_losses[n] < r.eager_losses[1] - 0.5, "loss " .. r.eager_losses[1] .. " -> " .. r.eager_losses[n])
    local g = r.generations
    assert.equal(20, #g.greedy)
    assert.same(g.greedy, g.greedy_compiled_step)
    assert.same(g.greedy, g.greedy_compiled)
    assert.same(g.greedy, g.greedy_loaded)
    assert.same(g.greedy, g.greedy_no_cache)
    assert.equal(ex.decode(g.greedy, r.chars), table.concat(streamed))
    assert.same({ g.greedy, g.greedy }, g.reloaded_rows)   -- the saved weights in a model with two cache rows
    assert.equal(20, #g.sampled)
    assert.same(g.sampled, g.sampled_compiled)
    assert.same(g.sampled, g.sampled_loaded)
    assert.are_not.same(g.greedy, g.sampled)
  end)
end)
