-- nn/transformer_decoder.lua: TransformerDecoderLayer: the encoder layer's self-attention and
-- feed-forward blocks plus cross-attention over the encoder's memory (post-norm by default, norm_first
-- option), with PyTorch's parameter names.
local Dropout = require("ds.nn.dropout").Dropout
local LayerNorm = require("ds.nn.norm").LayerNorm
local MHA = require("ds.nn.attention").MultiheadAttention
local EncoderLayer = require("ds.nn.transformer").TransformerEncoderLayer
local Tensor = require("ds.tensor")
local errors = require("ds.errors")

-- opts: as TransformerEncoderLayer's (dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
-- norm_first, dtype)
local Layer = EncoderLayer:extend("TransformerDecoderLayer")
function Layer:init(d_model, nhead, opts)
  EncoderLayer.init(self, d_model, nhead, opts)
  opts = opts or {}
  local p = opts.dropout == nil and 0.1 or opts.dropout
  self.multihead_attn = MHA(d_model, nhead, { dropout = p, batch_first = self.batch_first, dtype = opts.dtype })
  self.norm3 = LayerNorm(d_model, { eps = opts.layer_norm_eps or 1e-5, dtype = opts.dtype })
  self.dropout3 = Dropout(p)
end

-- cross-attention: queries from x, keys and values from memory (the dropouts all have the same p, so
-- which Dropout module a block uses does not change the numbers)
function Layer:_mha_block(x, memory, mask, key_padding_mask)
  local y = self.multihead_attn(x, memory, memory, { attn_mask = mask, key_padding_mask = key_padding_mask, need_weights = false })
  return self.dropout3(y)
end

-- tgt: (B,T,E) (batch_first) or (T,B,E); memory: (B,S,E) or (S,B,E); masks in an options table:
-- tgt_mask (T,T), memory_mask (T,S), tgt_key_padding_mask (B,T), memory_key_padding_mask (B,S)
function Layer:forward(tgt, memory, opts)
  if not Tensor.is_tensor(tgt) or not Tensor.is_tensor(memory) then
    errors.raise("TransformerDecoderLayer: expects forward(tgt, memory, [{tgt_mask =, memory_mask =, ...}])")
  end
  opts = opts or {}
  local x = tgt
  if self.norm_first then
    x = x + self:_sa_block(self.norm1(x), opts.tgt_mask, opts.tgt_key_padding_mask)
    x = x + self:_mha_block(self.norm2(x), memory, opts.memory_mask, opts.memory_key_padding_mask)
    x = x + self:_ff_block(self.norm3(x))
  else
    x = self.norm1(x + self:_sa_block(x, opts.tgt_mask, opts.tgt_key_padding_mask))
    x = self.norm2(x + self:_mha_block(x, memory, opts.memory_mask, opts.memory_key_padding_mask))
    x = self.norm3(x + self:_ff_block(x))
  end
  return x
end

return { TransformerDecoderLayer = Layer }
