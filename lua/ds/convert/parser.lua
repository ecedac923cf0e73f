-- convert/parser.lua: recursive-descent parser for Lua 5.1 + goto (LuaJIT) -> an AST of plain tables with lines.
-- Statements: Local Assign CallStat Do While Repeat If Fornum Forin FunctionStat LocalFunction Return Break Goto Label.
-- Expressions: Nil True False Number String Vararg Function Table Binop Unop Paren Name Index Call Method.
-- Every node has `line`; Function nodes have `line` (the `function` keyword), `endline` (its `end`) and `endpos`
-- (the index of its `end` token).
-- The parser state P = {toks, pos, chunk} is passed to every function below.
local lexer = require("ds.convert.lexer")

local M = {}

local BINARY = { -- left, right priorities (Lua 5.1)
  ["or"] = { 1, 1 }, ["and"] = { 2, 2 },
  ["<"] = { 3, 3 }, [">"] = { 3, 3 }, ["<="] = { 3, 3 }, [">="] = { 3, 3 }, ["~="] = { 3, 3 }, ["=="] = { 3, 3 },
  [".."] = { 5, 4 }, ["+"] = { 6, 6 }, ["-"] = { 6, 6 }, ["*"] = { 7, 7 }, ["/"] = { 7, 7 }, ["%"] = { 7, 7 },
  ["^"] = { 10, 9 },
}
local UNARY_PRIORITY = 8

local function fail(P, msg, t)
  t = t or P.toks[P.pos]
  error(string.format("%s:%d: %s near '%s'", P.chunk, t.line, msg, t.value), 0)
end
local function check(P, tp) return P.toks[P.pos].type == tp end
local function accept(P, tp)
  if P.toks[P.pos].type == tp then P.pos = P.pos + 1; return P.toks[P.pos - 1] end
end
local function expect(P, tp, what)
  local t = accept(P, tp)
  if not t then fail(P, "'" .. tp .. "' expected" .. (what and (" " .. what) or "")) end
  return t
end
local function name(P) return expect(P, "name").value end

local block, expr, subexpr -- mutually recursive

local function block_follow(P)
  local tp = P.toks[P.pos].type
  return tp == "else" or tp == "elseif" or tp == "end" or tp == "until" or tp == "eof"
end

