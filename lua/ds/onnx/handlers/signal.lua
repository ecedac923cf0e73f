-- onnx/handlers/signal.lua: ONNX import handlers of signal-processing ops: the windows (Hann, Hamming,
-- Blackman), DFT, STFT and MelWeightMatrix. Sizes (window size, DFT and frame lengths) decide shapes, so they
-- must be known when the graph is built (constants or graph inputs the model specializes on).
--[[ A complex signal is ONNX's (..., 2) pair (real, imaginary); a real one is (..., 1). The DFT of length N
  along an axis is a product with cos/sin matrices built at import in f64 (the signal is widened to f64 for
  the product, so sums of large terms keep f32 accuracy in the result):
    forward: Y_k = sum_n x_n e^{-2 pi i k n / N};  inverse: (1 / N) sum_n x_n e^{+2 pi i k n / N}. ]]
local F = require("ds.ops")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T = V.tensor
local rank, axis0, refuse = common.rank, common.axis0, common.refuse

local function size_of(v, what)
  local n = V.ints(v, what)[1]
  if n == nil or n < 0 or n ~= math.floor(n) then refuse(what .. " must be a non-negative integer") end
  return n
end
local function out_dtype(at, what)
  return types.DS[at.output_datatype] or refuse(what .. ": output_datatype " .. tostring(at.output_datatype) ..
    " is not supported")
end

-- ---- windows: sum_j a_j cos(2 pi j n / N) with alternating signs; N = size (periodic) or size - 1 ----
local WINDOWS = { HannWindow = { 0.5, 0.5 }, HammingWindow = { 25 / 46, 21 / 46 },
  BlackmanWindow = { 0.42, 0.5, 0.08 } }
for op, coef in pairs(WINDOWS) do
  def(op, { periodic = 1, output_datatype = 1 }, function(ins, at)
    local size = size_of(ins[1], op .. "'s size")
    local denom = at.periodic ~= 0 and size or size - 1
    local w = {}
    for n = 0, size - 1 do
      local v = 0
      for j, a in ipairs(coef) do v = v + (j % 2 == 1 and 1 or -1) * a * math.cos(2 * math.pi * (j - 1) * n / denom) end
      w[n + 1] = v
    end
    local dt = out_dtype(at, op)
    if size == 0 then return F.zeros({ 0 }, { dtype = dt }) end
    return F.tensor(w, { dtype = "f64" }):astype(dt)
  end)
end

-- cos and sin matrices (K, N) of the DFT of length N keeping the first K frequencies, f64
local function dft_matrices(K, N)
  local c, s = {}, {}
  for k = 0, K - 1 do
    c[k + 1], s[k + 1] = {}, {}
    for n = 0, N - 1 do
      local phase = 2 * math.pi * ((k * n) % N) / N
      c[k + 1][n + 1], s[k + 1][n + 1] = math.cos(phase), math.sin(phase)
    end
  end
  return F.tensor(c, { dtype = "f64" }), F.tensor(s, { dtype = "f64" })
end

-- re, im (..., N) f64 -> the DFT's re, im (..., K)
local function dft_last(re, im, N, K, inverse)
  local c, s = dft_matrices(K, N)
  local ct, st = c:t(), s:t()
  local yr, yi
  if inverse then
    yr = F.matmul(re, ct) - (im and F.matmul(im, st) or 0)
    yi = F.matmul(re, st) + (im and F.matmul(im, ct) or 0)
    yr, yi = yr / N, yi / N
  else
    yr = F.matmul(re, ct) + (im and F.matmul(im, st) or 0)
    yi = (im and F.matmul(im, ct) or 0) - F.matmul(re, st)
  end
  return yr, yi
end

-- x (..., n, ..., 1 or 2) -> (..., K, ..., 2): the DFT along dim d (1-based) of length N (zero-padded or cut)
local function dft(x, d, N, onesided, inverse, op)
  local r = rank(x)
  local c = x.shape[r]
  if c ~= 1 and c ~= 2 then refuse(op .. ": the last dim must be 1 (real) or 2 (complex), got " .. tostring(c)) end
  if onesided and c == 2 then refuse(op .. ": onesided needs a real signal") end
  local n = x.shape[d]
  if type(n) ~= "number" then refuse(op .. ": the signal length must be static, got " .. tostring(n)) end
  local xw = x:astype("f64")
  if N < n then xw = xw:narrow(d, 1, N) end
  if N > n then
    local pad = xw.shape
    pad[d] = N - n
    xw = F.cat({ xw, F.zeros(pad, { dtype = "f64" }) }, d)
  end
  local re = xw:select(r, 1):transpose(d, r - 1)   -- (..., N) with the signal axis last
  local im = c == 2 and xw:select(r, 2):transpose(d, r - 1) or nil
  local K = onesided and math.floor(N / 2) + 1 or N
  local yr, yi = dft_last(re, im, N, K, inverse)
  return F.stack({ yr:transpose(d, r - 1), yi:transpose(d, r - 1) }, r):astype(x.dtype)
