-- serve/body.lua: a request's body as a decoded JSON object: strict JSON (numbers in JSON's grammar, finite),
-- chunked bodies read from nginx's temporary file, a clear error otherwise.
local util = require("ds.serve.util")
-- a decoder of its own that refuses what JSON refuses and lua-cjson would accept (hex, inf, nan, +1)
local cjson = require("cjson.safe").new()
cjson.decode_invalid_numbers(false)

local M = {}

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
  if not body and file then body = util.read(file) end
  if not body or body == "" then return nil, "empty body" end
  local bad = bad_number(body)
  if bad then return nil, "body is not JSON: '" .. bad:sub(1, 40) .. "' is not a JSON number" end
  local req, err = cjson.decode(body)
  if type(req) ~= "table" then return nil, "body is not JSON: " .. tostring(err or "not an object") end
  return req
end

return M
