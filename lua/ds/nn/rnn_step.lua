-- nn/rnn_step.lua: one time step of each recurrent cell (tanh/relu RNN, LSTM, GRU) with PyTorch's gate
-- orders, shared by the sequence modules (nn/rnn.lua) and the single-step cells (nn/rnn_cell.lua).
local ops = require("ds.ops")

-- one step of each cell: xw = W_ih x + b_ih for this step (N, G*H), h/c (N, H) -> new h (and c)
local cells = {}

function cells.RNN_TANH(xw, hw) return ops.tanh(xw + hw) end
function cells.RNN_RELU(xw, hw) return ops.relu(xw + hw) end

-- gates i, f, g, o (PyTorch's order): c' = f c + i g, h' = o tanh(c')
function cells.LSTM(xw, hw, c, H)
  local gates = hw + xw
  local i = ops.sigmoid(gates:narrow(2, 1, H))
  local f = ops.sigmoid(gates:narrow(2, H + 1, H))
  local g = ops.tanh(gates:narrow(2, 2 * H + 1, H))
  local o = ops.sigmoid(gates:narrow(2, 3 * H + 1, H))
  local c2 = f * c + i * g
  return o * ops.tanh(c2), c2
end

-- gates r, z, n: n = tanh(x_n + r (W_hn h + b_hn)), h' = (h - n) z + n (= (1 - z) n + z h)
function cells.GRU(xw, hw, h, H)
  local r = ops.sigmoid(hw:narrow(2, 1, H) + xw:narrow(2, 1, H))
  local z = ops.sigmoid(hw:narrow(2, H + 1, H) + xw:narrow(2, H + 1, H))
  local n = ops.tanh(xw:narrow(2, 2 * H + 1, H) + hw:narrow(2, 2 * H + 1, H) * r)
  return (h - n) * z + n
end

return cells
