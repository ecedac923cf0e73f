-- convert/parser.lua: recursive-descent parser for Lua 5.1 + goto (LuaJIT) -> an AST of plain tables with lines.
-- Statements: Local Assign CallStat Do While Repeat If Fornum Forin FunctionStat LocalFunction Return Break Goto Label.
-- Expressions: Nil True False Number String Vararg Function Table Binop Unop Paren Name Index Call Method.
-- Every node has `line`; Function nodes have `line` (the `function` keyword), `endline` (its `end`) and `endpos`
-- (the index of its `end` token).
local lexer = require("ds.convert.lexer")

local M = {}

local BINARY = { -- left, right priorities (Lua 5.1)
  ["or"] = { 1, 1 }, ["and"] = { 2, 2 },
  ["<"] = { 3, 3 }, [">"] = { 3, 3 }, ["<="] = { 3, 3 }, [">="] = { 3, 3 }, ["~="] = { 3, 3 }, ["=="] = { 3, 3 },
  [".."] = { 5, 4 }, ["+"] = { 6, 6 }, ["-"] = { 6, 6 }, ["*"] = { 7, 7 }, ["/"] = { 7, 7 }, ["%"] = { 7, 7 },
  ["^"] = { 10, 9 },
}
local UNARY_PRIORITY = 8