local function funcbody(P, line, is_method)
  local params, vararg = {}, false
  if is_method then params[1] = "self" end
  expect(P, "(")
  if not check(P, ")") then
    repeat
      if accept(P, "...") then vararg = true; break end
      params[#params + 1] = name(P)
    until not accept(P, ",")
  end
  expect(P, ")")
  local body = block(P)
  local e = expect(P, "end", "to close 'function' at line " .. line)
  return { tag = "Function", params = params, vararg = vararg, body = body, line = line, endline = e.line,
    endpos = P.pos - 1 }
end

local function exprlist(P)
  local list = { expr(P) }
  while accept(P, ",") do list[#list + 1] = expr(P) end
  return list
end

local function table_cons(P)
  local line = expect(P, "{").line
  local fields = {}
  while not check(P, "}") do
    if check(P, "[") then
      P.pos = P.pos + 1
      local k = expr(P)
      expect(P, "]"); expect(P, "=")
      fields[#fields + 1] = { key = k, value = expr(P) }
    elseif check(P, "name") and P.toks[P.pos + 1].type == "=" then
      local k = name(P)
      P.pos = P.pos + 1
      fields[#fields + 1] = { name = k, value = expr(P) }
    else
      fields[#fields + 1] = { value = expr(P) }
    end
    if not accept(P, ",") and not accept(P, ";") then break end
  end
  expect(P, "}")
  return { tag = "Table", fields = fields, line = line }
end

local function call_args(P)
  local t = P.toks[P.pos]
  if t.type == "string" then P.pos = P.pos + 1; return { { tag = "String", value = t.value, line = t.line } } end
  if t.type == "{" then return { table_cons(P) } end
  expect(P, "(")
  if accept(P, ")") then return {} end
  local list = exprlist(P)
  expect(P, ")")
  return list
end

local function primary(P)
  local t = P.toks[P.pos]
  if t.type == "name" then P.pos = P.pos + 1; return { tag = "Name", name = t.value, line = t.line } end
  if accept(P, "(") then
    local e = expr(P)
    expect(P, ")")
    return { tag = "Paren", expr = e, line = t.line }
  end
  fail(P, "unexpected symbol")
end

local function suffixed(P)
  local e = primary(P)
  while true do
    local t = P.toks[P.pos]
    if t.type == "." then
      P.pos = P.pos + 1
      local n = expect(P, "name")
      e = { tag = "Index", obj = e,
        key = { tag = "String", value = '"' .. n.value .. '"', field = n.value, line = n.line }, line = t.line }
    elseif t.type == "[" then
      P.pos = P.pos + 1
      local k = expr(P)
      expect(P, "]")
      e = { tag = "Index", obj = e, key = k, line = t.line }
    elseif t.type == ":" then
      P.pos = P.pos + 1
      local n = name(P)
      e = { tag = "Method", obj = e, name = n, args = call_args(P), line = t.line }
    elseif t.type == "(" or t.type == "string" or t.type == "{" then
      e = { tag = "Call", fn = e, args = call_args(P), line = t.line }
    else
      return e
    end
  end
end

local LITERAL = { number = "Number", string = "String", ["nil"] = "Nil", ["true"] = "True", ["false"] = "False",
  ["..."] = "Vararg" }

local function simple(P)
  local t = P.toks[P.pos]
  local tp = t.type
  if tp == "number" or tp == "string" then
    P.pos = P.pos + 1
    return { tag = LITERAL[tp], value = t.value, line = t.line }
  end
  if LITERAL[tp] then P.pos = P.pos + 1; return { tag = LITERAL[tp], line = t.line } end
  if tp == "{" then return table_cons(P) end
  if tp == "function" then P.pos = P.pos + 1; return funcbody(P, t.line, false) end
  return suffixed(P)
end

subexpr = function(P, limit)
  local e
  local t = P.toks[P.pos]
  if t.type == "not" or t.type == "-" or t.type == "#" then
    P.pos = P.pos + 1
    e = { tag = "Unop", op = t.type, expr = subexpr(P, UNARY_PRIORITY), line = t.line }
  else
    e = simple(P)
  end
  while true do
    local op = P.toks[P.pos]
    local p = BINARY[op.type]
    if not p or p[1] <= limit then return e end
    P.pos = P.pos + 1
    e = { tag = "Binop", op = op.type, left = e, right = subexpr(P, p[2]), line = op.line }
  end
end
expr = function(P) return subexpr(P, 0) end

-- statements, by their first keyword (the keyword is consumed before each is called)
local STAT = {}

STAT["if"] = function(P, line)
  local clauses = {}
  local c = expr(P)
  expect(P, "then")
  clauses[1] = { cond = c, body = block(P), line = line }
  local orelse
  while true do
    local k = P.toks[P.pos]
    if accept(P, "elseif") then
      local ce = expr(P)
      expect(P, "then")
      clauses[#clauses + 1] = { cond = ce, body = block(P), line = k.line }
    elseif accept(P, "else") then
      orelse = block(P)
      expect(P, "end", "to close 'if' at line " .. line)
      break
    else
      expect(P, "end", "to close 'if' at line " .. line)
      break
    end
  end
  return { tag = "If", clauses = clauses, orelse = orelse, line = line }
end

STAT["while"] = function(P, line)
  local c = expr(P)
  expect(P, "do")
  local b = block(P)
  expect(P, "end", "to close 'while' at line " .. line)
  return { tag = "While", cond = c, body = b, line = line }
end

STAT["do"] = function(P, line)
  local b = block(P)
  expect(P, "end", "to close 'do' at line " .. line)
  return { tag = "Do", body = b, line = line }
end

STAT["for"] = function(P, line)
  local n1 = name(P)
  if accept(P, "=") then
    local a = expr(P)
    expect(P, ",")
    local b = expr(P)
    local s = accept(P, ",") and expr(P) or nil
    expect(P, "do")
    local body = block(P)
    expect(P, "end", "to close 'for' at line " .. line)
    return { tag = "Fornum", var = n1, start = a, limit = b, step = s, body = body, line = line }
  end
  local names = { n1 }
  while accept(P, ",") do names[#names + 1] = name(P) end
  expect(P, "in")
  local exprs = exprlist(P)
  expect(P, "do")
  local body = block(P)
  expect(P, "end", "to close 'for' at line " .. line)
  return { tag = "Forin", names = names, exprs = exprs, body = body, line = line }
end

STAT["repeat"] = function(P, line)
  local b = block(P)
  expect(P, "until", "to close 'repeat' at line " .. line)
  return { tag = "Repeat", body = b, cond = expr(P), line = line }
end

STAT["function"] = function(P, line)
  local path = { name(P) }
  local method
  while accept(P, ".") do path[#path + 1] = name(P) end
  if accept(P, ":") then method = name(P) end
  return { tag = "FunctionStat", path = path, method = method, func = funcbody(P, line, method ~= nil), line = line }
end

STAT["local"] = function(P, line)
  if accept(P, "function") then
    local n = name(P)
    return { tag = "LocalFunction", name = n, func = funcbody(P, line, false), line = line }
  end
  local names = { name(P) }
  while accept(P, ",") do names[#names + 1] = name(P) end
  local exprs = accept(P, "=") and exprlist(P) or {}
  return { tag = "Local", names = names, exprs = exprs, line = line }
end

STAT["return"] = function(P, line)
  local exprs = (block_follow(P) or check(P, ";")) and {} or exprlist(P)
  accept(P, ";")
  return { tag = "Return", exprs = exprs, line = line }
end

STAT["break"] = function(_, line) return { tag = "Break", line = line } end

STAT["goto"] = function(P, line) return { tag = "Goto", label = name(P), line = line } end

STAT["::"] = function(P, line)
  local n = name(P)
  expect(P, "::")
  return { tag = "Label", name = n, line = line }
end

-- an assignment or a call statement (token t starts it)
local function expr_statement(P, t)
  local line = t.line
  local e = suffixed(P)
  if check(P, "=") or check(P, ",") then
    local targets = { e }
    while accept(P, ",") do targets[#targets + 1] = suffixed(P) end
    expect(P, "=")
    for _, tg in ipairs(targets) do
      if tg.tag ~= "Name" and tg.tag ~= "Index" then fail(P, "cannot assign to this expression", t) end
    end
    return { tag = "Assign", targets = targets, exprs = exprlist(P), line = line }
  end
  if e.tag ~= "Call" and e.tag ~= "Method" then fail(P, "syntax error (a statement is expected)", t) end
  return { tag = "CallStat", call = e, line = line }
end

local function statement(P)
  local t = P.toks[P.pos]
  if t.type == ";" then P.pos = P.pos + 1; return nil end
  local f = STAT[t.type]
  if f then
    P.pos = P.pos + 1
    return f(P, t.line)
  end
  return expr_statement(P, t)
end

block = function(P)
  local stats = {}
  while not block_follow(P) do
    local st = statement(P)
    if st then
      stats[#stats + 1] = st
      if st.tag == "Return" then break end
    end
  end
  return stats
end

-- parse source s (chunk names it in errors); returns the chunk's Function node (a vararg function)
function M.parse(s, chunk)
  local P = { toks = lexer.tokens(s, chunk), pos = 1, chunk = chunk }
  local body = block(P)
  if not check(P, "eof") then fail(P, "'<eof>' expected") end
  return { tag = "Function", params = {}, vararg = true, body = body, line = 0, endline = P.toks[P.pos].line,
    endpos = P.pos }
end

-- every Function node of the tree in the order of their `end` (children before their parent, siblings in source
-- order: the order in which LuaJIT writes the chunk's prototypes with string.dump)
function M.functions(root)
  local out = {}
  local function visit(v)
    if type(v) ~= "table" then return end
    if v.tag == "Function" then out[#out + 1] = v end
    for _, x in pairs(v) do visit(x) end
  end
  visit(root)
  table.sort(out, function(a, b) return a.endpos < b.endpos end)
  return out
end

return M
