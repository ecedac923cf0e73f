-- convert/lexer.lua: Lua 5.1 / LuaJIT source -> tokens {type, value, line} (goto, 0x, 1LL/1ULL/1i, long brackets).
local M = {}

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat return then
  true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

local SYMBOLS = { "...", "..", "==", "~=", "<=", ">=", "::", "+", "-", "*", "/", "%", "^", "#", "<", ">", "=", "(",
  ")", "{", "}", "[", "]", ";", ":", ",", "." }

local function fail(chunk, line, msg) error(string.format("%s:%d: %s", chunk, line, msg), 0) end

-- the position after a long bracket [==[ ... ]==] starting at i, or nil when s:sub(i) is not one
local function long_bracket_end(s, i, chunk, line)
  local eq = s:match("^%[(=*)%[", i)
  if not eq then return nil end
  local close = "]" .. eq .. "]"
  local j = s:find(close, i + #eq + 2, true)
  if not j then fail(chunk, line, "unfinished long string or comment") end
  return j + #close
end

-- tokens of source s; chunk names the source in errors
function M.tokens(s, chunk)
  local toks, i, line, n = {}, 1, 1, #s
  if s:sub(1, 1) == "#" then i = (s:find("\n", 1, true) or n + 1) end -- shebang line
  local function add(tp, v, ln) toks[#toks + 1] = { type = tp, value = v, line = ln } end
  while i <= n do
    local c = s:sub(i, i)
    if c == "\n" then line = line + 1; i = i + 1
    elseif c:match("%s") then i = i + 1
    elseif s:sub(i, i + 1) == "--" then
      local e = long_bracket_end(s, i + 2, chunk, line)
      if e then
        local text = s:sub(i, e - 1)
        local _, nl = text:gsub("\n", "")
        line = line + nl; i = e
      else
        i = s:find("\n", i, true) or n + 1
      end
    elseif c:match("[%a_]") then
      local w = s:match("^[%w_]+", i)
      add(KEYWORDS[w] and w or "name", w, line)
      i = i + #w
    elseif c:match("%d") or (c == "." and s:sub(i + 1, i + 1):match("%d")) then
      local num = s:match("^0[xX][%x%.]*[pP][%+%-]?%d+", i) or s:match("^0[xX][%x%.]*", i)
        or s:match("^[%d%.]+[eE][%+%-]?%d+", i) or s:match("^[%d%.]+", i)
      local suffix = s:match("^[uU]?[lL][lL]", i + #num) or s:match("^[iI]", i + #num) or ""
      num = num .. suffix
      if s:sub(i + #num, i + #num):match("[%w_]") then fail(chunk, line, "malformed number near '" .. num .. "'") end
      add("number", num, line)
      i = i + #num
    elseif c == "'" or c == '"' then
      local j, start = i + 1, line
      while true do
        local d = s:sub(j, j)
        if d == "" or d == "\n" then fail(chunk, start, "unfinished string") end
        if d == "\\" then
          if s:sub(j + 1, j + 1) == "\n" then line = line + 1 end
          j = j + 2
        elseif d == c then break
        else j = j + 1 end
      end
      add("string", s:sub(i, j), start)
      i = j + 1
    elseif c == "[" and s:match("^%[=*%[", i) then
      local e = long_bracket_end(s, i, chunk, line)
      local text = s:sub(i, e - 1)
      add("string", text, line)
      local _, nl = text:gsub("\n", "")
      line = line + nl; i = e
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
