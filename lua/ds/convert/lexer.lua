-- convert/lexer.lua: Lua 5.1 / LuaJIT source -> tokens {type, value, line}, as LuaJIT's own lexer reads it: goto and
-- labels, long brackets of any level, escapes (\z, \u{...}, \x, decimal), hex floats, 1LL/1ULL/1i, BOM and shebang.
local M = {}

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat return then
  true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

local SYMBOLS = { "...", "..", "==", "~=", "<=", ">=", "::", "+", "-", "*", "/", "%", "^", "#", "<", ">", "=", "(",
  ")", "{", "}", "[", "]", ";", ":", ",", "." }

local function fail(chunk, line, msg) error(string.format("%s:%d: %s", chunk, line, msg), 0) end

-- the length of the line break at s[i] ("\n", "\r", "\r\n" or "\n\r" count as one, as LuaJIT counts them), or 0
local function newline_at(s, i)
  local c = s:byte(i)
  if c ~= 10 and c ~= 13 then return 0 end
  local d = s:byte(i + 1)
  if (d == 10 or d == 13) and d ~= c then return 2 end
  return 1
end

-- the number of line breaks in text, counted as LuaJIT counts them
function M.newlines(text)
  local n, i = 0, text:find("[\r\n]")
  while i do
    n = n + 1
    i = text:find("[\r\n]", i + newline_at(text, i))
  end
  return n
end

-- the position after a long bracket [==[ ... ]==] starting at i, or nil when s:sub(i) is not one
local function long_bracket_end(s, i, chunk, line)
  local eq = s:match("^%[(=*)%[", i)
  if not eq then return nil end
  local close = "]" .. eq .. "]"
  local j = s:find(close, i + #eq + 2, true)
  if not j then fail(chunk, line, "unfinished long string or comment") end
  return j + #close
end

-- a number token's text (LuaJIT reads identifier characters, dots and exponent signs, then checks the whole)
local function number_text(s, i, chunk, line)
  local hex = s:match("^0[xX]", i) ~= nil
  local j = i
  while true do
    local c = s:sub(j, j)
    local prev = s:sub(j - 1, j - 1)
    if c:match("[%w_%.\128-\255]") or ((c == "+" or c == "-") and j > i
      and (prev:match("[eE]") and not hex or hex and prev:match("[pP]"))) then
      j = j + 1
    else
      break
    end
  end
  local text = s:sub(i, j - 1)
  local body, suffix = text:match("^(.-)([uU]?[lL][lL])$")
  if not body then body, suffix = text:match("^(.-)([iI])$") end
  body = body or text
  local ok
  if hex then
    local m, p = body:match("^0[xX](%x*%.?%x*)(.*)$")
    ok = m and m:find("%x") and (p == "" or p:match("^[pP][%+%-]?%d+$"))
    if ok and suffix and suffix:lower():find("l") then ok = not m:find(".", 1, true) and p == "" end
  else
    local m, e = body:match("^(%d*%.?%d*)(.*)$")
    ok = m and m:find("%d") and (e == "" or e:match("^[eE][%+%-]?%d+$"))
    if ok and suffix and suffix:lower():find("l") then ok = not m:find(".", 1, true) and e == "" end
  end
  if not ok then fail(chunk, line, "malformed number near '" .. text .. "'") end
  return text
end

local SIMPLE_ESCAPES = { a = true, b = true, f = true, n = true, r = true, t = true, v = true, ["\\"] = true,
  ['"'] = true, ["'"] = true }

-- a quoted string starting at i: the position after it and the number of line breaks inside it
local function quoted_end(s, i, chunk, line)
  local q, j, lines = s:sub(i, i), i + 1, 0
  while true do
    local d = s:sub(j, j)
    if d == "" or newline_at(s, j) > 0 then fail(chunk, line + lines, "unfinished string") end
    if d == q then return j + 1, lines end
    if d ~= "\\" then j = j + 1
    else
      local e = s:sub(j + 1, j + 1)
      local nl = newline_at(s, j + 1)
      if nl > 0 then lines = lines + 1; j = j + 1 + nl
      elseif SIMPLE_ESCAPES[e] then j = j + 2
      elseif e == "x" then
        if not s:match("^%x%x", j + 2) then fail(chunk, line + lines, "invalid escape sequence") end
        j = j + 4
      elseif e == "z" then -- skip the escape and the whitespace after it, line breaks included
        j = j + 2
        while true do
          local w = newline_at(s, j)
          if w > 0 then lines = lines + 1; j = j + w
          elseif s:sub(j, j):match("^[ \t\v\f]$") then j = j + 1
          else break end
        end
      elseif e == "u" then
        local hexd = s:match("^{(%x+)}", j + 2)
        if not hexd or tonumber(hexd, 16) >= 0x110000 then fail(chunk, line + lines, "invalid escape sequence") end
        j = j + 4 + #hexd
      elseif e:match("%d") then
        local dd = s:match("^%d%d?%d?", j + 1)
        if tonumber(dd) > 255 then fail(chunk, line + lines, "invalid escape sequence") end
        j = j + 1 + #dd
      else
        fail(chunk, line + lines, "invalid escape sequence")
      end
    end
  end
end

-- tokens of source s; chunk names the source in errors
function M.tokens(s, chunk)
  local toks, i, line, n = {}, 1, 1, #s
  if s:sub(1, 3) == "\239\187\191" then i = 4 end -- a UTF-8 byte order mark
  if s:sub(i, i) == "#" then i = (s:find("[\r\n]", i) or n + 1) end -- shebang line
  local function add(tp, v, ln) toks[#toks + 1] = { type = tp, value = v, line = ln } end
  while i <= n do
    local c = s:sub(i, i)
    local nl = newline_at(s, i)
    if nl > 0 then line = line + 1; i = i + nl
    elseif c:match("[ \t\v\f]") then i = i + 1
    elseif s:sub(i, i + 1) == "--" then
      local e = long_bracket_end(s, i + 2, chunk, line)
      if e then
        line = line + M.newlines(s:sub(i, e - 1))
        i = e
      else
        i = s:find("[\r\n]", i) or n + 1
      end
    elseif c:match("[%a_\128-\255]") then
      local w = s:match("^[%w_\128-\255]+", i)
      add(KEYWORDS[w] and w or "name", w, line)
      i = i + #w
    elseif c:match("%d") or (c == "." and s:sub(i + 1, i + 1):match("%d")) then
      local num = number_text(s, i, chunk, line)
      add("number", num, line)
      i = i + #num
    elseif c == "'" or c == '"' then
      local e, lines = quoted_end(s, i, chunk, line)
      add("string", s:sub(i, e - 1), line)
      line = line + lines
      i = e
    elseif c == "[" and s:match("^%[=*%[", i) then
      local e = long_bracket_end(s, i, chunk, line)
      local text = s:sub(i, e - 1)
      add("string", text, line)
      line = line + M.newlines(text)
      i = e
    elseif c == "[" and s:match("^%[=+", i) then
      fail(chunk, line, "invalid long string delimiter")
    else
      local sym
      for _, p in ipairs(SYMBOLS) do
        if s:sub(i, i + #p - 1) == p then sym = p; break end
      end
      if not sym then fail(chunk, line, "unexpected character '" .. c .. "'") end
      add(sym, sym, line)
      i = i + #sym
    end
  end
  add("eof", "<eof>", line)
  return toks
end

return M
