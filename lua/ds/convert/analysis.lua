-- convert/analysis.lua: what a block does, for the rewrite: the names it assigns that live outside it (the
-- loop-carried / branch-carried variables), and the constructs that stop a conversion (return, break, goto, ...).
local M = {}

local LOOPS = { While = true, Repeat = true, Fornum = true, Forin = true }

-- scan(block) -> info:
--   assigned   names assigned in the block (not inside nested functions) that are not declared in it, in order
--   returns    the first Return not in tail position (a node), tail_returns: any Return at all
--   breaks     the first Break that leaves the block (not inside a nested loop)
--   gotos      the first Goto or Label; vararg: the first `...`
--   fields     the first assignment to a table field (a side effect a tensor branch cannot carry)
--   closure_assign  the first assignment, inside a function defined in the block, to a name declared outside it
function M.scan(block)
  local info = { assigned = {} }
  local seen = {}
  local scopes = { {} }
  local function declared(name)
    for i = #scopes, 1, -1 do if scopes[i][name] then return true end end
    return false
  end
  local function declare(name) scopes[#scopes][name] = true end
  local function first(key, node) if not info[key] then info[key] = node end end

  local walk_block, walk_expr
  -- a function defined in the block: an assignment in it to a name of the enclosing function (not one it
  -- declares itself, anywhere) would write the branch's copy, so it stops the conversion
  local function walk_function(f)
    local own = {}
    local function collect(v)
      if type(v) ~= "table" then return end
      if v.tag == "Function" then for _, p in ipairs(v.params) do own[p] = true end end
      if v.tag == "Local" or v.tag == "Forin" then for _, n in ipairs(v.names) do own[n] = true end end
      if v.tag == "LocalFunction" then own[v.name] = true end
      if v.tag == "Fornum" then own[v.var] = true end
      for _, x in pairs(v) do collect(x) end
    end
    collect(f)
    local function visit(v)
      if type(v) ~= "table" then return end
      if v.tag == "Assign" then
        for _, t in ipairs(v.targets) do
          if t.tag == "Name" and not own[t.name] and not declared(t.name) then first("closure_assign", t) end
        end
      end
      for _, x in pairs(v) do visit(x) end
    end
    visit(f.body)
  end

  walk_expr = function(e)
    local tag = e.tag
    if tag == "Function" then walk_function(e)
    elseif tag == "Vararg" then first("vararg", e)
    elseif tag == "Binop" then walk_expr(e.left); walk_expr(e.right)
    elseif tag == "Unop" or tag == "Paren" then walk_expr(e.expr)
    elseif tag == "Index" then walk_expr(e.obj); walk_expr(e.key)
    elseif tag == "Call" or tag == "Method" then
      walk_expr(e.fn or e.obj)
      for _, a in ipairs(e.args) do walk_expr(a) end
    elseif tag == "Table" then
      for _, fl in ipairs(e.fields) do if fl.key then walk_expr(fl.key) end; walk_expr(fl.value) end
    end
  end

  local function assign_name(name, node)
    if not declared(name) and not seen[name] then
      seen[name] = true
      info.assigned[#info.assigned + 1] = name
    end
  end

  local function walk_stat(s, depth_loop, tail)
    local tag = s.tag
    if tag == "Local" then
      for _, e in ipairs(s.exprs) do walk_expr(e) end
      for _, n in ipairs(s.names) do declare(n) end
    elseif tag == "LocalFunction" then
      declare(s.name); walk_function(s.func)
    elseif tag == "FunctionStat" then
      if #s.path == 1 and not s.method then assign_name(s.path[1], s) else first("fields", s) end
      walk_function(s.func)
    elseif tag == "Assign" then
      for _, e in ipairs(s.exprs) do walk_expr(e) end
      for _, t in ipairs(s.targets) do
        if t.tag == "Name" then assign_name(t.name, t) else first("fields", t); walk_expr(t) end
      end
    elseif tag == "CallStat" then walk_expr(s.call)
    elseif tag == "Return" then
      info.tail_returns = true
      if not tail then first("returns", s) end
      for _, e in ipairs(s.exprs) do walk_expr(e) end
    elseif tag == "Break" then
      if depth_loop == 0 then first("breaks", s) end
    elseif tag == "Goto" or tag == "Label" then first("gotos", s)
    elseif tag == "Do" then walk_block(s.body, depth_loop, tail)
    elseif tag == "If" then
      for _, c in ipairs(s.clauses) do walk_expr(c.cond); walk_block(c.body, depth_loop, tail) end
      if s.orelse then walk_block(s.orelse, depth_loop, tail) end
    elseif LOOPS[tag] then
      if tag == "Fornum" then walk_expr(s.start); walk_expr(s.limit); if s.step then walk_expr(s.step) end end
      if tag == "Forin" then for _, e in ipairs(s.exprs) do walk_expr(e) end end
      if tag == "While" then walk_expr(s.cond) end
      scopes[#scopes + 1] = {}
      if tag == "Fornum" then declare(s.var) end
      if tag == "Forin" then for _, n in ipairs(s.names) do declare(n) end end
      walk_block(s.body, depth_loop + 1, false, true)
      if tag == "Repeat" then walk_expr(s.cond) end
      table.remove(scopes)
    end
  end

  walk_block = function(b, depth_loop, tail, keep_scope)
    if not keep_scope then scopes[#scopes + 1] = {} end
    for i, s in ipairs(b) do walk_stat(s, depth_loop, tail and i == #b) end
    if not keep_scope then table.remove(scopes) end
  end

  walk_block(block, 0, true)
  return info
end

-- does every path through block end in a return?
function M.always_returns(block)
  local last = block[#block]
  if not last then return false end
  if last.tag == "Return" then return true end
  if last.tag == "Do" then return M.always_returns(last.body) end
  if last.tag == "If" then
    if not last.orelse or not M.always_returns(last.orelse) then return false end
    for _, c in ipairs(last.clauses) do if not M.always_returns(c.body) then return false end end
    return true
  end
  return false
end

-- is e's value a Lua boolean whatever its operands are (comparisons, literals, and/or/not of those)?
local COMPARE = { ["=="] = true, ["~="] = true, ["<"] = true, ["<="] = true, [">"] = true, [">="] = true }
local LITERAL = { True = true, False = true, Nil = true, Number = true, String = true }
local function boolean_valued(e)
  if LITERAL[e.tag] then return true end
  if e.tag == "Paren" or e.tag == "Unop" and e.op == "not" then return boolean_valued(e.expr) end
  if e.tag == "Binop" then
    if COMPARE[e.op] then return true end
    if e.op == "and" or e.op == "or" then return boolean_valued(e.left) and boolean_valued(e.right) end
  end
  return false
end

-- the first if/while/repeat condition of fnode's own body (not of functions it defines) that may be a tensor, or nil:
-- unconverted, such a condition is always true for a tensor
function M.truth_test(fnode)
  local found
  local function visit(v)
    if found or type(v) ~= "table" or v.tag == "Function" then return end
    if v.tag == "If" then
      for _, c in ipairs(v.clauses) do if not boolean_valued(c.cond) then found = c; return end end
    elseif (v.tag == "While" or v.tag == "Repeat") and not boolean_valued(v.cond) then
      found = v
      return
    end
    for _, x in pairs(v) do visit(x) end
  end
  for _, s in ipairs(fnode.body) do visit(s) end
  return found
end

M.LOOPS = LOOPS
return M
