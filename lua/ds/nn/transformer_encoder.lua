-- nn/transformer_encoder.lua: TransformerEncoder: num_layers deep copies of an encoder layer (own
-- weights each, as PyTorch's), then an optional final norm; generate_square_subsequent_mask (the causal mask).
local Module = require("ds.nn.module")
local ModuleList = require("ds.nn.container").ModuleList
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local ops = require("ds.ops")
local options = require("ds.options")

-- opts: norm (a module applied to the output, e.g. LayerNorm)
local Encoder = Module:extend("TransformerEncoder",
  { init = { "any", "any", "table?" }, forward = { "tensor", "tensor|table?", "tensor?" } })
function Encoder:init(encoder_layer, num_layers, opts)
  if not Module.is_module(encoder_layer) or type(num_layers) ~= "number" or num_layers < 1 or num_layers > 4096
    or num_layers ~= math.floor(num_layers) then
    errors.raise("TransformerEncoder: expects TransformerEncoder(encoder_layer, num_layers (an integer 1..4096), " ..
      "[{norm =}])")
  end
  opts = opts or {}
  if opts.norm ~= nil and not Module.is_module(opts.norm) then
    errors.raise("TransformerEncoder: norm must be a module")
  end
  local layers = {}
  for i = 1, num_layers do layers[i] = encoder_layer:deepcopy() end
  self.layers = ModuleList(layers)
  self.num_layers = num_layers
  self.norm = opts.norm
end

-- src: as the layer takes it; forward(src, mask, src_key_padding_mask) or
-- forward(src, {mask =, src_key_padding_mask =})
function Encoder:forward(src, mask, src_key_padding_mask)
  if type(mask) == "table" and not Tensor.is_tensor(mask) then
    mask, src_key_padding_mask = mask.mask, mask.src_key_padding_mask
  end
  local x = src
  for i = 1, self.num_layers do x = self.layers[i](x, mask, src_key_padding_mask) end
  if self.norm then x = self.norm(x) end
  return x
end

-- generate_square_subsequent_mask(sz[, {dtype =}]): (sz, sz) float mask, -inf above the diagonal and 0 on and
-- below it (nn.Transformer's static method in PyTorch; here a function of ds.nn and of the encoder classes)
local function generate_square_subsequent_mask(sz, opts)
  if type(sz) ~= "number" or sz < 0 or sz ~= math.floor(sz) then
    errors.raise("generate_square_subsequent_mask: sz must be a non-negative integer, got " .. tostring(sz))
  end
  opts = options.check(opts, "generate_square_subsequent_mask", { dtype = "dtype" })
  return ops.triu(ops.full({ sz, sz }, -math.huge, { dtype = opts.dtype or "f32" }), 1)
end
Encoder.generate_square_subsequent_mask = generate_square_subsequent_mask

return { TransformerEncoder = Encoder, generate_square_subsequent_mask = generate_square_subsequent_mask }
