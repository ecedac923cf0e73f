-- tests/char_lstm_spec.lua: the character LSTM example: its text encoding, eager and compiled training
-- giving bitwise-equal losses from the same weights and batches, a short run that lowers the loss, and
-- sampling only characters of the text.
local ds = require("ds")
local ex = dofile("examples/char_lstm.lua")

describe("the character LSTM example", function()
  local ids, chars, id = ex.encode(ex.read_text(ex.DEFAULT_TEXT))
  local small = { batch = 8, seq = 12, hidden = 48, embed = 16 }

  it("encodes the text as 1-based ids over its sorted characters", function()
    assert.equal(#ex.read_text(ex.DEFAULT_TEXT), ids:numel())
    assert.equal(1, ids:min():item())
    assert.equal(#chars, ids:max():item())
    for i = 2, #chars do assert(chars[i - 1] < chars[i]) end
    local decoded = {}
    for i, k in ipairs(ids:narrow(1, 1, 60):totable()) do decoded[i] = chars[k] end
    assert.equal(ex.read_text(ex.DEFAULT_TEXT):sub(1, 60), table.concat(decoded))
  end)

  it("trains eagerly and compiled with bitwise-equal losses", function()
    local eager, compiled = ex.eager_vs_compiled(ids, #chars, 4, small)
    for i = 1, 4 do assert(ds.equal(eager[i], compiled[i]), "step " .. i .. ": " .. eager[i]:item() .. " vs " .. compiled[i]:item()) end
  end)

  it("lowers the loss in a short compiled run and samples characters of the text", function()
    local o = { compile = true }
    for k, v in pairs(small) do o[k] = v end
    local model, _, step = ex.setup(#chars, o)
    ds.manual_seed(5)
    local losses = {}
    for i = 1, 40 do losses[i] = step(ex.batch(ids, o.batch, o.seq)):item() end
    local last = 0
    for i = 36, 40 do last = last + losses[i] / 5 end
    assert(losses[1] > math.log(#chars) - 0.2, "first loss " .. losses[1] .. " is near log(vocab) for an untrained model")
    assert(last < losses[1] - 0.8, string.format("loss %.3f -> %.3f", losses[1], last))
    local text = ex.sample(model, chars, id, "The ", 30, 0.8, 3)
    assert.equal(34, #text)
    for c in text:gmatch(".") do assert(id[c], "sampled a character not in the text: " .. c) end
    assert.is_true(model.training)
  end)
end)
