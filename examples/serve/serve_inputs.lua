-- examples/serve/serve_inputs.lua: a request body -> one row of model input (strict JSON, clear 400 errors), and
-- rows -> one batch of inputs as byte strings for the worker thread (serve_compute.lua), by model kind (texts
-- packed without padding).
local ffi = require("ffi")
-- a decoder of its own that refuses what JSON refuses and lua-cjson would accept (hex, inf, nan, +1)
local cjson = require("cjson.safe").new()
cjson.decode_invalid_numbers(false)

local M = {}
local MAX_TEXT = 512
M.MAX_TOKENS = 128            -- the BERT-style model's positions ([CLS] .. [SEP])

-- JSON's number grammar checked byte by byte (LuaJIT compiles these loops; string patterns per number cost
-- ~0.2 ms for a 784-pixel image).
local byte = string.byte
local function is_digit(c) return c ~= nil and c >= 48 and c <= 57 end
local function digits_from(text, p, stop)   -- the first position after the digits at p
  while p <= stop and is_digit(byte(text, p)) do p = p + 1 end
  return p
end
-- the bytes of a number token: digits . e E + -
local function in_token(c) return is_digit(c) or c == 46 or c == 101 or c == 69 or c == 43 or c == 45 end
local function valid_number(text, at, stop)
  local i0 = byte(text, at) == 45 and at + 1 or at                       -- 45 '-'
  local p = digits_from(text, i0, stop)
  local int_len = p - i0
  if int_len == 0 or (byte(text, i0) == 48 and int_len > 1) then return false end   -- 48 '0': no leading zeros
  if p <= stop and byte(text, p) == 46 then                               -- 46 '.'
    local f = digits_from(text, p + 1, stop)
    if f == p + 1 then return false end
    p = f
  end
  local has_exp = p <= stop and (byte(text, p) == 101 or byte(text, p) == 69)
  if has_exp then
    p = p + 1
    if p <= stop and (byte(text, p) == 43 or byte(text, p) == 45) then p = p + 1 end
    local e = digits_from(text, p, stop)
    if e == p then return false end
    p = e
  end
  if p ~= stop + 1 then return false end
  -- only an exponent or a long integer part can overflow to inf
  return not (has_exp or int_len > 300) or math.abs(tonumber(text:sub(at, stop)) or math.huge) < math.huge
end
-- The first number token of text outside strings that is not in JSON's grammar
-- (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, finite), or nil. Complements decode_invalid_numbers(false),
-- which lets "1." and overflowing exponents through.
local function bad_number(text)
  local n, i = #text, 1
  while i <= n do
    local c = byte(text, i)
    if c == 34 then                                                       -- 34 '"': skip the string
      i = i + 1
      while true do
        local d = byte(text, i)
        if d == nil then return nil end
        if d == 92 then i = i + 2 elseif d == 34 then break else i = i + 1 end   -- 92 backslash
      end
      i = i + 1
    elseif c == 45 or is_digit(c) then
      local stop = i
      while in_token(byte(text, stop + 1)) do stop = stop + 1 end
      if not valid_number(text, i, stop) then return text:sub(i, stop) end
      i = stop + 1
    else
      i = i + 1
    end
  end
end

-- the POST body as a decoded JSON object, or nil and what is wrong
function M.body_json()
  if ngx.req.get_method() ~= "POST" then return nil, "use POST with a JSON body" end
  ngx.req.read_body()
  -- a body nginx kept in a temporary file (a chunked one past client_body_buffer_size; client_max_body_size
  -- bounds it) is read from there
  local body, file = ngx.req.get_body_data(), ngx.req.get_body_file()
  if not body and file then
    local f = io.open(file, "rb")
    body = f and f:read("*a"); if f then f:close() end
  end
  if not body or body == "" then return nil, "empty body" end
  local bad = bad_number(body)
  if bad then return nil, "body is not JSON: '" .. bad:sub(1, 40) .. "' is not a JSON number" end
  local req, err = cjson.decode(body)
  if type(req) ~= "table" then return nil, "body is not JSON: " .. tostring(err or "not an object") end
  return req
end

-- image: 28 rows of 28 numbers in 0..255 (or a flat list of 784) -> 784 f32 values in [0,1] as bytes
local function image_row(req)
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
  local row = ffi.new("float[784]")
  for i = 1, 784 do
    local v = flat[i]
    if type(v) ~= "number" or v ~= v or v < 0 or v > 255 then
      return nil, "'image' values must be numbers in 0..255 (entry " .. i .. " is " .. tostring(v) .. ")"
    end
    row[i - 1] = v / 255
  end
  return { bytes = ffi.string(row, 784 * 4) }
end