end

def("DFT", { axis = 1, inverse = 0, onesided = 0 }, function(ins, at)
  local x = T(ins[1])
  local r = rank(x)
  local a = axis0(at.axis, r, "DFT")
  if a == r - 1 then refuse("DFT: axis must not be the last dim (it holds the real and imaginary parts)") end
  local N = ins[2] and size_of(ins[2], "DFT's dft_length") or x.shape[a + 1]
  if type(N) ~= "number" then refuse("DFT: the signal length must be static, got " .. tostring(N)) end
  if at.inverse ~= 0 and at.onesided ~= 0 then refuse("DFT: onesided inverse transforms are not supported") end
  return dft(x, a + 1, N, at.onesided ~= 0, at.inverse ~= 0, "DFT")
end)

-- STFT: signal (batch, length, 1 or 2) -> (batch, frames, bins, 2); frames of frame_length every frame_step,
-- each multiplied by the window, then the DFT of each frame
def("STFT", { onesided = 1 }, function(ins, at)
  local x = T(ins[1])
  local step = size_of(ins[2], "STFT's frame_step")
  local window = ins[3] and T(ins[3]) or nil
  local len = ins[4] and size_of(ins[4], "STFT's frame_length") or (window and window.shape[1])
  if type(len) ~= "number" then refuse("STFT needs a window or a frame_length") end
  if window and window.shape[1] ~= len then refuse("STFT: the window's length differs from frame_length") end
  local n = x.shape[2]
  if type(n) ~= "number" or step < 1 or len < 1 or len > n then
    refuse("STFT: frame_step " .. step .. " and frame_length " .. len .. " do not fit the signal length " .. tostring(n))
  end
  local frames = math.floor((n - len) / step) + 1
  local idx = {}
  for f = 0, frames - 1 do for k = 1, len do idx[#idx + 1] = f * step + k end end
  local framed = F.index_select(x, 2, F.tensor(idx, { dtype = "i64" })) -- (batch, frames * len, c)
  local shape = x.shape
  framed = framed:reshape(shape[1], frames, len, shape[3])
  if window then framed = framed * window:astype(x.dtype):reshape(1, 1, len, 1) end
  return dft(framed, 3, len, at.onesided ~= 0, false, "STFT")
end)

-- MelWeightMatrix: (dft_length / 2 + 1, num_mel_bins) triangular filters on the mel scale, as ONNX's reference
-- computes them (bin edges floored to DFT bins)
def("MelWeightMatrix", { output_datatype = 1 }, function(ins, at)
  local bins = size_of(ins[1], "MelWeightMatrix's num_mel_bins")
  local dft_length = size_of(ins[2], "MelWeightMatrix's dft_length")
  local rate = size_of(ins[3], "MelWeightMatrix's sample_rate")
  local lower, upper = V.data(ins[4], "MelWeightMatrix's lower_edge_hertz")[1],
    V.data(ins[5], "MelWeightMatrix's upper_edge_hertz")[1]
  if rate == 0 then refuse("MelWeightMatrix: sample_rate must be positive") end
  local spectrogram_bins = math.floor(dft_length / 2) + 1
  local function mel(hz) return 2595 * math.log10(1 + hz / 700) end
  local low, high = mel(lower), mel(upper)
  local step = (high - low) / (bins + 2)
  local edges = {}
  for i = 0, bins + 1 do
    local hz = 700 * (10 ^ ((i * step + low) / 2595) - 1)
    edges[i + 1] = math.floor((dft_length + 1) * hz / rate)
  end
  local w = {}
  for j = 1, spectrogram_bins do w[j] = {}; for i = 1, bins do w[j][i] = 0 end end
  local function set(j, i, v)
    if j < 0 or j >= spectrogram_bins then refuse("MelWeightMatrix: a filter edge falls outside the spectrogram") end
    w[j + 1][i] = v
  end
  for i = 1, bins do
    local left, center, right = edges[i], edges[i + 1], edges[i + 2]
    if center == left then set(center, i, 1)
    else for j = left, center do set(j, i, (j - left) / (center - left)) end end
    if right > center then for j = center, right - 1 do set(j, i, (right - j) / (right - center)) end end
  end
  return F.tensor(w, { dtype = "f64" }):astype(out_dtype(at, "MelWeightMatrix"))
end)

return OPS
