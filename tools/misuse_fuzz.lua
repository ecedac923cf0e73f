-- tools/misuse_fuzz.lua: calls every public function (ds.*, ds.F.*, ds.nn.* and ds.optim.* constructors,
-- ds.nn.utils / ds.nn.init) and method (Tensor, modules, optimizers, schedulers) with bad arguments and
-- reports each call that crashes the process, runs too long, or fails with an error that does not name an
-- op (a raw Lua internal such as "attempt to index").
-- Usage: luajit tools/misuse_fuzz.lua [seconds (10)] [seed (1)]; exit 1 on a finding. The last call is
-- written to stderr before it runs, so a crash names it.
local ds = require("ds")
local D = require("ds.dispatch")

local seconds, seed = tonumber(arg and arg[1]) or 10, tonumber(arg and arg[2]) or 1
math.randomseed(seed)
jit.off() -- the instruction-count hook that bounds each call only fires in interpreted code

-- functions that touch files, the process or global state, or block by design: not misuse targets here
-- (the loader has its own fuzzer; save/load/serving belong to ds.io)
local SKIP = { save = true, load = true, save_state = true, load_state = true, print = true, set_num_threads = true,
               manual_seed = true, seed = true, set_rng_state = true, set_grad_enabled = true, set_printoptions = true,
               empty_cache = true, clock = true, info = true, memory = true, format_profile = true,
               help = true, debug = true, save_profile = true } -- (help prints, debug switches error reports, save_profile writes)