-- parse source s (chunk names it in errors); returns the chunk's Function node (a vararg function)
function M.parse(s, chunk)
  local toks = lexer.tokens(s, chunk)
  local pos = 1
  local function peek(k) return toks[pos + (k or 0)] end
  local function fail(msg, t)
    t = t or toks[pos]
    error(string.format("%s:%d: %s near '%s'", chunk, t.line, msg, t.value), 0)
  end
  local function check(tp) return toks[pos].type == tp end
  local function accept(tp) if toks[pos].type == tp then pos = pos + 1; return toks[pos - 1] end end
  local function expect(tp, what)
    local t = accept(tp)
    if not t then fail("'" .. tp .. "' expected" .. (what and (" " .. what) or "")) end
    return t
  end
  local function name() return expect("name").value end

  local block, expr

  local function block_follow()
    local tp = toks[pos].type
    return tp == "else" or tp == "elseif" or tp == "end" or tp == "until" or tp == "eof"
  end

  local function funcbody(line, is_method)
    local params, vararg = {}, false
    if is_method then params[1] = "self" end
    expect("(")
    if not check(")") then
      repeat
        if accept("...") then vararg = true; break end
        params[#params + 1] = name()
      until not accept(",")
    end
    expect(")")
    local body = block()
    local e = expect("end", "to close 'function' at line " .. line)
    return { tag = "Function", params = params, vararg = vararg, body = body, line = line, endline = e.line,
      endpos = pos - 1 }
  end

  local function exprlist()
    local list = { expr() }
    while accept(",") do list[#list + 1] = expr() end
    return list
  end

  local function table_cons()
    local line = expect("{").line
    local fields = {}
    while not check("}") do
      if check("[") then
        pos = pos + 1
        local k = expr()
        expect("]"); expect("=")
        fields[#fields + 1] = { key = k, value = expr() }
      elseif check("name") and peek(1).type == "=" then
        local k = name()
        pos = pos + 1
        fields[#fields + 1] = { name = k, value = expr() }
      else
        fields[#fields + 1] = { value = expr() }
      end
      if not accept(",") and not accept(";") then break end
    end
    expect("}")
    return { tag = "Table", fields = fields, line = line }
  end

  local function call_args()
    local t = toks[pos]
    if t.type == "string" then pos = pos + 1; return { { tag = "String", value = t.value, line = t.line } } end
    if t.type == "{" then return { table_cons() } end
    expect("(")
    if accept(")") then return {} end
    local list = exprlist()
    expect(")")
    return list
  end

  local function primary()
    local t = toks[pos]
    if t.type == "name" then pos = pos + 1; return { tag = "Name", name = t.value, line = t.line } end
    if accept("(") then
      local e = expr()
      expect(")")
      return { tag = "Paren", expr = e, line = t.line }
    end
    fail("unexpected symbol")
  end

  local function suffixed()
    local e = primary()
    while true do
      local t = toks[pos]
      if t.type == "." then
        pos = pos + 1
        local n = expect("name")
        e = { tag = "Index", obj = e,
          key = { tag = "String", value = '"' .. n.value .. '"', field = n.value, line = n.line }, line = t.line }
      elseif t.type == "[" then
        pos = pos + 1
        local k = expr()
        expect("]")
        e = { tag = "Index", obj = e, key = k, line = t.line }
      elseif t.type == ":" then
        pos = pos + 1
        local n = name()
        e = { tag = "Method", obj = e, name = n, args = call_args(), line = t.line }
      elseif t.type == "(" or t.type == "string" or t.type == "{" then
        e = { tag = "Call", fn = e, args = call_args(), line = t.line }
      else
        return e
      end
    end
  end

  local function simple()
    local t = toks[pos]
    local tp = t.type
    if tp == "number" then pos = pos + 1; return { tag = "Number", value = t.value, line = t.line } end
    if tp == "string" then pos = pos + 1; return { tag = "String", value = t.value, line = t.line } end
    if tp == "nil" then pos = pos + 1; return { tag = "Nil", line = t.line } end
    if tp == "true" then pos = pos + 1; return { tag = "True", line = t.line } end
    if tp == "false" then pos = pos + 1; return { tag = "False", line = t.line } end
    if tp == "..." then pos = pos + 1; return { tag = "Vararg", line = t.line } end
    if tp == "{" then return table_cons() end
    if tp == "function" then pos = pos + 1; return funcbody(t.line, false) end
    return suffixed()
  end

  local function subexpr(limit)
    local e
    local t = toks[pos]
    if t.type == "not" or t.type == "-" or t.type == "#" then
      pos = pos + 1
      e = { tag = "Unop", op = t.type, expr = subexpr(UNARY_PRIORITY), line = t.line }
    else
      e = simple()
    end
    while true do
      local op = toks[pos]
      local p = BINARY[op.type]
      if not p or p[1] <= limit then return e end
      pos = pos + 1
      e = { tag = "Binop", op = op.type, left = e, right = subexpr(p[2]), line = op.line }
    end
  end
  expr = function() return subexpr(0) end

  local function statement()
    local t = toks[pos]
    local tp, line = t.type, t.line
    if tp == ";" then pos = pos + 1; return nil end
    if tp == "if" then
      pos = pos + 1
      local clauses = {}
      local c = expr()
      expect("then")
      clauses[1] = { cond = c, body = block(), line = line }
      local orelse
      while true do
        local k = toks[pos]
        if accept("elseif") then
          local ce = expr()
          expect("then")
          clauses[#clauses + 1] = { cond = ce, body = block(), line = k.line }
        elseif accept("else") then
          orelse = block()
          expect("end", "to close 'if' at line " .. line)
          break
        else
          expect("end", "to close 'if' at line " .. line)
          break
        end
      end
      return { tag = "If", clauses = clauses, orelse = orelse, line = line }
    elseif tp == "while" then
      pos = pos + 1
      local c = expr()
      expect("do")
      local b = block()
      expect("end", "to close 'while' at line " .. line)
      return { tag = "While", cond = c, body = b, line = line }
    elseif tp == "do" then
      pos = pos + 1
      local b = block()
      expect("end", "to close 'do' at line " .. line)
      return { tag = "Do", body = b, line = line }
    elseif tp == "for" then
      pos = pos + 1
      local n1 = name()
      if accept("=") then
        local a = expr()
        expect(",")
        local b = expr()
        local s = accept(",") and expr() or nil
        expect("do")
        local body = block()
        expect("end", "to close 'for' at line " .. line)
        return { tag = "Fornum", var = n1, start = a, limit = b, step = s, body = body, line = line }
      end
      local names = { n1 }
      while accept(",") do names[#names + 1] = name() end
      expect("in")
      local exprs = exprlist()
      expect("do")
      local body = block()
      expect("end", "to close 'for' at line " .. line)
      return { tag = "Forin", names = names, exprs = exprs, body = body, line = line }
    elseif tp == "repeat" then
      pos = pos + 1
      local b = block()
      expect("until", "to close 'repeat' at line " .. line)
      return { tag = "Repeat", body = b, cond = expr(), line = line }
    elseif tp == "function" then
      pos = pos + 1
      local path = { name() }
      local method
      while accept(".") do path[#path + 1] = name() end
      if accept(":") then method = name() end
      return { tag = "FunctionStat", path = path, method = method, func = funcbody(line, method ~= nil), line = line }
    elseif tp == "local" then
      pos = pos + 1
      if accept("function") then
        local n = name()
        return { tag = "LocalFunction", name = n, func = funcbody(line, false), line = line }
      end
      local names = { name() }
      while accept(",") do names[#names + 1] = name() end
      local exprs = accept("=") and exprlist() or {}
      return { tag = "Local", names = names, exprs = exprs, line = line }
    elseif tp == "return" then
      pos = pos + 1
      local exprs = (block_follow() or check(";")) and {} or exprlist()
      accept(";")
      return { tag = "Return", exprs = exprs, line = line }
    elseif tp == "break" then
      pos = pos + 1
      return { tag = "Break", line = line }
    elseif tp == "goto" then
      pos = pos + 1
      return { tag = "Goto", label = name(), line = line }
    elseif tp == "::" then
      pos = pos + 1
      local n = name()
      expect("::")
      return { tag = "Label", name = n, line = line }
    end
    local e = suffixed()
    if check("=") or check(",") then
      local targets = { e }
      while accept(",") do targets[#targets + 1] = suffixed() end
      expect("=")
      for _, tg in ipairs(targets) do
        if tg.tag ~= "Name" and tg.tag ~= "Index" then fail("cannot assign to this expression", t) end
      end
      return { tag = "Assign", targets = targets, exprs = exprlist(), line = line }
    end
    if e.tag ~= "Call" and e.tag ~= "Method" then fail("syntax error (a statement is expected)", t) end
    return { tag = "CallStat", call = e, line = line }
  end

  block = function()
    local stats = {}
    while not block_follow() do
      local st = statement()
      if st then
        stats[#stats + 1] = st
        if st.tag == "Return" then break end
      end
    end
    return stats
  end

  local body = block()
  if not check("eof") then fail("'<eof>' expected") end
  return { tag = "Function", params = {}, vararg = true, body = body, line = 0, endline = toks[pos].line, endpos = pos }
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
