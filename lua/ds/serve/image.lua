-- serve/image.lua: the "image" input adapter (serve/tensor.lua describes adapters): {"<input name>": H rows of W
-- numbers in 0..255, or a flat list of C*H*W} for a model whose one input is (batch, C, H, W) or (batch, H, W) f32
-- in [0, 1]; the reply {"label", "class" (1-based), "probs"} from the first output's row (labels: the model's
-- "labels" setting, else the class numbers).
local ffi = require("ffi")
local util = require("ds.serve.util")

local M = {}

-- the input spec -> its name, C*H*W, H, W
local function geometry(spec)
  local s = spec.shape
  local H, W = s[#s - 1], s[#s]
  local n = 1
  for d = 2, #s do n = n * s[d] end
  return spec.name, n, H, W
end

function M.row(req, model)
  local specs = model.info.inputs
  if #specs ~= 1 or #specs[1].shape < 3 or specs[1].dtype ~= "f32" then
    return nil, "the image adapter serves models of one f32 input (batch, C, H, W) or (batch, H, W)"
  end
  local name, n, H, W = geometry(specs[1])
  local img = req[name]
  if img == nil then return nil, string.format("missing field '%s' (%dx%d numbers in 0..255)", name, H, W) end
  if type(img) ~= "table" then return nil, "'" .. name .. "' must be an array" end
  local flat = {}
  if #img == H and n == H * W and type(img[1]) == "table" then
    for r = 1, H do
      local row = img[r]
      if type(row) ~= "table" or #row ~= W then
        return nil, string.format("'%s' must be %d rows of %d numbers (row %d is not)", name, H, W, r)
      end
      for c = 1, W do flat[#flat + 1] = row[c] end
    end
  elseif #img == n then
    flat = img
  else
    return nil, string.format("'%s' must have shape %dx%d or %d, got %d entries", name, H, W, n, #img)
  end
  local row = ffi.new("float[?]", n)
  for i = 1, n do
    local v = flat[i]
    if type(v) ~= "number" or v ~= v or v < 0 or v > 255 then
      return nil, string.format("'%s' values must be numbers in 0..255 (entry %d is %s)", name, i, tostring(v))
    end
    row[i - 1] = v / 255
  end
  local shape = {}
  for d, v in ipairs(specs[1].shape) do shape[d] = v end
  return { bytes = ffi.string(row, n * 4), shape = shape, n = 1 }
end

-- rows -> one (B, ...) f32 input, B = util.pow2(#rows); rows past #rows repeat row 1
function M.batch(rows)
  local B = util.pow2(#rows)
  local parts = {}
  for b = 1, B do parts[b] = (rows[b] or rows[1]).bytes end
  local shape = { B }
  for d = 2, #rows[1].shape do shape[d] = rows[1].shape[d] end
  return { { dtype = "f32", shape = shape, bytes = table.concat(parts) } }
end

-- the batches warm compiles at start: one per power of two up to max_batch, of black images
function M.shapes(settings, specs)
  local s = specs[1]
  if not s then return {} end
  local n = 1
  for d = 2, #s.shape do n = n * s.shape[d] end
  local row = { bytes = string.rep("\0", n * 4), shape = s.shape }
  local out, rows = {}, {}
  while #rows < settings.max_batch do
    rows[#rows + 1] = row
    if #rows == util.pow2(#rows) then out[#out + 1] = M.batch(rows) end
  end
  if #rows ~= util.pow2(#rows) then out[#out + 1] = M.batch(rows) end
  return out
end

-- the first output's row as probabilities (f32 or f64), the best class and its label
function M.reply(outputs, _, _, settings)
  local t = outputs[1]
  local p = {}
  local ptr = ffi.cast(t.dtype == "f64" and "const double *" or "const float *", t.bytes)
  for i = 1, #t.bytes / (t.dtype == "f64" and 8 or 4) do p[i] = tonumber(ptr[i - 1]) end
  local best = 1
  for i = 2, #p do if p[i] > p[best] then best = i end end
  return { label = settings.labels and settings.labels[best] or tostring(best), class = best, probs = p }
end

return M