-- ---- the targets, enumerated from the namespaces (every op of the op table is exported into them) ----
local targets = {}
local function add(name, f) targets[#targets + 1] = { name = name, f = f } end
for k, v in pairs(ds) do if type(v) == "function" and not SKIP[k] then add("ds." .. k, v) end end
for k, v in pairs(ds.F) do if type(v) == "function" then add("F." .. k, v) end end
for k, v in pairs(ds.Tensor) do
  if type(v) == "function" and k:sub(1, 1) ~= "_" and not SKIP[k] then add("Tensor." .. k, v) end
end
local function callable_class(v) return type(v) == "table" and getmetatable(v) and getmetatable(v).__call end
for k, v in pairs(ds.nn) do
  if callable_class(v) and k ~= "Module" then add("nn." .. k, function(...) return v(...) end) end
end
for _, ns in ipairs { "utils", "init" } do
  for k, v in pairs(ds.nn[ns]) do if type(v) == "function" then add("nn." .. ns .. "." .. k, v) end end
end
for k, v in pairs(ds.optim) do
  if callable_class(v) and k ~= "Optimizer" then add("optim." .. k, function(...) return v(...) end) end
end

-- instances whose methods are targets (self is a fresh instance, made by make(), each call)
local function params() return { ds.nn.Parameter(ds.randn(2, 3)), ds.nn.Parameter(ds.randn(3)) } end
local function sgd() local p = params(); p[1].grad = ds.ones(2, 3); return ds.optim.SGD(p, { lr = 0.1 }) end
local INSTANCES = {
  Linear = function() return ds.nn.Linear(3, 2) end,
  LSTM = function() return ds.nn.LSTM(3, 2) end,
  Conv2d = function() return ds.nn.Conv2d(1, 2, 3) end,
  MultiheadAttention = function() return ds.nn.MultiheadAttention(4, 2) end,
  TransformerEncoderLayer = function() return ds.nn.TransformerEncoderLayer(4, 2, { dim_feedforward = 8 }) end,
  Sequential = function() return ds.nn.Sequential(ds.nn.Linear(3, 2), ds.nn.ReLU()) end,
  CrossEntropyLoss = function() return ds.nn.CrossEntropyLoss() end,
  SGD = sgd,
  Adam = function() return ds.optim.Adam(params(), { amsgrad = true }) end,
  StepLR = function() return ds.optim.StepLR(sgd(), { step_size = 2 }) end,
  ReduceLROnPlateau = function() return ds.optim.ReduceLROnPlateau(sgd()) end,
}
-- (check_group and grad_of: hooks an optimizer class gives its base, not methods; see lua/ds/optim/init.lua)
local NOT_METHODS = { extend = true, new = true, init = true, __call = true, __index = true, __newindex = true, __tostring = true,
                      check_group = true, grad_of = true }
for cname, make in pairs(INSTANCES) do
  local obj, seen_m = make(), {}
  local mt = getmetatable(obj)
  while type(mt) == "table" do
    for k, v in pairs(mt) do
      if type(v) == "function" and not NOT_METHODS[k] and k:sub(1, 1) ~= "_" and not seen_m[k] then
        seen_m[k] = true
        targets[#targets + 1] = { name = cname .. ":" .. k, f = v, make = make }
      end
    end
    local up = getmetatable(mt)
    mt = type(up) == "table" and type(up.__index) == "table" and up.__index or nil
  end
end
table.sort(targets, function(a, b) return a.name < b.name end)

-- every op of the op table with a public function is among the targets
local covered = {}
for _, t in ipairs(targets) do covered[t.name:match("[%.:]([^%.:]*)$")] = true end
local missing = {}
for _, def in ipairs(D.list) do
  if (ds[def.name] or ds.Tensor[def.name]) and not covered[def.name] and not SKIP[def.name] then missing[#missing + 1] = def.name end
end

-- ---- names an error may start with: ops, public functions, methods, modules ----
local known = {}
for _, def in ipairs(D.list) do known[def.name] = true; known[def.name .. "_"] = true end
for _, t in ipairs(targets) do known[t.name:match("[%.:]([^%.:]*)$")] = true end
for k in pairs(ds.nn) do known[k] = true end
for k in pairs(ds.optim) do known[k] = true end
for k in pairs(INSTANCES) do known[k] = true end
for _, k in ipairs { "view", "compile", "trace", "grad", "backward", "Parameter", "cond", "while_loop", "like",
                     "broadcast", "random", "dropout", "tensor", "item", "totable", "index", "copy_", "fill_" } do
  known[k] = true
end

-- ---- bad arguments ----
local cyclic = {}; cyclic[1] = cyclic; cyclic.x = cyclic
local function list(...) return { n = select("#", ...), ... } end
local VALUES = list(
  nil, true, false, "abc", "", {}, cyclic, { 1, "a" }, { { 1 }, { 1, 2 } }, { 1, 1, 1, 1, 1, 1, 1, 1, 1 },
  0 / 0, math.huge, -math.huge, -1, 0, 1, 2, 3, 1.5, 2 ^ 40, -2 ^ 40, function() end,
  ds.zeros(2, 3), ds.ones(3), ds.tensor(1.5), ds.zeros(0, 3), ds.ones(2, 3, { dtype = "bool" }),
  ds.ones(2, 3, { dtype = "i64" }), ds.ones(2, 3, { dtype = "u8" }), ds.zeros(1, 1, 1, 1, 1, 1, 2, 3),
  ds.zeros(3, 1):expand(3, 4), ds.ones(2, 2):t(), { reduction = "bogus" }, { dtype = "f17" }, { bogus = 1 },
  ds.nn.Linear(3, 2), ds.optim.SGD({ ds.nn.Parameter(ds.ones(2)) }, { lr = 0.1 }), { ds.ones(2, 3) }, { lr = -1 },
  { step_size = 0 }, { params = 1 }, { weight = ds.ones(2, 3) }, { state = {}, param_groups = {} })
local function pick() return VALUES[math.random(1, VALUES.n)] end

-- an error names an op when, past the "file:line: " prefix, it starts with a known name and ":"
local RAW = { "attempt to ", "bad argument #", "cannot convert", "number expected", "table index is nil",
              "string expected", "stack overflow" }
local function names_op(msg)
  local body = msg:gsub("^[^\n:]*:%d+: ", "")
  for _, r in ipairs(RAW) do if body:find(r, 1, true) then return false end end
  local head = body:match("^([%w_%.]+):") or body:match("^([%w_%.]+) ")
  return head ~= nil and (known[head] or known[head:match("[^%.]*$")]) ~= nil
end

local function describe(v)
  if ds.is_tensor(v) then return string.format("tensor%s %s", require("ds.shape").str(v._shape), v.dtype) end
  if v == cyclic then return "cyclic table" end
  if type(v) == "table" and v._is_module then return "module " .. tostring(v._name) end
  if type(v) == "table" and v.param_groups then return "optimizer " .. tostring(v.name) end
  if type(v) == "table" and v.optimizer then return "scheduler " .. tostring(v.name) end
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

local MAX_STEPS = 2e7 -- VM instructions per call (a hang shows as running past this)
local function timeout() error("misuse fuzz: call ran past the instruction limit (a hang?)", 2) end

local findings, calls, seen = {}, 0, {}
local deadline = os.clock() + seconds
local self_tensor = ds.zeros(2, 3)
while os.clock() < deadline do
  local t = targets[math.random(1, #targets)]
  local nargs = math.random(0, 4)
  local args = {}
  -- a method usually gets a good self, so its other arguments are reached
  local first = 1
  if t.name:sub(1, 7) == "Tensor." and math.random() < 0.8 then args[1] = self_tensor; first = 2 end
  if t.make and math.random() < 0.9 then args[1] = t.make(); first = 2 end
  for i = first, math.max(nargs, first - 1) do args[i] = pick() end
  local n = math.max(nargs, first - 1)
  local parts = {}
  for i = 1, n do parts[i] = describe(args[i]) end
  local call_text = t.name .. "(" .. table.concat(parts, ", ") .. ")"
  io.stderr:write("\r", call_text:sub(1, 150), string.rep(" ", 10), "\r")
  calls = calls + 1
  debug.sethook(timeout, "", MAX_STEPS)
  local ok, err = pcall(t.f, unpack(args, 1, n))
  debug.sethook()
  if not ok and not names_op(tostring(err)) then
    local key = t.name .. " | " .. tostring(err):gsub("^[^\n:]*:%d+: ", ""):sub(1, 80)
    if not seen[key] then
      seen[key] = true
      findings[#findings + 1] = call_text .. "\n    -> " .. tostring(err)
    end
  end
  if calls % 200 == 0 then collectgarbage() end
end
ds.set_grad_enabled(true)
io.stderr:write("\r", string.rep(" ", 170), "\r")

for _, m in ipairs(missing) do findings[#findings + 1] = "op without a fuzz target: " .. m end
print(string.format("misuse fuzz: %d calls to %d functions in %g s (seed %d), %d findings", calls, #targets, seconds, seed, #findings))
for _, f in ipairs(findings) do print(f) end
os.exit(#findings == 0 and 0 or 1)
