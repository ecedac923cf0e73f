-- nn/rnn.lua: RNN, LSTM and GRU with PyTorch's parameter names, gate orders and initialization (so
-- state_dicts carry over); the time loop runs in Lua, so a trace unrolls it for the traced length.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")
local constructor_args = require("ds.nn.constructor_args")

local cells = require("ds.nn.rnn_step")

local GATES = { RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3 }
local COMMON = { num_layers = { "integer", min = 1 }, bias = "boolean", batch_first = "boolean",
                 dropout = { "number", min = 0, max = 1 }, bidirectional = "boolean", dtype = "dtype" }
-- per module: its options and PyTorch 1.13's constructor parameters after (input_size, hidden_size), in order
local SIGNATURES = {
  RNN = { { nonlinearity = { "tanh", "relu" } },
          { "num_layers", "nonlinearity", "bias", "batch_first", "dropout", "bidirectional" } },
  LSTM = { { proj_size = "integer" },
           { "num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size" } },
  GRU = { {}, { "num_layers", "bias", "batch_first", "dropout", "bidirectional" } },
}
for _, sig in pairs(SIGNATURES) do
  for k, kind in pairs(COMMON) do sig[1][k] = kind end
end
local NOT_REFUSED = {}

-- the options of name (RNN, LSTM, GRU) from PyTorch's positional arguments and/or an options table
local function rnn_options(name, ...)
  local sig = SIGNATURES[name]
  return constructor_args.merge(name, sig[2], sig[1], NOT_REFUSED, ...)
end

local RNNBase = Module:extend("RNNBase", { forward = { "tensor", "tensor|table?" } })

