-- convert/rewrite.lua: a parsed function -> converted Lua source on the user's original lines. `if`/`while`/
-- `repeat`/numeric `for` become calls of the runtime (`__ds_rt.if_(cond, then_fn, else_fn, ...)`) with the
-- variables they assign carried in and out; `break` becomes a flag; and/or/not in conditions become runtime
-- calls; calls go through `__ds_rt.call` (so callees are converted). What cannot be converted stays plain Lua
-- with its condition checked (`__ds_rt.check`), which names the construct, its line and the reason when the
-- condition is a tensor while tracing (a goto or label's construct eagerly too). mode "check" ({convert = false}) only
-- checks.
local A = require("ds.convert.analysis")
local lexer = require("ds.convert.lexer")

local M = {}

local function Name(n, line) return { tag = "Name", name = n, line = line } end

-- ---- break -> flag ----
-- block with every `break` that leaves it replaced by `flag = true`, and the statements after a statement that
-- may break wrapped in `if not flag then ... end`; returns the new block and whether it may break
local function lower_breaks(block, flag)
  local out = {}
  for i, s in ipairs(block) do
    local broke = false
    if s.tag == "Break" then
      out[#out + 1] = { tag = "Assign", targets = { Name(flag, s.line) }, exprs = { { tag = "True", line = s.line } },
        line = s.line }
      return out, true
    elseif s.tag == "If" then
      local ns = { tag = "If", clauses = {}, line = s.line }
      for k, c in ipairs(s.clauses) do
        local b, br = lower_breaks(c.body, flag)
        ns.clauses[k] = { cond = c.cond, body = b, line = c.line }
        broke = broke or br
      end
      if s.orelse then
        local b, br = lower_breaks(s.orelse, flag)
        ns.orelse = b
        broke = broke or br
      end
      out[#out + 1] = ns
    elseif s.tag == "Do" then
      local b, br = lower_breaks(s.body, flag)
      out[#out + 1] = { tag = "Do", body = b, line = s.line }
      broke = br
    else
      out[#out + 1] = s
    end
    if broke then
      local rest = { unpack(block, i + 1) }
      if #rest > 0 then
        local lowered = lower_breaks(rest, flag)
        out[#out + 1] = { tag = "If", line = rest[1].line, clauses = { {
          cond = { tag = "Unop", op = "not", expr = Name(flag, rest[1].line), line = rest[1].line },
          body = lowered, line = rest[1].line } } }
      end
      return out, true
    end
  end
  return out, false
end

-- a goto's refusal holds eagerly too: a jump under a tensor condition is refused whether or not it is traced
local GOTO = "goto or label inside the "
local function eager_too(reason) return reason:sub(1, #GOTO) == GOTO and ", true" or "" end

-- the reason a block (a branch or a loop body) cannot become a function, or nil
local function refusal(info, construct)
  if info.gotos then return string.format(GOTO .. "%s (line %d)", construct, info.gotos.line) end
  if info.vararg then return string.format("`...` used inside the %s (line %d)", construct, info.vararg.line) end
  if info.closure_assign then
    return string.format("a function defined inside the %s assigns `%s` (line %d), a variable outside it",
      construct, info.closure_assign.name, info.closure_assign.line)
  end
  if info.breaks then
    return string.format("break inside the %s (line %d) leaves a loop that is not converted", construct,
      info.breaks.line)
  end
  return nil
end

local function union(a, b)
  local out, seen = {}, {}
  for _, l in ipairs { a, b } do
    for _, n in ipairs(l) do if not seen[n] then seen[n] = true; out[#out + 1] = n end end
  end
  return out
end

-- a prefix for the generated names (the runtime, break flags) that begins no name or string of the function
local function fresh_prefix(fnode)
  local words = {}
  local function collect(v)
    if type(v) == "string" then words[#words + 1] = v
    elseif type(v) == "table" then for _, x in pairs(v) do collect(x) end end
  end
  collect(fnode)
  local prefix = "__ds_"
  local taken = true
  while taken do
    taken = false
    for _, w in ipairs(words) do
      if w:find(prefix, 1, true) then taken = true; prefix = prefix .. "_"; break end
    end
  end
  return prefix
end

-- ---- the generator: every function below takes the state G made by M.generate ----
-- append text to the output, first moving down to line ln if given and below the current line
local function put(G, text, ln)
  local parts = G.parts
  if ln and ln > G.line then parts[#parts + 1] = string.rep("\n", ln - G.line); G.line = ln end
  parts[#parts + 1] = " " .. text
  G.line = G.line + lexer.newlines(text)
end
local function site(G, ln) return string.format("%q", G.site_file .. ":" .. ln) end
local function names_list(names)
  local q = {}
  for i, n in ipairs(names) do q[i] = string.format("%q", n) end
  return "{" .. table.concat(q, ",") .. "}"
end
local function str_or_nil(s) return s and string.format("%q", s) or "nil" end

local expr, block, cond_expr

local function exprs(G, list)
  for i, e in ipairs(list) do
    if i > 1 then put(G, ",") end
    expr(G, e)
  end
end

local function func(G, f)
  put(G, G.RT .. ".mark(function(", f.line)
  local ps = {}
  for i, p in ipairs(f.params) do ps[i] = p end
  if f.vararg then ps[#ps + 1] = "..." end
  put(G, table.concat(ps, ", ") .. ")")
  block(G, f.body, { fnlevel = true })
  put(G, "end)", f.endline)
end

expr = function(G, e)
  local tag = e.tag
  if tag == "Name" then put(G, e.name, e.line)
  elseif tag == "Nil" then put(G, "nil", e.line)
  elseif tag == "True" then put(G, "true", e.line)
  elseif tag == "False" then put(G, "false", e.line)
  elseif tag == "Number" or tag == "String" then put(G, e.value, e.line)
  elseif tag == "Vararg" then put(G, "...", e.line)
  elseif tag == "Function" then func(G, e)
  elseif tag == "Table" then
    put(G, "{", e.line)
    for i, fl in ipairs(e.fields) do
      if i > 1 then put(G, ",") end
      if fl.key then put(G, "["); expr(G, fl.key); put(G, "] =")
      elseif fl.name then put(G, fl.name .. " =", fl.value.line) end
      expr(G, fl.value)
    end
    put(G, "}")
  elseif tag == "Binop" then
    expr(G, e.left); put(G, e.op, e.line); expr(G, e.right)
  elseif tag == "Unop" then
    put(G, e.op, e.line); expr(G, e.expr)
  elseif tag == "Paren" then
    put(G, "(", e.line); expr(G, e.expr); put(G, ")")
  elseif tag == "Index" then
    expr(G, e.obj); put(G, "[", e.line); expr(G, e.key); put(G, "]")
  elseif tag == "Call" then
    -- the callee's description, for the error when it is not callable (a tail call leaves no frame to name)
    local what = e.fn.tag == "Name" and ("'" .. e.fn.name .. "'")
      or (e.fn.tag == "Index" and e.fn.key.field and ("field '" .. e.fn.key.field .. "'")) or "a value"
    put(G, G.RT .. ".call(", e.line); expr(G, e.fn)
    put(G, ", " .. string.format("%q", G.site_file .. ":" .. e.line .. ": attempt to call " .. what))
    for _, a in ipairs(e.args) do put(G, ","); expr(G, a) end
    put(G, ")")
  elseif tag == "Method" then
    put(G, G.RT .. ".mcall(", e.line); expr(G, e.obj)
    put(G, ", " .. string.format("%q", e.name) .. ", " .. site(G, e.line))
    for _, a in ipairs(e.args) do put(G, ","); expr(G, a) end
    put(G, ")")
  else
    error("convert: unknown expression " .. tostring(tag))
  end
end

-- a condition: and/or/not become runtime calls (tensor-aware); the rest is a plain expression
cond_expr = function(G, e)
  if e.tag == "Binop" and (e.op == "and" or e.op == "or")
    and not A.scan({ { tag = "Return", exprs = { e.right } } }).vararg then
    put(G, G.RT .. (e.op == "and" and ".and_(" or ".or_("), e.line); cond_expr(G, e.left)
    put(G, ", function() return"); cond_expr(G, e.right); put(G, "end, " .. site(G, e.line) .. ")")
  elseif e.tag == "Unop" and e.op == "not" then
    put(G, G.RT .. ".not_(", e.line); cond_expr(G, e.expr); put(G, ", " .. site(G, e.line) .. ")")
  elseif e.tag == "Paren" then
    put(G, "(", e.line); cond_expr(G, e.expr); put(G, ")")
  else
    expr(G, e)
  end
end

local function checked(G, e, construct, reason)
  put(G, G.RT .. ".check(", e.line); cond_expr(G, e)
  put(G, ", " .. site(G, e.line) .. ", " .. string.format("%q", construct) .. ", " .. string.format("%q", reason)
    .. eager_too(reason) .. ")")
end

-- `function(names) <body> return names end`
local function carrier(G, params, body, names, ctx, endline, tail)
  put(G, "function(" .. table.concat(params, ", ") .. ")")
  block(G, body, ctx)
  put(G, "return " .. (tail and (tail .. (#names > 0 and ", " or "")) or "") .. table.concat(names, ", "), endline)
  put(G, "end")
end

-- the runtime call's tail: site, carried names, the tensor-only refusal, extra args, the carried values
local function call_tail(G, ln, names, treason, extra)
  put(G, ", " .. site(G, ln) .. ", " .. names_list(names) .. ", " .. str_or_nil(treason) .. (extra or ""))
  if #names > 0 then put(G, ", " .. table.concat(names, ", ")) end
  put(G, ")")
end

local function assign_prefix(G, names, ln)
  if #names > 0 then put(G, table.concat(names, ", ") .. " =", ln) end
end

local OFF = "conversion is off ({convert = false})"

local function stat_if(G, s, ctx, rest)
  if #s.clauses > 1 then -- elseif -> else if
    local c2 = s.clauses[2]
    s = { tag = "If", line = s.line, clauses = { s.clauses[1] },
          orelse = { { tag = "If", line = c2.line, clauses = { unpack(s.clauses, 2) }, orelse = s.orelse } } }
  end
  local c = s.clauses[1]
  local thenb, elseb, consumed = c.body, s.orelse or {}, false
  local ti, ei = A.scan(thenb), A.scan(elseb)
  local reason = G.mode == "check" and OFF or refusal(ti, "branch") or refusal(ei, "branch")
  local returning = false
  if not reason and (ti.tail_returns or ei.tail_returns) then
    if ti.returns or ei.returns then
      reason = string.format("return inside a branch (line %d) that is not its last statement",
        (ti.returns or ei.returns).line)
    elseif not ctx.fnlevel then
      reason = "return inside a branch of an if that is inside a loop"
    elseif A.always_returns(thenb) and not s.orelse and #rest > 0 then
      elseb, consumed, returning = rest, true, true
      ei = A.scan(elseb)
      reason = refusal(ei, "code after the if") or (ei.returns and string.format("return (line %d) that is not the "
        .. "last statement of the code after the if", ei.returns.line))
      if reason then elseb, consumed, returning = s.orelse or {}, false, false end
    elseif A.always_returns(thenb) and A.always_returns(elseb) then
      returning = true
    else
      reason = "only some branches return (give the if an else that returns too, or return after the if)"
    end
  end
  if reason then
    put(G, "if", s.line); checked(G, c.cond, "if", reason); put(G, "then")
    block(G, thenb, { fnlevel = ctx.fnlevel, in_loop = ctx.in_loop })
    if s.orelse then put(G, "else"); block(G, s.orelse, { fnlevel = ctx.fnlevel, in_loop = ctx.in_loop }) end
    put(G, "end")
    return false
  end
  local treason = ti.fields or ei.fields
  treason = treason and string.format("a branch assigns a table field (line %d), which graph branches cannot carry",
    treason.line)
  if returning then
    put(G, "do return " .. G.RT .. ".if_ret(", s.line); cond_expr(G, c.cond); put(G, ", function()")
    block(G, thenb, { fnlevel = true }); put(G, "end, function()")
    block(G, elseb, { fnlevel = true }); put(G, "end, " .. site(G, s.line) .. ", " .. str_or_nil(treason) .. ") end")
    return consumed
  end
  local names = union(ti.assigned, ei.assigned)
  assign_prefix(G, names, s.line)
  put(G, G.RT .. ".if_(", s.line); cond_expr(G, c.cond); put(G, ",")
  local bctx = { in_loop = ctx.in_loop }
  carrier(G, names, thenb, names, bctx, (elseb[1] and elseb[1].line or s.line))
  put(G, ",")
  carrier(G, names, elseb, names, bctx)
  call_tail(G, s.line, names, treason)
  return false
end

local function loop_refusal(G, body, construct)
  local info = A.scan(body)
  if G.mode == "check" then return OFF end
  if info.tail_returns then return string.format("return inside the %s body", construct) end
  if construct == "repeat" and info.breaks then return "break inside repeat ... until" end
  local r = refusal({ gotos = info.gotos, vararg = info.vararg, closure_assign = info.closure_assign },
    construct .. " body")
  return r
end

local function fields_reason(G, info, construct)
  return info.fields and string.format("the %s body assigns a table field (line %d), which a graph loop cannot carry",
    construct, info.fields.line) or nil
end

local function new_flag(G) G.nflags = G.nflags + 1; return G.gen .. "break" .. G.nflags end

local function stat_while(G, s)
  local reason = loop_refusal(G, s.body, "while")
  if reason then
    put(G, "while", s.line); checked(G, s.cond, "while", reason); put(G, "do")
    block(G, s.body, { in_loop = true }); put(G, "end")
    return
  end
  local body, condition = s.body, s.cond
  if A.scan(body).breaks then
    local flag = new_flag(G)
    body = lower_breaks(body, flag)
    condition = { tag = "Binop", op = "and", line = s.line,
      left = { tag = "Unop", op = "not", expr = Name(flag, s.line), line = s.line }, right = condition }
    put(G, "local " .. flag .. " = false;", s.line)
  end
  local info = A.scan(body)
  local names = info.assigned
  assign_prefix(G, names, s.line)
  put(G, G.RT .. ".while_(function(" .. table.concat(names, ", ") .. ") return", s.line)
  cond_expr(G, condition); put(G, "end,")
  carrier(G, names, body, names, { in_loop = true })
  call_tail(G, s.line, names, fields_reason(G, info, "while"))
end

local function stat_repeat(G, s)
  local reason = loop_refusal(G, s.body, "repeat")
  if reason then
    put(G, "repeat", s.line); block(G, s.body, { in_loop = true }); put(G, "until")
    checked(G, s.cond, "repeat", reason)
    return
  end
  local info = A.scan(s.body)
  local names = info.assigned
  assign_prefix(G, names, s.line)
  put(G, G.RT .. ".repeat_(function(" .. table.concat(names, ", ") .. ")", s.line)
  block(G, s.body, { in_loop = true })
  put(G, "return", s.cond.line); cond_expr(G, s.cond)
  if #names > 0 then put(G, ", " .. table.concat(names, ", ")) end
  put(G, "end")
  call_tail(G, s.line, names, fields_reason(G, info, "repeat"))
end

local function stat_fornum(G, s)
  local reason = loop_refusal(G, s.body, "for")
  if reason then
    put(G, "for " .. s.var .. " =", s.line)
    for i, e in ipairs { s.start, s.limit, s.step } do
      if i > 1 then put(G, ",") end
      put(G, G.RT .. ".num("); expr(G, e)
      put(G, ", " .. site(G, s.line) .. ", " .. string.format("%q", reason) .. eager_too(reason) .. ")")
    end
    put(G, "do"); block(G, s.body, { in_loop = true }); put(G, "end")
    return
  end
  local body, flag = s.body, nil
  if A.scan(body).breaks then
    flag = new_flag(G)
    body = lower_breaks(body, flag)
    put(G, "local " .. flag .. " = false;", s.line)
  end
  local info = A.scan(body)
  local names = info.assigned
  local brk = 0
  for i, n in ipairs(names) do if n == flag then brk = i end end
  assign_prefix(G, names, s.line)
  put(G, G.RT .. ".for_(", s.line); expr(G, s.start); put(G, ","); expr(G, s.limit); put(G, ",")
  if s.step then expr(G, s.step) else put(G, "nil") end
  put(G, ",")
  local params = { s.var }
  for _, n in ipairs(names) do params[#params + 1] = n end
  carrier(G, params, body, names, { in_loop = true })
  call_tail(G, s.line, names, fields_reason(G, info, "for"), ", " .. brk)
end

local function stat(G, s, ctx, rest)
  local tag = s.tag
  if tag == "Local" then
    put(G, "local " .. table.concat(s.names, ", "), s.line)
    if #s.exprs > 0 then put(G, "="); exprs(G, s.exprs) end
  elseif tag == "Assign" then
    exprs(G, s.targets); put(G, "="); exprs(G, s.exprs)
  elseif tag == "CallStat" then expr(G, s.call)
  elseif tag == "Do" then put(G, "do", s.line); block(G, s.body, { in_loop = ctx.in_loop }); put(G, "end")
  elseif tag == "LocalFunction" then
    put(G, "local " .. s.name .. "; " .. s.name .. " =", s.line); func(G, s.func)
  elseif tag == "FunctionStat" then
    local path = s.path[1]
    for i = 2, #s.path do path = path .. "[" .. string.format("%q", s.path[i]) .. "]" end
    if s.method then path = path .. "[" .. string.format("%q", s.method) .. "]" end
    put(G, path .. " =", s.line); func(G, s.func)
  elseif tag == "Return" then put(G, "return", s.line); exprs(G, s.exprs)
  elseif tag == "Break" then put(G, "break", s.line)
  elseif tag == "Goto" then put(G, "goto " .. s.label, s.line)
  elseif tag == "Label" then put(G, "::" .. s.name .. "::", s.line)
  elseif tag == "Forin" then
    put(G, "for " .. table.concat(s.names, ", ") .. " in", s.line); exprs(G, s.exprs); put(G, "do")
    block(G, s.body, { in_loop = true }); put(G, "end")
  elseif tag == "If" then return stat_if(G, s, ctx, rest)
  elseif tag == "While" then stat_while(G, s)
  elseif tag == "Repeat" then stat_repeat(G, s)
  elseif tag == "Fornum" then stat_fornum(G, s)
  else error("convert: unknown statement " .. tostring(tag)) end
  return false
end

block = function(G, b, ctx)
  for i, s in ipairs(b) do
    local consumed = stat(G, s, ctx, ctx.fnlevel and i < #b and { unpack(b, i + 1) } or {})
    put(G, ";")
    if consumed then break end
  end
end

-- generate(fnode, chunk, mode, upvalues) -> the chunk text and the name of its runtime variable: line 1 declares the
-- runtime and the upvalues (`local rt, up1, ... = ...; return`), then `function(params) ... end` on its original lines
function M.generate(fnode, site_file, mode, upvalues)
  local gen = fresh_prefix(fnode)
  local RT = gen .. "rt"
  local decl, seen = { RT }, {}
  for _, n in ipairs(upvalues) do if not seen[n] then seen[n] = true; decl[#decl + 1] = n end end
  -- the generator state: output parts and current line, the generated-name prefix, the runtime's name, break flags
  local G = { parts = { "local " .. table.concat(decl, ", ") .. " = ...; return" }, line = 1, gen = gen, RT = RT,
    nflags = 0, site_file = site_file, mode = mode }
  func(G, fnode)
  return table.concat(G.parts), RT
end

return M
