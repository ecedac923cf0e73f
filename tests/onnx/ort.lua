-- tests/onnx/ort.lua: run ONNX models in ONNX Runtime (tests/onnx/ort_run.js under Node) and check them with
-- python3-onnx's checker and shape inference, from Lua; for the ONNX spec, examples and bench.
local ffi = require("ffi")
local cjson = require("cjson")
local ds = require("ds")
local types = require("ds.onnx.types")

local M = {}
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
M.RUNNER = here .. "/ort_run.js"
M.CHECKER = here .. "/check_models.py"
M.PYTHON = "/usr/bin/python3" -- Debian's python3 with python3-onnx (a pyenv python3 on PATH may lack it)
M.TIMEOUT = 300               -- seconds any one batch of models may take
-- Node and Python run without make test-asan's sanitizer preload: they are references, not ds, and programs
-- not built for ASan can hang under its preloaded runtime (curl does)
local UNSANITIZED = "env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS "

local ORT_TYPE = { f32 = "float32", f64 = "float64", i64 = "int64", i32 = "int32", bool = "bool", u8 = "uint8",
                   f16 = "float16", i8 = "int8" }
local DS_TYPE = {}
for k, v in pairs(ORT_TYPE) do DS_TYPE[v] = k end
M.OPTIMIZATION = "disabled" -- ORT's graph optimizations off: it runs the graph as written (an invalid one fails)

local function tmpname(tag) return os.tmpname() .. "." .. tag end
local function write(path, s) local f = assert(io.open(path, "wb")); f:write(s); f:close() end
local function read(path) local f = assert(io.open(path, "rb")); local s = f:read("*a"); f:close(); return s end

-- ---- base64 of bytes (tensors cross to the runner as their raw little-endian bytes: NaN and inf exactly) ----
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64_VALUE = {}
for i = 1, 64 do B64_VALUE[B64:byte(i)] = i - 1 end
local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = { math.floor(n / 262144), math.floor(n / 4096) % 64, math.floor(n / 64) % 64, n % 64 }
    out[#out + 1] = B64:sub(q[1] + 1, q[1] + 1) .. B64:sub(q[2] + 1, q[2] + 1) ..
      (b and B64:sub(q[3] + 1, q[3] + 1) or "=") .. (c and B64:sub(q[4] + 1, q[4] + 1) or "=")
  end
  return table.concat(out)
end
local function unbase64(s)
  local out = {}
  s = s:gsub("=", "")
  for i = 1, #s, 4 do
    local n, k = 0, 0
    for j = i, math.min(i + 3, #s) do n = n * 64 + B64_VALUE[s:byte(j)]; k = k + 1 end
    n = n * 64 ^ (4 - k)
    local bytes = string.char(math.floor(n / 65536), math.floor(n / 256) % 256, n % 256)
    out[#out + 1] = bytes:sub(1, k - 1)
  end
  return table.concat(out)
end

-- a ds tensor as the runner's {type, dims, base64 of its little-endian bytes}
function M.feed_tensor(t)
  local c = t:contiguous()
  local bytes = c:numel() == 0 and "" or ffi.string(c:data_ptr(), c:numel() * ffi.sizeof(types.CTYPE[t.dtype]))
  return { type = ORT_TYPE[t.dtype] or error("ort: no ONNX Runtime type for " .. t.dtype), dims = t.shape,
    base64 = base64(bytes) }
end

-- the runner's output {type, dims, base64} as a ds tensor, bit for bit
function M.to_tensor(o)
  local dt = DS_TYPE[o.type] or error("ort: unexpected output type " .. tostring(o.type))
  local t = ds.zeros(o.dims, { dtype = dt })
  local bytes = unbase64(o.base64)
  local want = t:numel() * ffi.sizeof(types.CTYPE[dt])
  if #bytes ~= want then error("ort: output of " .. #bytes .. " bytes, its shape needs " .. want) end
  if want > 0 then ffi.copy(t:data_ptr(), bytes, want) end
  return t
end

-- JSON with numbers printed exactly (%.17g; cjson stops at 14 digits); booleans, strings, lists, objects
local function encode(v, out)
  out = out or {}
  local t = type(v)
  if t == "number" then
    out[#out + 1] = (v == math.floor(v) and math.abs(v) < 2 ^ 53) and string.format("%d", v) or string.format("%.17g", v)
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

-- runs: {{model = path, feeds = {{name = tensor, ...}, ...}, threads =, optimization = (M.OPTIMIZATION when nil),
-- warmup =, keep =}, ...}
-- -> list of {outputs = {{name = tensor}...}, names = {...}, seconds = s} or {error = msg}
function M.run(runs)
  local req = { runs = {} }
  for i, r in ipairs(runs) do
    local feeds = {}
    for j, f in ipairs(r.feeds) do
      feeds[j] = {}
      for name, t in pairs(f) do feeds[j][name] = M.feed_tensor(t) end
    end
    req.runs[i] = { model = r.model, feeds = feeds, threads = r.threads, optimization = r.optimization or M.OPTIMIZATION,
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
