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

-- the tensors of test_data_set_0/<kind>_0.pb, <kind>_1.pb, ... as ds tensors
local function data_files(dir, kind)
  local list = {}
  for i = 0, 1000 do
    local path = string.format("%s/test_data_set_0/%s_%d.pb", dir, kind, i)
    local bytes = read(path)
    if not bytes then break end
    list[#list + 1] = V.tensor(V.tensor_of(proto.decode("TensorProto", bytes, path), path))
  end
  return list
end

-- nil when got equals want (dtype, shape, values within the tolerance, NaN where NaN), else what differs
function M.differs(got, want)
  if not ds.is_tensor(got) then return "no tensor" end
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

-- runs the case in dir: "pass", or "refused"/"wrong" with a message (one line)
function M.run(dir)
  local ok, g = pcall(ds.onnx.load, dir .. "/model.onnx")
  if not ok then return "refused", tostring(g) end
  local inputs, expected = data_files(dir, "input"), data_files(dir, "output")
  local runs = { { "eager", g } }
  local cok, cg = pcall(ds.compile, g, { freeze = true })
  if not cok then return "refused", "compile: " .. tostring(cg) end
  runs[2] = { "compiled", cg }
  for _, r in ipairs(runs) do
    local rok, res = pcall(function() return { r[2](unpack(inputs)) } end)
    if not rok then return "refused", r[1] .. ": " .. tostring(res) end
    for k, want in ipairs(expected) do
      local d = M.differs(res[k], want)
      if d then return "wrong", string.format("%s: output %d: %s", r[1], k, d) end
    end
  end
  return "pass", ""
end

return M
