-- examples/serve/ds_serve.lua: nginx Lua handlers serving ds models saved by ds.save (no model code).
-- Each worker loads the models once (init_worker), answers POST /predict[/name] and GET /health.
-- a decoder of its own that refuses what JSON refuses and lua-cjson would accept (hex, inf, nan, +1)
local cjson = require("cjson.safe").new()
cjson.decode_invalid_numbers(false)

local M = {}
local ds
local models = {}          -- name -> { model =, error =, info = , vocab = }
local MAX_TEXT = 512
local FASHION = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" }
local SENTIMENT = { "angry", "happy", "neutral", "surprise", "sad", "fear" }

local function read_json(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a"); f:close()
  return cjson.decode(s)
end

-- what /health tells about a loaded model: name, format version, input specs (symbolic dims by name)
local function describe(m, name)
  local inputs = {}
  for i, s in ipairs(m.ir.specs) do
    local shape = {}
    for d, v in ipairs(s.shape) do shape[d] = type(v) == "number" and v or tostring(v) end
    inputs[i] = { name = s.name, dtype = s.dtype, shape = shape }
  end
  return { name = name, format_version = m.format_version, params_file = m.params_file, inputs = inputs }
end

local function load_model(dir, name)
  local entry = { name = name }
  local ok, m = pcall(ds.load, dir .. "/" .. name)
  if ok then
    entry.model = m
    entry.info = describe(m, name)
    if name == "bert" then
      entry.vocab = read_json(dir .. "/bert.vocab.json")
      if not entry.vocab then entry.model, entry.error = nil, "bert.vocab.json missing or malformed" end
    end
  else
    entry.error = tostring(m)
  end
  return entry
end

-- Master process (init_by_lua): load the models before fork so the workers share the parameter pages
-- copy-on-write. One thread: no OpenMP thread may exist in the master when it forks (TOOLCHAIN.md).
function M.init(dir)
  ds = require("ds")
  ds.set_num_threads(1)
  for _, name in ipairs { "lenet", "bert" } do
    models[name] = load_model(dir, name)
    if models[name].error then ngx.log(ngx.WARN, "model ", name, ": ", models[name].error) end
  end
end

-- Worker process: one warm-up prediction per model builds its plan and arena before traffic arrives.
function M.init_worker()
  local e = models.lenet
  if e and e.model then pcall(e.model, ds.zeros(1, 1, 28, 28)) end
  e = models.bert
  if e and e.model then pcall(e.model, ds.tensor({ { 3, 4 } }, { dtype = "i64" }), ds.ones(1, 2)) end
end

local function reply(status, tbl)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  ngx.say(cjson.encode(tbl))
  return ngx.exit(status)
end

local function bad(msg) return reply(400, { error = msg }) end

function M.health()
  local out = { status = "ok", models = {} }
  for name, e in pairs(models) do
    if e.model then
      out.models[name] = { ok = true, name = e.info.name, format_version = e.info.format_version,
                           params_file = e.info.params_file, inputs = e.info.inputs }
    else
      out.models[name] = { ok = false, error = e.error }
      out.status = "degraded"
    end
  end
  return reply(200, out)
end

-- The first number token of text outside strings that is not in JSON's grammar
-- (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, finite), or nil. Complements decode_invalid_numbers(false),
-- which lets "1." and overflowing exponents through.
local function bad_number(text)
  local pos = 1
  while true do
    local at, _, ch = text:find('(["%-%d])', pos)
    if not at then return nil end
    if ch == '"' then
      local close = text:find('["\\]', at + 1)
      while close and text:sub(close, close) == "\\" do close = text:find('["\\]', close + 2) end
      if not close then return nil end
      pos = close + 1
    else
      local tok = text:match("^%-?[%d%.eE+%-]*", at)
      local int, frac, exp = tok:match("^%-?(%d+)(%.?%d*)([eE]?[+-]?%d*)$")
      local ok = int and not (#int > 1 and int:sub(1, 1) == "0") and (frac == "" or #frac > 1)
        and (exp == "" or exp:match("^[eE][+-]?%d+$")) and math.abs(tonumber(tok) or math.huge) < math.huge
      if not ok then return tok end
      pos = at + #tok
    end
  end
end

local function body_json()
  if ngx.req.get_method() ~= "POST" then return nil, "use POST with a JSON body" end
  ngx.req.read_body()
  local body = ngx.req.get_body_data()
  if not body then return nil, "empty body (or larger than 1 MiB)" end
  local bad = bad_number(body)
  if bad then return nil, "body is not JSON: '" .. bad:sub(1, 40) .. "' is not a JSON number" end
  local req, err = cjson.decode(body)
  if type(req) ~= "table" then return nil, "body is not JSON: " .. tostring(err or "not an object") end
  return req
end

-- image: 28 rows of 28 numbers in 0..255 (or a flat list of 784) -> 784 values in [0,1]
local function image_values(req)
  local img = req.image
  if img == nil then return nil, "missing field 'image' (28x28 numbers in 0..255)" end
  if type(img) ~= "table" then return nil, "'image' must be an array" end
  local flat = {}
  if #img == 28 and type(img[1]) == "table" then
    for r = 1, 28 do
      local row = img[r]
      if type(row) ~= "table" or #row ~= 28 then return nil, "'image' must be 28 rows of 28 numbers (row " .. r .. " is not)" end
      for c = 1, 28 do flat[#flat + 1] = row[c] end
    end
  elseif #img == 784 then
    flat = img
  else
    return nil, "'image' must have shape 28x28 or 784, got " .. #img .. " entries"
  end
  for i = 1, 784 do
    local v = flat[i]
    if type(v) ~= "number" or v ~= v or v < 0 or v > 255 then
      return nil, "'image' values must be numbers in 0..255 (entry " .. i .. " is " .. tostring(v) .. ")"
    end
    flat[i] = v / 255
  end
  return flat
end

-- text -> ids (1,T) i64 and mask (1,T) f32, with the vocab saved next to the model
local function text_tensors(req, vocab)
  local text = req.text
  if text == nil then return nil, "missing field 'text'" end
  if type(text) ~= "string" then return nil, "'text' must be a string" end
  if #text == 0 or #text > MAX_TEXT then return nil, "'text' must have 1.." .. MAX_TEXT .. " bytes" end
  local ids = { vocab["[CLS]"] }
  for ch in text:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    if #ids < 127 then ids[#ids + 1] = vocab[ch] or vocab["[UNK]"] end
  end
  ids[#ids + 1] = vocab["[SEP]"]
  local mask = {}
  for i = 1, #ids do mask[i] = 1 end
  return ds.tensor({ ids }, { dtype = "i64" }), ds.tensor({ mask })
end

function M.predict(name)
  local e = models[name]
  if not e then return reply(404, { error = "no model named '" .. tostring(name) .. "'" }) end
  if not e.model then return reply(503, { error = "model '" .. name .. "' is unavailable: " .. e.error }) end
  local req, err = body_json()
  if not req then return bad(err) end
  local ok, probs
  if name == "lenet" then
    local flat, xerr = image_values(req)
    if not flat then return bad(xerr) end
    ok, probs = pcall(e.model, ds.tensor(flat):reshape(1, 1, 28, 28))
  else
    local ids, mask = text_tensors(req, e.vocab)
    if not ids then return bad(mask) end
    ok, probs = pcall(e.model, ids, mask)
  end
  if not ok then return reply(500, { error = "model run failed: " .. tostring(probs) }) end
  local p = probs:reshape(-1):totable()
  local best = 1
  for i = 2, #p do if p[i] > p[best] then best = i end end
  local names = name == "lenet" and FASHION or SENTIMENT
  return reply(200, { label = names[best], class = best, probs = p })
end

-- same parsing and reply as /predict for an image, without the model
function M.echo()
  local req, err = body_json()
  if not req then return bad(err) end
  local flat, xerr = image_values(req)
  if not flat then return bad(xerr) end
  local p = {}
  for i = 1, 10 do p[i] = 0.1 end
  return reply(200, { label = FASHION[1], class = 1, probs = p })
end

return M
