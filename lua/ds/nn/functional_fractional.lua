-- nn/functional_fractional.lua: ds.F.fractional_max_pool2d / fractional_max_pool3d (PyTorch 1.13's): per sample and
-- channel, window starts int((i + u) alpha) - int(u alpha) (alpha = (in - k) / (out - 1), the last window at
-- in - k) from a uniform u per dim, computed in the input's dtype as PyTorch's kernel does; the max of each window
-- (the first of ties) and its 1-based index flat over the spatial dims. Composed of gathers and a max, so it
-- differentiates (into the maxima), traces and compiles. The samples (N, C, dims) come from ds's generator, or are
-- given (_random_samples: PyTorch's order, W then H for 2-D, T, H, W for 3-D).
local ops = require("ds.ops.common").functions
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local random = require("ds.random")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- n spatial dims; sample_of[d]: the sample column of spatial dim d; strict: PyTorch 1.13's 3-D check wants
-- output + kernel - 1 below the input size (the 2-D one allows equal)
local function fractional(name, n, sample_of, strict)
  return function(x, kernel_size, opts)
    if not Tensor.is_tensor(x) then raise("%s: input must be a tensor, got %s", name, type(x)) end
    opts = options.check(opts, name, { output_size = "any", output_ratio = "any", return_indices = "boolean",
      _random_samples = "tensor" })
    local batched = #x._shape == n + 2
    if not batched and #x._shape ~= n + 1 then
      raise("%s: input must have %d or %d dims, got %s", name, n + 1, n + 2, S.str(x._shape))
    end
    if not batched then x = x:unsqueeze(1) end
    local function tuple(v, what)
      if type(v) == "number" then local t = {}; for i = 1, n do t[i] = v end; v = t end
      if type(v) ~= "table" or #v ~= n then raise("%s: %s must be a number or a list of %d", name, what, n) end
      return v
    end
    local k = tuple(kernel_size, "kernel_size")
    if (opts.output_size == nil) == (opts.output_ratio == nil) then
      raise("%s: give exactly one of output_size and output_ratio", name)
    end
    local N, C = x._shape[1], x._shape[2]
    local sizes, out = {}, {}
    for d = 1, n do
      sizes[d] = x._shape[d + 2]
      if type(sizes[d]) ~= "number" then raise("%s: spatial sizes must be known, got %s", name, S.str(x._shape)) end
      out[d] = opts.output_size and tuple(opts.output_size, "output_size")[d]
        or math.floor(sizes[d] * tuple(opts.output_ratio, "output_ratio")[d])
      local span = out[d] + k[d] - 1
      if out[d] < 1 or span > sizes[d] or (strict and span == sizes[d]) then
        raise("%s: output size %d with kernel %d does not fit an input of %d", name, out[d], k[d], sizes[d])
      end
    end
    local samples = opts._random_samples
    if samples == nil then samples = random.rand(N, C, n, { dtype = x.dtype })
    elseif #samples._shape ~= 3 or not S.same(samples._shape[1], N) or not S.same(samples._shape[2], C)
      or samples._shape[3] ~= n then
      raise("%s: _random_samples must be (N, C, %d), got %s", name, n, S.str(samples._shape))
    end
    samples = samples:astype(x.dtype)
    -- starts (N, C, out_d) per dim, broadcast against the other dims
    local starts = {}
    for d = 1, n do
      local u = samples:select(3, sample_of[d]):unsqueeze(3) -- (N, C, 1)
      local s
      if out[d] > 1 then
        local alpha = (sizes[d] - k[d]) / (out[d] - 1)
        local i = ops.arange(0, out[d], { dtype = x.dtype })
        s = ops.floor((i + u) * alpha) - ops.floor(u * alpha)
        local last = ops.eq(ops.arange(1, out[d] + 1, { dtype = "i64" }), out[d])
        s = ops.where(last, ops.full_like(s, sizes[d] - k[d]), s)
      else
        s = ops.full({ N, C, 1 }, sizes[d] - k[d], { dtype = x.dtype })
      end
      local shape = { N, C }
      for e = 1, n do shape[e + 2] = e == d and out[d] or 1 end
      starts[d] = s:astype("i64"):reshape(shape)
    end
    -- the flat (0-based) position of window offset `off` (per dim) of every output cell
    local strides, total = {}, 1
    for d = n, 1, -1 do strides[d] = total; total = total * sizes[d] end
    local flat_in = x:reshape(N, C, total)
    local cells = 1
    for d = 1, n do cells = cells * out[d] end
    local values, positions = {}, {}
    local off = {}
    for d = 1, n do off[d] = 0 end
    while true do
      local pos
      for d = 1, n do
        local term = (starts[d] + off[d]) * strides[d]
        pos = pos and pos + term or term
      end
      local flat_pos = pos:expand(N, C, unpack(out)):reshape(N, C, cells)
      values[#values + 1] = ops.gather(flat_in, 3, flat_pos + 1)
      positions[#positions + 1] = flat_pos
      local d = n
      while d >= 1 do
        off[d] = off[d] + 1
        if off[d] < k[d] then break end
        off[d] = 0
        d = d - 1
      end
      if d < 1 then break end
    end
    local y, which = ops.stack(values, 4):max(4) -- (N, C, cells): the first max in the window's row-major order
    local shape = { N, C }
    for d = 1, n do shape[d + 2] = out[d] end
    y = y:reshape(shape)
    local function back(t) return batched and t or t:squeeze(1) end
    if not opts.return_indices then return back(y) end
    local index = ops.gather(ops.stack(positions, 4), 4, which:unsqueeze(4)):squeeze(4) + 1
    return back(y), back(index:reshape(shape))
  end
end
M.fractional_max_pool2d = fractional("fractional_max_pool2d", 2, { 2, 1 }, false)
M.fractional_max_pool3d = fractional("fractional_max_pool3d", 3, { 1, 2, 3 }, true)

return M
