-- nn/functional_sampling.lua: F.sample_logits, the next token from logits as decoders choose it: greedy
-- (temperature 0) or sampled after temperature, top-k, top-p (nucleus) and min-p filtering (Hugging Face's order).
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local args = require("ds.args")

local M = {}

-- logits (V) | (rows, V), opts {temperature = 1, top_k, top_p = 1, min_p = 0} -> (1) | (rows, 1) i64, 1-based
-- token ids, drawn with ds.multinomial from the filtered softmax
M.sample_logits = args.wrap("sample_logits", { "tensor", "table?" }, function(logits, opts)
  opts = options.check(opts, "sample_logits", { temperature = { "number", min = 0 }, top_k = { "integer", min = 1 },
    top_p = { "number", min = 0, max = 1 }, min_p = { "number", min = 0, max = 1 } })
  local nd = #logits._shape
  if nd ~= 1 and nd ~= 2 then
    errors.raise("sample_logits: logits must be (V) or (rows, V), got " .. S.str(logits._shape))
  end
  local temperature = opts.temperature or 1
  if temperature == 0 then return logits:argmax(-1, true) end
  local x = temperature == 1 and logits or logits / temperature
  local V = x._shape[nd]
  local hidden = -math.huge
  if opts.top_k and opts.top_k < V then
    local kth = x:topk(opts.top_k, -1):narrow(-1, opts.top_k, 1)                -- (..., 1)
    x = ops.masked_fill(x, x:lt(kth), hidden)
  end
  if opts.min_p and opts.min_p > 0 then
    local p = ops.softmax(x, -1)
    x = ops.masked_fill(x, p:lt(p:amax(-1, true) * opts.min_p), hidden)
  end
  if opts.top_p and opts.top_p < 1 then
    -- sorted descending: a token goes when the tokens before it already hold top_p of the mass (the first stays)
    local sorted, order = x:sort(-1, true)
    local p = ops.softmax(sorted, -1)
    local before = p:cumsum(-1) - p
    local drop = ops.logical_and(before:ge(opts.top_p), before:gt(0)):astype(x.dtype)
    x = ops.masked_fill(x, ops.scatter(ops.zeros_like(x), -1, order, drop):gt(0), hidden)
  end
  return ops.multinomial(ops.softmax(x, -1), 1)
end)

return M
