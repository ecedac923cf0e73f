-- nn/rnn_cell.lua: RNNCell, LSTMCell and GRUCell: one time step, with PyTorch's parameter names, gate orders
-- and initialization (uniform in +-1/sqrt(hidden_size)), so state_dicts carry over.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")
local constructor_args = require("ds.nn.constructor_args")
local cells = require("ds.nn.rnn_step")

local M = {}
local NOT_REFUSED = {}
local GATES = { RNNCell = 1, LSTMCell = 4, GRUCell = 3 }

-- the state hx (N, H) or (H) as given (zeros if nil), checked against x (N, in) / (in)
local function state(self, given, x, what)
  local H = self.hidden_size
  local want = #x._shape == 2 and { x._shape[1], H } or { H }
  if given == nil then return ops.zeros(want, { dtype = x.dtype }) end
  if not Tensor.is_tensor(given) or given.dtype ~= x.dtype or not S.equal(given._shape, want) then
    errors.raise(string.format("%s: %s must be a %s tensor %s", self._name, what, x.dtype, S.str(want)))
  end
  return given
end

local function cell(name, params, kinds)
  local cls = Module:extend(name)
  -- Cell(input_size, hidden_size, bias = true[, nonlinearity = "tanh" (RNNCell)][, {dtype =}])
  function cls:init(input_size, hidden_size, ...)
    if type(input_size) ~= "number" or type(hidden_size) ~= "number" or input_size < 1 or hidden_size < 1 then
      errors.raise(name .. ": expects " .. name .. "(input_size, hidden_size, ...) with positive sizes")
    end
    local opts = constructor_args.merge(name, params, kinds, NOT_REFUSED, ...)
    self.input_size, self.hidden_size, self.bias = input_size, hidden_size, opts.bias ~= false
    self.nonlinearity = opts.nonlinearity or "tanh"
    local G, dt, k = GATES[name], opts.dtype or "f32", 1 / math.sqrt(hidden_size)
    local shapes = { { "weight_ih", { G * hidden_size, input_size } }, { "weight_hh", { G * hidden_size, hidden_size } } }
    if self.bias then
      shapes[3] = { "bias_ih", { G * hidden_size } }
      shapes[4] = { "bias_hh", { G * hidden_size } }
    end
    for _, s in ipairs(shapes) do self[s[1]] = Module.Parameter(init.uniform_(ops.empty(s[2], { dtype = dt }), -k, k)) end
  end
  -- input (N, input_size) or (input_size); hx (N, hidden_size) (LSTMCell: {h, c}); nil = zeros.
  -- Returns h' (LSTMCell: h', c'), batched as the input
  function cls:forward(input, hx)
    if not Tensor.is_tensor(input) or (#input._shape ~= 1 and #input._shape ~= 2)
      or not S.same(input._shape[#input._shape], self.input_size) then
      errors.raise(string.format("%s: input must be (N, %d) or (%d), got %s", name, self.input_size, self.input_size,
        Tensor.is_tensor(input) and S.str(input._shape) or type(input)))
    end
    local h, c
    if name == "LSTMCell" then
      if hx ~= nil and (type(hx) ~= "table" or Tensor.is_tensor(hx)) then
        errors.raise("LSTMCell: hx must be {h, c} or nil")
      end
      h, c = state(self, hx and hx[1], input, "h"), state(self, hx and hx[2], input, "c")
    else h = state(self, hx, input, "hx") end
    local batched = #input._shape == 2
    local x = batched and input or input:unsqueeze(1)
    if not batched then h = h:unsqueeze(1); c = c and c:unsqueeze(1) end
    local xw = F.linear(x, self.weight_ih, rawget(self, "bias_ih"))
    local hw = F.linear(h, self.weight_hh, rawget(self, "bias_hh"))
    local H = self.hidden_size
    if name == "LSTMCell" then
      local h2, c2 = cells.LSTM(xw, hw, c, H)
      if batched then return h2, c2 end
      return h2:squeeze(1), c2:squeeze(1)
    end
    local step = name == "GRUCell" and cells.GRU or (self.nonlinearity == "relu" and cells.RNN_RELU or cells.RNN_TANH)
    local h2 = step(xw, hw, h, H)
    return batched and h2 or h2:squeeze(1)
  end
  function cls:extra_repr()
    local s = string.format("%d, %d", self.input_size, self.hidden_size)
    if not self.bias then s = s .. ", bias=false" end
    if name == "RNNCell" and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=" .. self.nonlinearity end
    return s
  end
  M[name] = cls
end
cell("RNNCell", { "bias", "nonlinearity" }, { bias = "boolean", nonlinearity = { "tanh", "relu" }, dtype = "dtype" })
cell("LSTMCell", { "bias" }, { bias = "boolean", dtype = "dtype" })
cell("GRUCell", { "bias" }, { bias = "boolean", dtype = "dtype" })

return M