-- text -> token ids ([CLS] chars [SEP], 1-based vocab ids) with the vocab saved next to the model
local function text_row(req, vocab)
  local text = req.text
  if text == nil then return nil, "missing field 'text'" end
  if type(text) ~= "string" then return nil, "'text' must be a string" end
  if #text == 0 or #text > MAX_TEXT then return nil, "'text' must have 1.." .. MAX_TEXT .. " bytes" end
  local ids = { vocab["[CLS]"] }
  for ch in text:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    if #ids < M.MAX_TOKENS - 1 then ids[#ids + 1] = vocab[ch] or vocab["[UNK]"] end
  end
  ids[#ids + 1] = vocab["[SEP]"]
  return { ids = ids }
end

-- the smallest power of two >= n (image batch sizes: a few shapes, so a few compiled plans)
local function pow2(n)
  local p = 1
  while p < n do p = p * 2 end
  return p
end

-- rows (from image_row) -> inputs {{dtype, shape, bytes}} of B = pow2(#rows) rows; rows past #rows repeat row 1
local function image_batch(rows)
  local B = pow2(#rows)
  local parts = {}
  for b = 1, B do parts[b] = (rows[b] or rows[1]).bytes end
  return { { dtype = "f32", shape = { B, 1, 28, 28 }, bytes = table.concat(parts) } }
end

-- tokens a text row puts into a packed batch
local function text_tokens(row) return #row.ids end

-- the packed row count for n tokens: n rounded up to a step of at least 8 that is at most 1/8 of it (8 steps per
-- doubling: a few compiled plans, at most 12.5% of the rows unused)
function M.token_rows(n)
  local step = 8
  while step * 16 < n do step = step * 2 end
  return math.ceil(n / step) * step
end

-- rows (from text_row) -> the packed model's inputs (examples/serve/bert_packed.lua): ids and pos (N) i64, the
-- texts' tokens one after another (N = token_rows of their total, the rest [PAD] at position 1), and seg
-- (max_batch, 2) i64 each text's rows {first, count} ({1, 0} past #rows). No padding inside a text, so a text's
-- answer is bitwise the same in any batch and alone: the serve specs check it.
local function text_batch(rows, max_batch)
  local n = 0
  for _, r in ipairs(rows) do n = n + #r.ids end
  local N = M.token_rows(n)
  local ids, pos = ffi.new("int64_t[?]", N), ffi.new("int64_t[?]", N)
  local seg = ffi.new("int64_t[?]", 2 * max_batch)
  local at = 0
  for b = 1, max_batch do
    local r = rows[b] and rows[b].ids
    seg[2 * b - 2], seg[2 * b - 1] = r and at + 1 or 1, r and #r or 0
    for t = 1, r and #r or 0 do
      ids[at], pos[at] = r[t], t
      at = at + 1
    end
  end
  for k = at, N - 1 do ids[k], pos[k] = 1, 1 end
  return { { dtype = "i64", shape = { N }, bytes = ffi.string(ids, N * 8) },
           { dtype = "i64", shape = { N }, bytes = ffi.string(pos, N * 8) },
           { dtype = "i64", shape = { max_batch, 2 }, bytes = ffi.string(seg, 2 * max_batch * 8) } }
end

-- every batch a model with these settings can get (one per compiled plan), for warm-up: lists of inputs
local function image_shapes(cfg)
  local out, row = {}, { bytes = string.rep("\0", 784 * 4) }
  local b = 1
  while b <= pow2(cfg.max_batch) do
    local rows = {}
    for i = 1, b do rows[i] = row end
    out[#out + 1] = image_batch(rows)
    b = b * 2
  end
  return out
end

-- one batch per packed row count a batch can have (max_batch texts of at most MAX_TOKENS, max_tokens in all)
local function text_shapes(cfg)
  local out, n = {}, 1
  while n <= math.min(cfg.max_tokens, cfg.max_batch * M.MAX_TOKENS) do
    local rows, left = {}, M.token_rows(n)
    while left > 0 and #rows < cfg.max_batch do
      local ids = {}
      for i = 1, math.min(left, M.MAX_TOKENS) do ids[i] = 2 end
      rows[#rows + 1] = { ids = ids }
      left = left - #ids
    end
    out[#out + 1] = text_batch(rows, cfg.max_batch)
    n = M.token_rows(n) + 1
  end
  return out
end

-- per kind: row (request -> row), batch (rows, max_batch -> inputs), tokens (row -> its share of a batch's
-- max_tokens, none for images), shapes (settings -> warm-up batches), labels
M.KINDS = {
  image = { row = image_row, batch = image_batch, shapes = image_shapes, labels = { "T-shirt/top", "Trouser",
            "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" } },
  text = { row = text_row, batch = text_batch, tokens = text_tokens, shapes = text_shapes,
           labels = { "angry", "happy", "neutral", "surprise", "sad", "fear" } },
}

return M