-- mode: RNN_TANH | RNN_RELU | LSTM | GRU; opts (checked by rnn_options): num_layers (1), bias (true),
-- batch_first (false), dropout (0, between layers, training only), bidirectional (false), dtype ("f32");
-- LSTM's proj_size (0; P in [1, hidden_size): h_t = W_hr (o_t tanh(c_t)) of size P, weight_hr_l{k} (P, H))
function RNNBase:init(mode, input_size, hidden_size, opts)
  local name = self._name
  if type(input_size) ~= "number" or type(hidden_size) ~= "number" or input_size < 1 or hidden_size < 1 then
    errors.raise(name .. ": expects " .. name .. "(input_size, hidden_size, [opts]) with positive sizes")
  end
  local P = opts.proj_size or 0
  if P < 0 or P >= hidden_size then
    errors.raise(string.format("%s: proj_size %d must be in [0, hidden_size %d)", name, P, hidden_size))
  end
  local L, p = opts.num_layers or 1, opts.dropout or 0
  self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
  self.num_layers, self.bias, self.batch_first = L, opts.bias ~= false, opts.batch_first == true
  self.dropout, self.bidirectional, self.proj_size = p, opts.bidirectional == true, P
  local out_size = P > 0 and P or hidden_size -- the size of h
  local dt, G, D = opts.dtype or "f32", GATES[mode], self.bidirectional and 2 or 1
  local k = 1 / math.sqrt(hidden_size)
  -- parameter names as PyTorch's (layer numbers 0-based there, kept so state_dicts load unchanged)
  for layer = 0, L - 1 do
    for dir = 1, D do
      local sfx = "_l" .. layer .. (dir == 2 and "_reverse" or "")
      local in_size = layer == 0 and input_size or out_size * D
      local shapes = { { "weight_ih", { G * hidden_size, in_size } },
        { "weight_hh", { G * hidden_size, out_size } } }
      if self.bias then
        shapes[3] = { "bias_ih", { G * hidden_size } }
        shapes[4] = { "bias_hh", { G * hidden_size } }
      end
      if P > 0 then shapes[#shapes + 1] = { "weight_hr", { P, hidden_size } } end
      for _, s in ipairs(shapes) do
        self[s[1] .. sfx] = Module.Parameter(init.uniform_(ops.empty(s[2], { dtype = dt }), -k, k))
      end
    end
  end
end

local function param(self, kind, layer, dir)
  return rawget(self, kind .. "_l" .. layer .. (dir == 2 and "_reverse" or ""))
end

-- x: (T, N, in) -> list of T tensors (N, H) (N, P with proj_size) and the final state {h, c}; the reverse
-- direction reads time backwards and its outputs are stored at their time index
local function run_direction(self, x, layer, dir, h, c)
  local H, T = self.hidden_size, x._shape[1]
  local cell = cells[self.mode]
  local xw = F.linear(x, param(self, "weight_ih", layer, dir), param(self, "bias_ih", layer, dir)) -- (T, N, G*H)
  local w_hh, b_hh = param(self, "weight_hh", layer, dir), param(self, "bias_hh", layer, dir)
  local w_hr = param(self, "weight_hr", layer, dir)
  local outs = {}
  for s = 1, T do
    local t = dir == 2 and T + 1 - s or s
    local hw = F.linear(h, w_hh, b_hh)
    if self.mode == "LSTM" then h, c = cell(xw:select(1, t), hw, c, H)
    else h = cell(xw:select(1, t), hw, h, H) end
    if w_hr then h = F.linear(h, w_hr) end
    outs[t] = h
  end
  return outs, h, c
end

-- the initial state (L*D, N, H) as given, zeros if not; h0 is (L*D, N, P) with proj_size P
local function initial(self, given, N, what, x)
  local L, H = self.num_layers * (self.bidirectional and 2 or 1), self.hidden_size
  if what == "h0" and (self.proj_size or 0) > 0 then H = self.proj_size end
  if given == nil then return ops.zeros(L, N, H, { dtype = x.dtype }) end
  if not Tensor.is_tensor(given) then errors.raise(string.format("%s: %s must be a tensor", self._name, what)) end
  if not S.equal(given._shape, { L, N, H }) or given.dtype ~= x.dtype then
    errors.raise(string.format("%s: %s must be %s %s, got %s %s", self._name, what, x.dtype, S.str({ L, N, H }),
      given.dtype, S.str(given._shape)))
  end
  return given
end

-- input: (T, N, input_size) ((N, T, input_size) with batch_first) or unbatched (T, input_size);
-- hx: h0 (num_layers * num_directions, N, hidden_size) or, for LSTM, {h0, c0}; nil = zeros.
-- Returns output (T, N, D * hidden_size) (batch_first: (N, T, ...)) and h_n (LSTM: {h_n, c_n}),
-- each (num_layers * num_directions, N, hidden_size); unbatched input drops the N dims. With LSTM's
-- proj_size P, h0, h_n and the output's last dim have P (D * P) in place of hidden_size.
function RNNBase:forward(input, hx)
  local name = self._name
  if not Tensor.is_tensor(input) then errors.raise(name .. ": input must be a tensor, got " .. type(input)) end
  local w = self.weight_ih_l0
  local shp = input._shape
  if (#shp ~= 3 and #shp ~= 2) or not S.same(shp[#shp], self.input_size) or input.dtype ~= w.dtype then
    errors.raise(string.format("%s: input must be %s (T,N,%d)%s or (T,%d), got %s %s", name, w.dtype, self.input_size,
      self.batch_first and " (batch_first: (N,T,...))" or "", self.input_size, input.dtype, S.str(shp)))
  end
  local batched = #shp == 3
  local x = input
  if not batched then x = x:unsqueeze(2) elseif self.batch_first then x = x:transpose(1, 2) end
  local T, N = x._shape[1], x._shape[2]
  if type(T) ~= "number" then
    errors.raise(name .. ": the sequence length must be fixed when tracing (the time loop is unrolled), " ..
      "got " .. S.str(shp))
  end
  local h0, c0 = hx, nil
  if self.mode == "LSTM" then
    if hx ~= nil and (type(hx) ~= "table" or Tensor.is_tensor(hx)) then
      errors.raise(name .. ": hx must be {h0, c0}")
    end
    h0, c0 = hx and hx[1], hx and hx[2]
  end
  if not batched then
    h0 = Tensor.is_tensor(h0) and h0:unsqueeze(2) or h0
    c0 = Tensor.is_tensor(c0) and c0:unsqueeze(2) or c0
  end
  h0 = initial(self, h0, N, "h0", x)
  if self.mode == "LSTM" then c0 = initial(self, c0, N, "c0", x) end
  local D = self.bidirectional and 2 or 1
  local hn, cn = {}, {}
  for layer = 0, self.num_layers - 1 do
    if layer > 0 and self.dropout > 0 and self.training then x = F.dropout(x, self.dropout, true) end
    local seqs = {}
    for dir = 1, D do
      local k = layer * D + dir
      local outs, h, c = run_direction(self, x, layer, dir, h0:select(1, k), c0 and c0:select(1, k))
      seqs[dir] = ops.stack(outs, 1) -- (T, N, H)
      hn[k], cn[k] = h, c
    end
    x = D == 1 and seqs[1] or ops.cat(seqs, 3)
  end
  local out, h_n, c_n = x, ops.stack(hn, 1), c0 and ops.stack(cn, 1)
  if not batched then
    out, h_n, c_n = out:squeeze(2), h_n:squeeze(2), c_n and c_n:squeeze(2)
  elseif self.batch_first then
    out = out:transpose(1, 2)
  end
  if self.mode == "LSTM" then return out, { h_n, c_n } end
  return out, h_n
end

function RNNBase:extra_repr()
  local s = string.format("%d, %d", self.input_size, self.hidden_size)
  if self.mode == "RNN_RELU" then s = s .. ", nonlinearity='relu'" end
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if not self.bias then s = s .. ", bias=false" end
  if self.batch_first then s = s .. ", batch_first=true" end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. self.dropout end
  if self.bidirectional then s = s .. ", bidirectional=true" end
  if (self.proj_size or 0) > 0 then s = s .. ", proj_size=" .. self.proj_size end
  return s
end

local M = {}

-- each takes PyTorch's positional arguments after the sizes and/or an options table; RNN's nonlinearity is
-- "tanh" (default) or "relu"; LSTM's proj_size (0) projects h to that size
M.RNN = RNNBase:extend("RNN")
function M.RNN:init(input_size, hidden_size, ...)
  local opts = rnn_options("RNN", ...)
  RNNBase.init(self, opts.nonlinearity == "relu" and "RNN_RELU" or "RNN_TANH", input_size, hidden_size, opts)
end

M.LSTM = RNNBase:extend("LSTM")
function M.LSTM:init(input_size, hidden_size, ...)
  RNNBase.init(self, "LSTM", input_size, hidden_size, rnn_options("LSTM", ...))
end

M.GRU = RNNBase:extend("GRU")
function M.GRU:init(input_size, hidden_size, ...)
  RNNBase.init(self, "GRU", input_size, hidden_size, rnn_options("GRU", ...))
end

return M
