-- ops/random.lua: op-table entries of the random ops (rand, randn, randint) on the Philox generator.
-- Each op's only input is the generator state (an i64 tensor {seed, offset}, see ds/random.lua),
-- which the kernel advances in place: `mutates = { 1 }` tells the tracer it is a state write.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local first = #D.list + 1 -- this family's ops, returned at the end

local function check_state(name, state)
  if state.dtype ~= "i64" or #state._shape ~= 1 or state._shape[1] ~= 2 then
    errors.raise(string.format("%s: generator state must be an i64 tensor of shape (2), got %s %s",
      name, state.dtype, S.str(state._shape)))
  end
end

-- state: (2) i64 -> out: attrs.shape, attrs.dtype
local function def_random(name, doc, dtypes, default_dtype, params)
  local attrs = { { "shape", "ints" } }
  for _, p in ipairs(params) do attrs[#attrs + 1] = { p[1], "float", p[2] } end
  attrs[#attrs + 1] = { "dtype", "dtype", default_dtype }
  return D.define {
    name = name, doc = doc, kind = "random", kernel = "ds_" .. name .. "_%s", dtypes = dtypes, ninputs = 1,
    mutates = { 1 }, attrs = attrs,
    infer = function(inputs, a)
      check_state(name, inputs[1])
      return { shape = a.shape, dtype = a.dtype }
    end,
    kernel_dtype = function(_, outputs) return outputs[1].dtype end,
    pack = function(a) return { a[params[1][1]], a[params[2][1]] } end,
  }
end

def_random("rand", "uniform in [low, high)", C.FLOAT, "f32", { { "low", 0 }, { "high", 1 } })
def_random("randn", "normal with mean and std", C.FLOAT, "f32", { { "mean", 0 }, { "std", 1 } })
def_random("randint", "uniform integers in [low, high)", C.set { "i64", "i32", "f32", "f64" }, "i64",
  { { "low", 0 }, { "high", 2 } })

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
