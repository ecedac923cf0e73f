-- ops/sampling.lua: multinomial, category indices drawn from rows of probabilities on the Philox generator
-- (kernel in src/random.c): its op-table entry and ds.multinomial / p:multinomial (torch.multinomial).
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local random = require("ds.random")
local first = #D.list + 1 -- this family's ops, returned at the end

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- probs (k) | (rows, k) f32/f64, state (2) i64 -> (n) | (rows, n) i64, 1-based indices
local def = D.define {
  name = "multinomial", doc = "n category indices (1-based) per row of probs, with or without replacement",
  kind = "random", kernel = "ds_multinomial_%s", dtypes = C.FLOAT, ninputs = 2, mutates = { 2 },
  attrs = { { "n", "int", 1 }, { "replacement", "bool", false } }, args = { "n", "replacement" },
  infer = function(inputs, a)
    local p, st = inputs[1], inputs[2]
    if p.dtype ~= "f32" and p.dtype ~= "f64" then
      raise("multinomial: only supports floating-point dtypes for probs, got %s", p.dtype)
    end
    local nd = #p._shape
    if nd ~= 1 and nd ~= 2 then raise("multinomial: prob_dist must be 1 or 2 dim, got %s", S.str(p._shape)) end
    if st.dtype ~= "i64" or #st._shape ~= 1 or st._shape[1] ~= 2 then
      raise("multinomial: generator state must be an i64 tensor of shape (2), got %s %s", st.dtype, S.str(st._shape))
    end
    if type(a.n) ~= "number" then raise("multinomial: the number of samples n is symbolic (%s); it must be a number",
      tostring(a.n)) end
    if a.n < 1 then raise("multinomial: cannot sample n_sample <= 0 samples (n = %d)", a.n) end
    local k = p._shape[nd]
    if not a.replacement and type(k) == "number" and a.n > k then
      raise("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement (n = %d, %d "
        .. "categories)", a.n, k)
    end
    return { shape = nd == 1 and { a.n } or { p._shape[1], a.n }, dtype = "i64" }
  end,
  kernel_dtype = function(inputs) return inputs[1].dtype end,
  sample = function()   -- fixed probabilities, draws from the live generator
    return { C.functions.tensor({ { 0.1, 0.2, 0.7 }, { 0.5, 0, 0.5 } }) }, {}, function(p)
      return C.functions.multinomial(p, 2), C.functions.multinomial(p, 5, true)
    end
  end,
}

-- multinomial(probs, n, [replacement] | [{replacement = false}]): n 1-based category indices per row of probs
-- (k) | (rows, k), weights that need not sum to 1
C.export("multinomial", function(probs, n, opts)
  local replacement = opts
  if type(opts) == "table" then
    replacement = options.check(opts, "multinomial", { replacement = "boolean" }).replacement
  end
  return D.call(def, { probs, random.state() }, { n = n, replacement = replacement == true })
end, { args = { "tensor", "integer", "boolean|table?" } })

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
