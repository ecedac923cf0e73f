-- nn/transformer_model.lua: TransformerDecoder (num_layers copies of a decoder layer, then an optional norm) and
-- Transformer (PyTorch's encoder-decoder: both stacks with final LayerNorms, every parameter of more than one dim
-- xavier-uniform initialized), with Transformer.generate_square_subsequent_mask as PyTorch's static method.
local Module = require("ds.nn.module")
local ModuleList = require("ds.nn.container").ModuleList
local LayerNorm = require("ds.nn.norm").LayerNorm
local EncoderLayer = require("ds.nn.transformer").TransformerEncoderLayer
local DecoderLayer = require("ds.nn.transformer_decoder").TransformerDecoderLayer
local encoder = require("ds.nn.transformer_encoder")
local init = require("ds.nn.init_weights")
local options = require("ds.options")
local constructor_args = require("ds.nn.constructor_args")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")

local M = {}

-- the masks of a decoder call: an options table, or PyTorch's positional order after (tgt, memory)
local DECODER_MASKS = { "tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask" }
local function masks(opname, names, ...)
  local first = ...
  if type(first) == "table" and not Tensor.is_tensor(first) then
    if select("#", ...) > 1 then errors.raise(opname .. ": the options table must be the last argument") end
    local spec = {}
    for _, k in ipairs(names) do spec[k] = "tensor" end
    return options.check(first, opname, spec)
  end
  local o = {}
  for i, k in ipairs(names) do
    local v = select(i, ...)
    if v ~= nil and not Tensor.is_tensor(v) then errors.raise(string.format("%s: %s must be a tensor", opname, k)) end
    o[k] = v
  end
  if select("#", ...) > #names then
    errors.raise(string.format("%s: takes at most %d masks (%s)", opname, #names, table.concat(names, ", ")))
  end
  return o
end

-- TransformerDecoder(decoder_layer, num_layers, [{norm =}]); forward(tgt, memory, [masks as the layer's])
local Decoder = Module:extend("TransformerDecoder", { init = { "any", "any", "table?" } })
Decoder._doc = "TransformerDecoder(decoder_layer, num_layers, [{norm =}]): num_layers copies of the layer; " ..
  "forward(tgt, memory, [{tgt_mask =, memory_mask =, tgt_key_padding_mask =, memory_key_padding_mask =}])"
function Decoder:init(decoder_layer, num_layers, opts)
  if not Module.is_module(decoder_layer) or type(num_layers) ~= "number" or num_layers < 1 or num_layers > 4096
    or num_layers ~= math.floor(num_layers) then
    errors.raise("TransformerDecoder: expects TransformerDecoder(decoder_layer, num_layers (an integer 1..4096), " ..
      "[{norm =}])")
  end
  opts = options.check(opts, "TransformerDecoder", { norm = "table" })
  if opts.norm ~= nil and not Module.is_module(opts.norm) then
    errors.raise("TransformerDecoder: norm must be a module")
  end
  local layers = {}
  for i = 1, num_layers do layers[i] = decoder_layer:deepcopy() end
  self.layers = ModuleList(layers)
  self.num_layers = num_layers
  self.norm = opts.norm
end
function Decoder:forward(tgt, memory, ...)
  local o = masks("TransformerDecoder", DECODER_MASKS, ...)
  local x = tgt
  for i = 1, self.num_layers do x = self.layers[i](x, memory, o) end
  if self.norm then x = self.norm(x) end
  return x
end
M.TransformerDecoder = Decoder

-- Transformer([{d_model = 512, nhead = 8, num_encoder_layers = 6, num_decoder_layers = 6, dim_feedforward = 2048,
-- dropout = 0.1, activation = "relu" (or "gelu" or a function), custom_encoder, custom_decoder, layer_norm_eps = 1e-5, batch_first = false,
-- norm_first = false, dtype}]) or PyTorch's positional order of those
local PARAMS = { "d_model", "nhead", "num_encoder_layers", "num_decoder_layers", "dim_feedforward", "dropout",
  "activation", "custom_encoder", "custom_decoder", "layer_norm_eps", "batch_first", "norm_first" }
local SPEC = { d_model = { "integer", min = 1 }, nhead = { "integer", min = 1 },
  num_encoder_layers = { "integer", min = 1 }, num_decoder_layers = { "integer", min = 1 },
  dim_feedforward = { "integer", min = 1 }, dropout = { "number", min = 0, max = 1 }, activation = "any",
  custom_encoder = "table", custom_decoder = "table", layer_norm_eps = { "number", min = 0 },
  batch_first = "boolean", norm_first = "boolean", dtype = "dtype" }
local Transformer = Module:extend("Transformer")
Transformer._doc = "PyTorch's encoder-decoder: Transformer(d_model, nhead, num_encoder_layers, num_decoder_layers, " ..
  "dim_feedforward, dropout, activation, custom_encoder, custom_decoder, layer_norm_eps, batch_first, norm_first) " ..
  "positionally and/or as options; forward(src, tgt, [masks]); Transformer.generate_square_subsequent_mask(sz)"
function Transformer:init(...)
  local o = constructor_args.merge("Transformer", PARAMS, SPEC, {}, ...)
  local d, eps = o.d_model or 512, o.layer_norm_eps or 1e-5
  local layer_opts = { dim_feedforward = o.dim_feedforward or 2048, dropout = o.dropout == nil and 0.1 or o.dropout,
    activation = o.activation, layer_norm_eps = eps, batch_first = o.batch_first, norm_first = o.norm_first,
    dtype = o.dtype }
  for _, k in ipairs { "custom_encoder", "custom_decoder" } do
    if o[k] ~= nil and not Module.is_module(o[k]) then errors.raise("Transformer: " .. k .. " must be a module") end
  end
  self.encoder = o.custom_encoder or encoder.TransformerEncoder(EncoderLayer(d, o.nhead or 8, layer_opts),
    o.num_encoder_layers or 6, { norm = LayerNorm(d, { eps = eps, dtype = o.dtype }) })
  self.decoder = o.custom_decoder or Decoder(DecoderLayer(d, o.nhead or 8, layer_opts), o.num_decoder_layers or 6,
    { norm = LayerNorm(d, { eps = eps, dtype = o.dtype }) })
  self.d_model, self.nhead, self.batch_first = d, o.nhead or 8, o.batch_first == true
  for _, p in ipairs(self:parameters()) do
    if #p._shape > 1 then init.xavier_uniform_(p) end
  end
end

local FORWARD_MASKS = { "src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
  "memory_key_padding_mask" }
-- src (S, N, E) / tgt (T, N, E) ((N, S, E) / (N, T, E) batch_first); the masks in an options table or in
-- PyTorch's positional order -> (T, N, E)
function Transformer:forward(src, tgt, ...)
  if not Tensor.is_tensor(src) or not Tensor.is_tensor(tgt) then
    errors.raise("Transformer: expects forward(src, tgt, [{src_mask =, tgt_mask =, memory_mask =, ...}])")
  end
  local o = masks("Transformer", FORWARD_MASKS, ...)
  local memory = self.encoder(src, o.src_mask, o.src_key_padding_mask)
  return self.decoder(tgt, memory, { tgt_mask = o.tgt_mask, memory_mask = o.memory_mask,
    tgt_key_padding_mask = o.tgt_key_padding_mask, memory_key_padding_mask = o.memory_key_padding_mask })
end
function Transformer:extra_repr() return string.format("d_model=%d, nhead=%d", self.d_model, self.nhead) end
-- generate_square_subsequent_mask(sz[, {dtype =}]): (sz, sz), -inf above the diagonal, 0 elsewhere
Transformer.generate_square_subsequent_mask = encoder.generate_square_subsequent_mask
M.Transformer = Transformer

return M
