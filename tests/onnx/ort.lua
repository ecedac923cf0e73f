-- tests/onnx/ort.lua: run ONNX models in ONNX Runtime (tests/onnx/ort_run.js under Node) and check them with
-- python3-onnx's checker and shape inference, from Lua; for the ONNX spec, examples and bench.
local cjson = require("cjson")
local ds = require("ds")

local M = {}
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
M.RUNNER = here .. "/ort_run.js"
M.CHECKER = here .. "/check_models.py"
M.PYTHON = "/usr/bin/python3" -- Debian's python3 with python3-onnx (a pyenv python3 on PATH may lack it)
M.TIMEOUT = 300               -- seconds any one batch of models may take
-- Node and Python run without make test-asan's sanitizer preload: they are references, not ds, and programs
-- not built for ASan can hang under its preloaded runtime (curl does)
local UNSANITIZED = "env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS "

local ORT_TYPE = { f32 = "float32", f64 = "float64", i64 = "int64", i32 = "int32", bool = "bool", u8 = "uint8" }
local DS_TYPE = {}
for k, v in pairs(ORT_TYPE) do DS_TYPE[v] = k end

local function tmpname(tag) return os.tmpname() .. "." .. tag end
local function write(path, s) local f = assert(io.open(path, "wb")); f:write(s); f:close() end
local function read(path) local f = assert(io.open(path, "rb")); local s = f:read("*a"); f:close(); return s end

-- a ds tensor as the runner's {type, dims, data}
function M.feed_tensor(t)
  local flat = t:contiguous():reshape(-1):totable()
  if t.dtype == "bool" then for i, v in ipairs(flat) do flat[i] = v == true end end
  return { type = ORT_TYPE[t.dtype] or error("ort: no ONNX Runtime type for " .. t.dtype), dims = t.shape, data = flat }
end

-- the runner's output {type, dims, data} as a ds tensor (JSON null, ORT's NaN, becomes NaN)
function M.to_tensor(o)
  local dt = DS_TYPE[o.type] or error("ort: unexpected output type " .. tostring(o.type))
  local data = {}
  for i, v in ipairs(o.data) do data[i] = v == cjson.null and 0 / 0 or v end
  if dt == "bool" then for i, v in ipairs(data) do data[i] = v ~= 0 and v ~= false end end
  if #o.dims == 0 then return ds.tensor(data[1], { dtype = dt }) end
  if #data == 0 then return ds.zeros(o.dims, { dtype = dt }) end
  return ds.tensor(data, { dtype = dt }):reshape(o.dims)
end

-- JSON with numbers printed exactly (%.17g; cjson stops at 14 digits); booleans, strings, lists, objects
local function encode(v, out)
  out = out or {}
  local t = type(v)
  if t == "number" then
    out[#out + 1] = v ~= v and "null" or v == math.huge and "1e999" or v == -math.huge and "-1e999"
      or (v == math.floor(v) and math.abs(v) < 2 ^ 53) and string.format("%d", v) or string.format("%.17g", v)
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "string" then out[#out + 1] = cjson.encode(v)
  elseif t == "table" then
    if next(v) == nil or v[1] ~= nil then
      out[#out + 1] = "["
      for i, x in ipairs(v) do if i > 1 then out[#out + 1] = "," end; encode(x, out) end
      out[#out + 1] = "]"
    else
      out[#out + 1] = "{"
      local first = true
      for k, x in pairs(v) do
        if not first then out[#out + 1] = "," end
        first = false
        out[#out + 1] = cjson.encode(tostring(k)) .. ":"
        encode(x, out)
      end
      out[#out + 1] = "}"
    end
  end
  return out
end
local function to_json(v) return table.concat(encode(v)) end

-- runs: {{model = path, feeds = {{name = tensor, ...}, ...}, threads =, optimization =, warmup =, keep =}, ...}
-- -> list of {outputs = {{name = tensor}...}, names = {...}, seconds = s} or {error = msg}
function M.run(runs)
  local req = { runs = {} }
  for i, r in ipairs(runs) do
    local feeds = {}
    for j, f in ipairs(r.feeds) do
      feeds[j] = {}
      for name, t in pairs(f) do feeds[j][name] = M.feed_tensor(t) end
    end
    req.runs[i] = { model = r.model, feeds = feeds, threads = r.threads, optimization = r.optimization,
      warmup = r.warmup, keep = r.keep }
  end
  local rq, rs = tmpname("json"), tmpname("out.json")
  write(rq, to_json(req))
  local cmd = string.format(UNSANITIZED .. "timeout %d node %q %q %q 2>%q", M.TIMEOUT, M.RUNNER, rq, rs, rs .. ".err")
  local ok = os.execute(cmd)
  os.remove(rq)
  local okf = io.open(rs, "rb")
  if not (ok == 0 or ok == true) or not okf then
    local err = io.open(rs .. ".err") and read(rs .. ".err") or ""
    os.remove(rs); os.remove(rs .. ".err")
    error("ort: the Node runner failed (" .. cmd .. "): " .. err:sub(1, 2000))
  end
  okf:close()
  local res = cjson.decode(read(rs))
  os.remove(rs); os.remove(rs .. ".err")
  local out = {}
  for i, r in ipairs(res.runs) do
    if r.error then out[i] = { error = r.error }
    else
      local outs = {}
      for j, o in ipairs(r.outputs) do
        outs[j] = {}
        for name, t in pairs(o) do outs[j][name] = M.to_tensor(t) end
      end
      out[i] = { outputs = outs, names = r.output_names, seconds = r.seconds }
    end
  end
  return out
end

-- check_model(full_check = True) and strict shape inference of each path; returns {path = "ok" | error text}
function M.check(paths)
  local list = tmpname("txt")
  write(list, table.concat(paths, "\n") .. "\n")
  local out = tmpname("out")
  local ok = os.execute(string.format(UNSANITIZED .. "timeout %d %s %q %q > %q 2>&1", M.TIMEOUT, M.PYTHON, M.CHECKER, list, out))
  os.remove(list)
  local text = read(out)
  os.remove(out)
  if not (ok == 0 or ok == true) then error("ort: the ONNX checker failed to run: " .. text:sub(1, 2000)) end
  local res = {}
  for line in text:gmatch("[^\n]+") do
    local path, verdict = line:match("^(.-)\t(.*)$")
    if path then res[path] = verdict end
  end
  return res
end

return M
