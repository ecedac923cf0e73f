-- tests/onnx/conformance.lua: runs one case of ONNX's backend conformance node tests (a directory with
-- model.onnx and test_data_set_0/{input,output}_N.pb) in ds, eagerly and compiled, against its expected outputs.
local ds = require("ds")
local proto = require("ds.onnx.proto")
local V = require("ds.onnx.import_values")
local dtype = require("ds.dtype")

local M = {}
M.RTOL, M.ATOL = 1e-4, 1e-5 -- floats; integers and bools are compared exactly

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- ---- SequenceProto and OptionalProto (onnx-data.proto, which libds_onnx.so does not hold): the protobuf wire
-- format read here, each TensorProto in them decoded by ds.onnx.proto ----
local NONE = {} -- an empty optional among the values of a data file

-- a varint at bytes[pos]: value, next position
local function varint(bytes, pos)
  local v, scale = 0, 1
  repeat
    local b = bytes:byte(pos)
    assert(b, "truncated varint")
    v, scale, pos = v + (b % 128) * scale, scale * 128, pos + 1
  until b < 128
  return v, pos
end

-- the fields of a message: list of {number, value} (a number for a varint, the bytes for a length-delimited field)
local function wire_fields(bytes)
  local out, pos = {}, 1
  while pos <= #bytes do
    local key
    key, pos = varint(bytes, pos)
    local number, wire = math.floor(key / 8), key % 8
    if wire == 0 then
      local v
      v, pos = varint(bytes, pos)
      out[#out + 1] = { number, v }
    elseif wire == 2 then
      local len
      len, pos = varint(bytes, pos)
      out[#out + 1] = { number, bytes:sub(pos, pos + len - 1) }
      pos = pos + len
    else
      error("unexpected wire type " .. wire)
    end
  end
  return out
end

local decode_value
-- SequenceProto fields: 3 tensor_values, 5 sequence_values, 7 optional_values (elem_type 2 says which)
local function decode_sequence(bytes, path)
  local list = {}
  for _, f in ipairs(wire_fields(bytes)) do
    if f[1] == 3 or f[1] == 5 or f[1] == 7 then list[#list + 1] = decode_value(f[1], f[2], path) end
    if f[1] == 4 or f[1] == 6 then error(path .. ": sparse tensors and maps are not read") end
  end
  return list
end
-- OptionalProto fields: 3 tensor_value, 5 sequence_value, 7 optional_value; none of them: empty
local function decode_optional(bytes, path)
  for _, f in ipairs(wire_fields(bytes)) do
    if f[1] == 3 or f[1] == 5 or f[1] == 7 then return decode_value(f[1], f[2], path) end
    if f[1] == 4 or f[1] == 6 then error(path .. ": sparse tensors and maps are not read") end
  end
  return NONE
end
-- field 3: a TensorProto, 5: a SequenceProto, 7: an OptionalProto -> a ds tensor, a Lua list, a value or NONE
decode_value = function(field, bytes, path)
  if field == 5 then return decode_sequence(bytes, path) end
  if field == 7 then return decode_optional(bytes, path) end
  return V.tensor(V.tensor_of(proto.decode("TensorProto", bytes, path), path))
end

-- the field a value of ONNX type tp is read as (3 tensor, 5 sequence, 7 optional)
local function field_of(tp)
  if tp and tp.sequence_type then return 5 end
  if tp and tp.optional_type then return 7 end
  return 3
end

-- the values of test_data_set_0/<kind>_0.pb, <kind>_1.pb, ...: ds tensors, Lua lists, NONE; value_infos: the
-- graph's inputs or outputs (their types say how each file is read)
local function data_files(dir, kind, value_infos)
  local list = {}
  for i = 0, 1000 do
    local path = string.format("%s/test_data_set_0/%s_%d.pb", dir, kind, i)
    local bytes = read(path)
    if not bytes then break end
    local vi = value_infos[i + 1]
    list[#list + 1] = decode_value(field_of(vi and vi.type), bytes, path)
  end
  return list
end

-- the graph inputs (those that are not initializers) and outputs of the model in path
local function model_io(path)
  local g = proto.decode("ModelProto", read(path), path).graph
  local inits, inputs = {}, {}
  for _, init in ipairs(g.initializer or {}) do inits[init.name] = true end
  for _, vi in ipairs(g.input or {}) do
    if not inits[vi.name] then inputs[#inputs + 1] = vi end
  end
  return inputs, g.output or {}
end

-- nil when got equals want (dtype, shape, values within the tolerance, NaN where NaN), else what differs
function M.differs(got, want)
  if not ds.is_tensor(got) then return "no tensor" end
  if not ds.is_tensor(want) then return "a tensor, expected a sequence or an optional" end
  if got.dtype ~= want.dtype then return "dtype " .. got.dtype .. ", expected " .. want.dtype end
  local gs, ws = table.concat(got.shape, "x"), table.concat(want.shape, "x")
  if gs ~= ws then return "shape (" .. gs .. "), expected (" .. ws .. ")" end
  if want:numel() == 0 then return nil end
  local a, b = got:astype("f64"), want:astype("f64")
  local bad
  if dtype.is_float[want.dtype] then
    local nan_a, nan_b = a:ne(a), b:ne(b)
    local same = a:eq(b) -- infinities and exact values
    local close = (a - b):abs():le(b:abs() * M.RTOL + M.ATOL)
    bad = nan_a:ne(nan_b):logical_or(nan_b:logical_not():logical_and(same:logical_or(close):logical_not()))
  else
    bad = a:ne(b)
  end
  local n = bad:sum():item()
  if n == 0 then return nil end
  local err = (a - b):abs():amax():item()
  return string.format("%d of %d values differ (max |diff| %.3g)", n, want:numel(), err)
end

-- differs() for values that may be sequences (Lua lists, compared item by item) and empty optionals (NONE: nil)
local function value_differs(got, want)
  if want == NONE then return got ~= nil and "a value, expected an empty optional" or nil end
  if got == nil then return "nothing (an empty optional)" end
  if ds.is_tensor(want) then return M.differs(got, want) end
  if type(got) ~= "table" or ds.is_tensor(got) then return "a tensor, expected a sequence" end
  if #got ~= #want then return string.format("a sequence of %d items, expected %d", #got, #want) end
  for i, w in ipairs(want) do
    local d = value_differs(got[i], w)
    if d then return "item " .. i .. ": " .. d end
  end
  return nil
end

-- runs the case in dir: "pass", or "refused"/"wrong" with a message (one line)
function M.run(dir)
  local ok, g = pcall(ds.onnx.load, dir .. "/model.onnx")
  if not ok then return "refused", tostring(g) end
  local in_infos, out_infos = model_io(dir .. "/model.onnx")
  local inputs, expected = data_files(dir, "input", in_infos), data_files(dir, "output", out_infos)
  local n_inputs = #inputs
  for i = 1, n_inputs do if inputs[i] == NONE then inputs[i] = nil end end
  local runs = { { "eager", g } }
  local cok, cg = pcall(ds.compile, g, { freeze = true })
  if not cok then return "refused", "compile: " .. tostring(cg) end
  runs[2] = { "compiled", cg }
  for _, r in ipairs(runs) do
    local rok, res = pcall(function() return { r[2](unpack(inputs, 1, n_inputs)) } end)
    if not rok then return "refused", r[1] .. ": " .. tostring(res) end
    for k, want in ipairs(expected) do
      local d = value_differs(res[k], want)
      if d then return "wrong", string.format("%s: output %d: %s", r[1], k, d) end
    end
  end
  return "pass", ""
end

return M
