-- ops/segment_attention.lua: segment_attention, attention over packed sequences of different lengths (each
-- sequence's queries see only its own keys) on the C kernel of src/nn_attention.c; inference only.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local OP = "segment_attention"

-- q (Nq, heads, E), k (Nk, heads, E), v (Nk, heads, Ev), qseg and kseg (B, 2) i64 -> (Nq, heads, Ev)
local function infer(inputs)
  local q, k, v = inputs[1]._shape, inputs[2]._shape, inputs[3]._shape
  if #q ~= 3 or #k ~= 3 or #v ~= 3 or not S.same(q[2], k[2]) or not S.same(q[2], v[2]) or not S.same(q[3], k[3])
    or not S.same(k[1], v[1]) then
    raise("%s: q %s, k %s, v %s do not fit (Nq, heads, E), (Nk, heads, E), (Nk, heads, Ev)", OP, S.str(q),
      S.str(k), S.str(v))
  end
  for i, name in ipairs { "qseg", "kseg" } do
    local s = inputs[3 + i]
    if s.dtype ~= "i64" or #s._shape ~= 2 or not S.same(s._shape[2], 2) then
      raise("%s: %s must be (B, 2) i64 rows {first (1-based), count}, got %s %s", OP, name, S.str(s._shape), s.dtype)
    end
  end
  if not S.same(inputs[4]._shape[1], inputs[5]._shape[1]) then
    raise("%s: qseg %s and kseg %s differ in B", OP, S.str(inputs[4]._shape), S.str(inputs[5]._shape))
  end
  return { shape = { q[1], q[2], v[3] }, dtype = inputs[1].dtype }
end

local function wave(phase, ...)   -- fixed sample values
  local shape = { ... }
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return F.sin(F.arange(n, { dtype = "f32" }) * 0.7 + phase):reshape(shape)
end

local def = D.define {
  name = OP,
  doc = "attention of packed sequences: the queries of rows qseg[b] see the keys of rows kseg[b] only "
    .. "(F.segment_attention, inference)",
  kind = "nn", kernel = "ds_segment_attention_%s", dtypes = C.FLOAT, ninputs = 5,
  attrs = { { "scale", "float" } },
  promote = function(inputs)
    local qkv = C.promote_float { inputs[1], inputs[2], inputs[3] }
    qkv[4], qkv[5] = inputs[4], inputs[5]
    return qkv
  end,
  pack = function(a) return { a.scale } end,
  infer = infer,
  backward = function() raise("%s: no gradient (an inference op; train with scaled_dot_product_attention)", OP) end,
  sample = function()
    local seg = F.tensor({ { 1, 2 }, { 3, 3 } }, { dtype = "i64" })
    return { wave(0, 5, 2, 4), wave(1, 5, 2, 4), wave(2, 5, 2, 3), seg, seg }, {}, function(q, k, v, qs, ks)
      return F.segment_attention(q, k, v, qs, ks, { scale = 0.5 })
    end
  end,
}

-- ds.segment_attention(q, k, v, qseg, kseg, {scale =}): for each b, the query rows qseg[b] = {first, count}
-- of q (Nq, heads, E) attend to the key rows kseg[b] of k and v, head by head, as
-- scaled_dot_product_attention does on that sequence alone (bitwise); rows in no query segment, or in one whose
-- key segment is empty, are 0.
-- Query segments are in row order and disjoint; scale: 1/sqrt(E) by default.
C.export(OP, function(q, k, v, qseg, kseg, opts)
  opts = opts or {}
  for key in pairs(opts) do
    if key ~= "scale" then raise("%s: unknown option '%s' (scale)", OP, tostring(key)) end
  end
  local E = q._shape[#q._shape]
  local scale = opts.scale
  if scale == nil then
    if type(E) ~= "number" then raise("%s: the default scale needs a static last dim E; pass scale", OP) end
    scale = 1 / math.sqrt(E)
  end
  if type(scale) ~= "number" then raise("%s: scale must be a number, got %s", OP, type(scale)) end
  return D.call(def, { q, k, v, qseg, kseg }, { scale = scale })
end, { method = false, args = { "tensor", "tensor", "tensor", "tensor", "tensor", "table?" } })

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
