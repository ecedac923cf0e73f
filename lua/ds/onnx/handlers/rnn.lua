-- onnx/handlers/rnn.lua: ONNX import handlers of the recurrent layers LSTM, GRU and RNN (every attribute and
-- input), built from ds ops: unrolled over a static sequence length, a ds.fori_loop over a dynamic one.
--[[ ONNX's shapes (layout 0; layout 1 swaps the sequence and batch dims of X, Y, and of the states' first
  two dims): X (T, N, I); W (D, G*H, I); R (D, G*H, H); B (D, 2*G*H) = [Wb, Rb]; sequence_lens (N);
  initial_h/c (D, N, H); P (D, 3*H) (LSTM peepholes i, o, f) -> Y (T, D, N, H), Y_h and Y_c (D, N, H).
  D = 2 directions when bidirectional (forward first); gates G: LSTM i, o, f, c; GRU z, r, h; RNN one.
  With sequence_lens, a step past a sequence's length keeps its state and writes zeros to Y, so Y_h/Y_c are
  the states at each sequence's last valid step (the reverse direction starts at each sequence's last step). ]]
local F = require("ds.ops")
local D = require("ds.dispatch")
local control = require("ds.control")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, refuse = V.tensor, common.refuse

-- ---- activation functions by ONNX name (lowercased): parameters taken from activation_alpha/beta ----
-- {number of alphas, number of betas, default alpha, default beta, f(x, alpha, beta)}
local ACTIVATIONS = {
  sigmoid = { 0, 0, nil, nil, function(x) return F.sigmoid(x) end },
  tanh = { 0, 0, nil, nil, function(x) return F.tanh(x) end },
  relu = { 0, 0, nil, nil, function(x) return F.relu(x) end },
  affine = { 1, 1, 1.0, 0.0, function(x, a, b) return x * a + b end },
  leakyrelu = { 1, 0, 0.01, nil, function(x, a) return F.where(x:ge(0), x, x * a) end },
  thresholdedrelu = { 1, 0, 1.0, nil, function(x, a) return F.where(x:gt(a), x, x * 0) end },
  scaledtanh = { 1, 1, 1.0, 1.0, function(x, a, b) return F.tanh(x * b) * a end },
  hardsigmoid = { 1, 1, 0.2, 0.5, function(x, a, b) return F.clamp(x * a + b, 0, 1) end },
  elu = { 1, 0, 1.0, nil, function(x, a) return F.where(x:ge(0), x, (F.exp(x) - 1) * a) end },
  softsign = { 0, 0, nil, nil, function(x) return x / (F.abs(x) + 1) end },
  softplus = { 0, 0, nil, nil, function(x) return F.softplus(x) end },
}

