-- nn/transformer.lua: TransformerEncoderLayer (post-norm by default, as in BERT; norm_first option).
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local Linear = require("ds.nn.linear").Linear
local Dropout = require("ds.nn.dropout").Dropout
local LayerNorm = require("ds.nn.norm").LayerNorm
local MHA = require("ds.nn.attention").MultiheadAttention
local Tensor = require("ds.tensor")
local errors = require("ds.errors")

local ACTIVATIONS = { relu = F.relu, gelu = F.gelu }

-- opts: dim_feedforward (2048), dropout (0.1), activation ("relu" as in PyTorch, "gelu" as in BERT, or a function),
-- layer_norm_eps (1e-5), batch_first (false), norm_first (false), dtype
local Layer = Module:extend("TransformerEncoderLayer", { forward = { "tensor", "tensor|table?", "tensor?" } })
function Layer:init(d_model, nhead, opts)
  if type(d_model) ~= "number" or type(nhead) ~= "number" then
    errors.raise("TransformerEncoderLayer: expects TransformerEncoderLayer(d_model, nhead, [opts])")
  end
  opts = options.check(opts, "TransformerEncoderLayer", { dim_feedforward = { "integer", min = 1 },
    dropout = { "number", min = 0, max = 1 }, activation = "any", layer_norm_eps = { "number", min = 0 },
    batch_first = "boolean", norm_first = "boolean", dtype = "dtype" })
  local ff, p, dt = opts.dim_feedforward or 2048, opts.dropout == nil and 0.1 or opts.dropout, opts.dtype
  local activation = opts.activation or "relu"
  self.activation = type(activation) == "function" and activation or ACTIVATIONS[activation]
  if not self.activation then
    errors.raise("TransformerEncoderLayer: activation must be 'relu', 'gelu' or a function, got " ..
      (type(activation) == "string" and "'" .. activation .. "'" or type(activation)))
  end
  self.norm_first, self.batch_first = opts.norm_first == true, opts.batch_first == true
  self.self_attn = MHA(d_model, nhead, { dropout = p, batch_first = self.batch_first, dtype = dt })
  self.linear1 = Linear(d_model, ff, { dtype = dt })
  self.dropout = Dropout(p)
  self.linear2 = Linear(ff, d_model, { dtype = dt })
  local eps = opts.layer_norm_eps or 1e-5
  self.norm1 = LayerNorm(d_model, { eps = eps, dtype = dt })
  self.norm2 = LayerNorm(d_model, { eps = eps, dtype = dt })
  self.dropout1 = Dropout(p)
  self.dropout2 = Dropout(p)
end

function Layer:_sa_block(x, attn_mask, key_padding_mask)
  local y = self.self_attn(x, x, x, { attn_mask = attn_mask, key_padding_mask = key_padding_mask,
    need_weights = false })
  return self.dropout1(y)
end

function Layer:_ff_block(x)
  return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

-- src: (B,T,E) (batch_first) or (T,B,E); forward(src, src_mask, src_key_padding_mask) or
-- forward(src, {src_mask =, src_key_padding_mask =})
function Layer:forward(src, src_mask, src_key_padding_mask)
  if type(src_mask) == "table" and not Tensor.is_tensor(src_mask) then
    src_mask, src_key_padding_mask = src_mask.src_mask, src_mask.src_key_padding_mask
  end
  local x = src
  if self.norm_first then
    x = x + self:_sa_block(self.norm1(x), src_mask, src_key_padding_mask)
    x = x + self:_ff_block(self.norm2(x))
  else
    x = self.norm1(x + self:_sa_block(x, src_mask, src_key_padding_mask))
    x = self.norm2(x + self:_ff_block(x))
  end
  return x
end

return { TransformerEncoderLayer = Layer }