-- the activation functions of node (count per direction, defaults) as Lua functions, per direction:
-- {{f, g, h} forward, {f, g, h} reverse}; alphas and betas are consumed in order by the functions that take them
local function activations(op, at, count, defaults, ndir)
  local names = at.activations
  if not names or #names == 0 then
    names = {}
    for d = 1, ndir do for k = 1, count do names[(d - 1) * count + k] = defaults[k] end end
  end
  if #names ~= count * ndir then
    refuse(string.format("%s: %d activations given, %d directions need %d", op, #names, ndir, count * ndir))
  end
  local alphas, betas, na, nb = at.activation_alpha or {}, at.activation_beta or {}, 0, 0
  local per_dir = {}
  for i, name in ipairs(names) do
    local spec = ACTIVATIONS[name:lower()]
    if not spec then refuse(op .. ": the activation function " .. name .. " is not supported") end
    local a, b = spec[3], spec[4]
    if spec[1] > 0 and alphas[na + 1] then na = na + 1; a = alphas[na] end
    if spec[2] > 0 and betas[nb + 1] then nb = nb + 1; b = betas[nb] end
    local d = math.floor((i - 1) / count) + 1
    per_dir[d] = per_dir[d] or {}
    per_dir[d][#per_dir[d] + 1] = function(x) return spec[5](x, a, b) end
  end
  return per_dir
end

-- ---- the time loop ----
-- lens (N) i64 or nil; t a 1-based step (number or 0-d i64 tensor) -> (N, 1) bool: the step is in the sequence
local function valid(lens, t) return lens:gt(t - 1):unsqueeze(2) end

-- one step at 1-based time t: state {h, c} -> new state and the Y row (zeros past a sequence's length)
local function advance(step, xw_t, state, lens, t)
  local h, c = step(xw_t, state[1], state[2])
  if not lens then return { h, c }, h end
  local m = valid(lens, t)
  h = F.where(m, h, state[1])
  if c then c = F.where(m, c, state[2]) end
  return { h, c }, F.where(m, h, F.zeros_like(h))
end

-- xw (T, N, G*H) the input projections; step(xw_t, h, c) -> h, c; state {h0, c0 or nil}
-- -> Y (T, N, H) and the final {h, c}
local function unrolled(xw, step, state, reverse, lens)
  local steps, ys = xw.shape[1], {}
  if steps == 0 then return F.zeros({ 0, state[1].shape[1], state[1].shape[2] }, { dtype = xw.dtype }), state end
  for s = 1, steps do
    local t = reverse and steps + 1 - s or s
    state, ys[t] = advance(step, xw:select(1, t), state, lens, t)
  end
  return F.stack(ys, 1), state
end

-- the same as a ds.fori_loop over a dynamic T: Y is filled a row per trip
local function looped(xw, step, state, reverse, lens)
  local steps = xw.shape[1]
  local last = D.scalar(steps, "i64")
  local h0 = state[1]
  local y0 = F.zeros({ steps, h0.shape[1], h0.shape[2] }, { dtype = xw.dtype })
  local has_c = state[2] ~= nil
  local function body(i, y, h, c)
    local t = reverse and last + 1 - i or i
    local s, row = advance(step, xw[t], { h, c }, lens, t)
    y = y:index_add(1, t, row:unsqueeze(1))
    if has_c then return y, s[1], s[2] end
    return y, s[1]
  end
  local init = { y0, h0, state[2] }
  local y, h, c = control.fori_loop(1, last, body, has_c and init or { y0, h0 })
  return y, { h, has_c and c or nil }
end

-- ---- the layers ----
-- the inputs of an ONNX recurrent node in layout-0 shapes, checked; ngates: G
local function read_inputs(op, ins, at, ngates)
  if at.layout ~= 0 and at.layout ~= 1 then refuse(op .. ": layout must be 0 or 1, got " .. tostring(at.layout)) end
  local ndir = ({ forward = 1, reverse = 1, bidirectional = 2 })[at.direction]
  if not ndir then
    refuse(op .. ": direction must be forward, reverse or bidirectional, got " .. tostring(at.direction))
  end
  local x, w, r = T(ins[1]), T(ins[2]), T(ins[3])
  if #x.shape ~= 3 or #w.shape ~= 3 or #r.shape ~= 3 then
    refuse(op .. ": X, W and R must have rank 3")
  end
  if at.layout == 1 then x = x:transpose(1, 2) end
  local H = at.hidden_size or r.shape[3]
  if w.shape[1] ~= ndir or r.shape[1] ~= ndir then
    refuse(string.format("%s: W and R must have %d directions (dim 0), got %s and %s", op, ndir,
      tostring(w.shape[1]), tostring(r.shape[1])))
  end
  if w.shape[2] ~= ngates * H or r.shape[2] ~= ngates * H or r.shape[3] ~= H then
    refuse(string.format("%s: W and R must be (%d, %d, *) and R's last dim %d for hidden_size %d", op, ndir,
      ngates * H, H, H))
  end
  local N = x.shape[2]
  local function state(v)
    if not v then return F.zeros({ ndir, N, H }, { dtype = x.dtype }) end
    v = T(v)
    return at.layout == 1 and v:transpose(1, 2) or v
  end
  return {
    x = x, w = w, r = r, H = H, ndir = ndir, N = N,
    b = ins[4] and T(ins[4]) or nil,
    lens = ins[5] and T(ins[5]):astype("i64") or nil,
    h0 = state(ins[6]), c0 = ngates == 4 and state(ins[7]) or nil,
    p = ins[8] and T(ins[8]) or nil,
  }
end

-- runs every direction of the layer: cell(d, inp) -> step function of direction d (1-based) with
-- step(xw_t, h, c); returns Y, Y_h, Y_c in the node's layout
local function run_layer(op, at, inp, cell)
  if at.clip and at.clip <= 0 then refuse(op .. ": clip must be positive, got " .. tostring(at.clip)) end
  local ys, hs, cs = {}, {}, {}
  for d = 1, inp.ndir do
    local reverse = at.direction == "reverse" or d == 2
    local xw = F.matmul(inp.x, inp.w:select(1, d):t()) -- (T, N, G*H)
    if inp.b then xw = xw + inp.b:select(1, d):narrow(1, 1, inp.w.shape[2]) end
    local state = { inp.h0:select(1, d), inp.c0 and inp.c0:select(1, d) }
    local drive = type(xw.shape[1]) == "number" and unrolled or looped
    local y, last = drive(xw, cell(d, inp), state, reverse, inp.lens)
    ys[d], hs[d], cs[d] = y, last[1], last[2]
  end
  local y, yh = F.stack(ys, 2), F.stack(hs, 1) -- (T, D, N, H), (D, N, H)
  local yc = inp.c0 and F.stack(cs, 1) or nil
  if at.layout == 1 then
    y, yh = y:permute(3, 1, 2, 4), yh:transpose(1, 2)
    if yc then yc = yc:transpose(1, 2) end
  end
  return y, yh, yc
end

-- gate k (1-based) of a (N, G*H) tensor
local function gate(v, k, H) return v:narrow(2, (k - 1) * H + 1, H) end
-- the recurrent bias of direction d: (G*H), or nil
local function rbias(inp, d)
  if not inp.b then return nil end
  local gh = inp.w.shape[2]
  return inp.b:select(1, d):narrow(1, gh + 1, gh)
end
-- h R^T (+ Rb)
local function recurrent(h, rt, rb)
  local v = F.matmul(h, rt)
  return rb and v + rb or v
end
local function clipper(at)
  if not at.clip then return function(v) return v end end
  return function(v) return F.clamp(v, -at.clip, at.clip) end
end

local COMMON_ATTRS = { activation_alpha = false, activation_beta = false, activations = false, clip = false,
  direction = "forward", hidden_size = false, layout = 0 }
local function attrs(extra)
  local a = {}
  for k, v in pairs(COMMON_ATTRS) do a[k] = v end
  for k, v in pairs(extra) do a[k] = v end
  return a
end

-- LSTM (gates i, o, f, c): i = f(Xi + Hi + Pi c), f = f(Xf + Hf + Pf c) (1 - i with input_forget),
-- c~ = g(Xc + Hc), c' = f c + i c~, o = f(Xo + Ho + Po c'), h' = o h(c')
def("LSTM", attrs { input_forget = 0 }, function(ins, at)
  local inp = read_inputs("LSTM", ins, at, 4)
  local acts = activations("LSTM", at, 3, { "Sigmoid", "Tanh", "Tanh" }, inp.ndir)
  local clip, H = clipper(at), inp.H
  return run_layer("LSTM", at, inp, function(d)
    local f, g, hact = acts[d][1], acts[d][2], acts[d][3]
    local rt, rb = inp.r:select(1, d):t(), rbias(inp, d)
    local p = inp.p and inp.p:select(1, d)
    local pi, po, pf = p and p:narrow(1, 1, H), p and p:narrow(1, H + 1, H), p and p:narrow(1, 2 * H + 1, H)
    return function(xw, h, c)
      local z = xw + recurrent(h, rt, rb)
      local zi, zo, zf, zc = gate(z, 1, H), gate(z, 2, H), gate(z, 3, H), gate(z, 4, H)
      if p then zi, zf = zi + pi * c, zf + pf * c end
      local i = f(clip(zi))
      local fg = at.input_forget ~= 0 and (1 - i) or f(clip(zf))
      local c2 = fg * c + i * g(clip(zc))
      if p then zo = zo + po * c2 end
      return f(clip(zo)) * hact(c2), c2
    end
  end)
end)

-- GRU (gates z, r, h): z = f(Xz + Hz), r = f(Xr + Hr), h~ = g(Xh + (r h) Rh^T + Rbh) (linear_before_reset 0)
-- or g(Xh + r (h Rh^T + Rbh)) (1), h' = (1 - z) h~ + z h
def("GRU", attrs { linear_before_reset = 0 }, function(ins, at)
  local inp = read_inputs("GRU", ins, at, 3)
  local acts = activations("GRU", at, 2, { "Sigmoid", "Tanh" }, inp.ndir)
  local clip, H = clipper(at), inp.H
  return run_layer("GRU", at, inp, function(d)
    local f, g = acts[d][1], acts[d][2]
    local rt, rb = inp.r:select(1, d):t(), rbias(inp, d)
    local rt_zr, rb_zr = rt:narrow(2, 1, 2 * H), rb and rb:narrow(1, 1, 2 * H)
    local rt_h, rb_h = rt:narrow(2, 2 * H + 1, H), rb and rb:narrow(1, 2 * H + 1, H)
    return function(xw, h)
      local zr = gate(xw, 1, 2 * H) + recurrent(h, rt_zr, rb_zr)
      local z, r = f(clip(gate(zr, 1, H))), f(clip(gate(zr, 2, H)))
      local hh
      if at.linear_before_reset ~= 0 then hh = r * recurrent(h, rt_h, rb_h)
      else hh = recurrent(r * h, rt_h, rb_h) end
      local n = g(clip(gate(xw, 3, H) + hh))
      return (h - n) * z + n
    end
  end)
end)

-- RNN: h' = f(Xt W^T + h R^T + Wb + Rb)
def("RNN", attrs {}, function(ins, at)
  local inp = read_inputs("RNN", ins, at, 1)
  local acts = activations("RNN", at, 1, { "Tanh" }, inp.ndir)
  local clip = clipper(at)
  return run_layer("RNN", at, inp, function(d)
    local f, rt, rb = acts[d][1], inp.r:select(1, d):t(), rbias(inp, d)
    return function(xw, h) return f(clip(xw + recurrent(h, rt, rb))) end
  end)
end)

return OPS
