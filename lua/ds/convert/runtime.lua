-- convert/runtime.lua: what converted code calls: a condition that is a tensor while tracing becomes ds.cond /
-- ds.while_loop (the carried variables as operands); a Lua value runs plain Lua; a tensor eagerly is true when
-- non-zero (PyTorch's bool(tensor)). Calls go through `call`/`mcall`, which convert the Lua functions they reach.
local D = require("ds.dispatch")
local S = require("ds.shape")
local state = require("ds.state")
local dtype = require("ds.dtype")
local Tensor = require("ds.tensor")
local control = require("ds.control")
local F = require("ds.ops")
local guard = require("ds.convert.guard")

local M = {}
local is_tensor = Tensor.is_tensor

local function pack(...) return { n = select("#", ...), ... } end

-- a tensor while tracing: its value exists only when the graph runs
local function graph_value(c) return state.trace ~= nil and is_tensor(c) end

-- bool(c) as PyTorch has it for tensors, Lua's truth for anything else
local function truth(c, construct, site)
  if not is_tensor(c) then return c end
  if c:numel() ~= 1 then
    error(string.format("%s: %s: the condition is a tensor of shape %s; a condition needs one element (use "
      .. ":any() or :all())", site, construct, S.str(c._shape)), 0)
  end
  local v = c:item()
  return v == true or (type(v) == "number" and v ~= 0)
end

-- eager: refused outside tracing too (a goto), so that eager code and its trace agree
local function refuse(site, construct, reason, eager)
  error(string.format("%s: %s on a tensor %s: %s; the graph cannot take this branch by the tensor's "
    .. "value. Use ds.cond / ds.while_loop (docs/CONVERSION.md), or a condition that is a Lua value", site,
    construct, eager and "(refused eagerly too, as traced)" or "while tracing", reason), 0)
end

-- a 0-d bool tensor holding the truth of v (a graph tensor, a Lua value)
local function as_pred(v)
  if is_tensor(v) then
    if v.dtype == "bool" then return v end
    return v:ne(0)
  end
  return D.scalar(v ~= nil and v ~= false, "bool")
end

-- the non-tensor carried values a graph branch or loop must leave alone
local function check_kept(before, after, names, site, construct)
  if rawequal(before, after) then return end
  error(string.format("%s: %s on a tensor: `%s` is a %s before and a %s after; in graph control flow carried "
    .. "variables are tensors (give it a tensor value before, e.g. ds.tensor(0))", site, construct, names,
    type(before) == "nil" and "nil value" or type(before), is_tensor(after) and "tensor" or type(after)), 0)
end

-- a tensor construct nested in itself (a recursion through a tensor branch) this many times is refused: its depth is
-- the tensor's to decide, and tracing would recurse without end
local MAX_NESTING = 8
local active = {} -- site -> how many graph constructs of that site are being traced
guard.on_stop(function() active = {} end)

-- fn(...) traced as a graph branch or loop body of the construct at site: its Lua side effects are refused
-- (guard.lua), and so is the construct's nesting in itself past MAX_NESTING
local function traced(fn, site, what, ...)
  local rec = guard.branch_begin()
  local r = pack(fn(...))
  guard.branch_end(rec, site, what)
  return unpack(r, 1, r.n)
end

local function enter(site, construct)
  local depth = (active[site] or 0) + 1
  if depth > MAX_NESTING then
    active[site] = nil
    error(string.format("%s: %s on a tensor is nested in itself %d times while tracing (MAX_NESTING = %d in "
      .. "ds/convert/runtime.lua): a recursion whose depth a tensor decides cannot become a graph; write it as a "
      .. "loop (while ... do) over tensors", site, construct, depth, MAX_NESTING), 0)
  end
  active[site] = depth
end

local function leave(site, ...)
  active[site] = active[site] - 1
  if active[site] == 0 then active[site] = nil end
  return ...
end

-- ---- if ----
-- branches: fn(carried...) -> carried...; in graph mode the tensor-valued ones go through ds.cond
local function graph_if(c, then_fn, else_fn, site, names, ...)
  local init = pack(...)
  local n = #names
  local pattern -- per carried variable: true when the then branch made it a tensor
  local function wrap(fn, which)
    return function(...)
      local r = pack(traced(fn, site, "if on a tensor: the " .. which .. " branch", ...))
      for i = 1, n do if type(r[i]) == "boolean" then r[i] = D.scalar(r[i], "bool") end end
      if which == "then" then
        pattern = {}
        for i = 1, n do pattern[i] = is_tensor(r[i]) or r[i] end
      end
      local out = {}
      for i = 1, n do
        local p = pattern[i]
        if p == true then
          if not is_tensor(r[i]) then
            error(string.format("%s: if on a tensor: `%s` is a tensor after the then branch but a %s after the "
              .. "else branch; give it a tensor value in both", site, names[i], type(r[i])), 0)
          end
          out[#out + 1] = r[i]
        elseif is_tensor(r[i]) then
          error(string.format("%s: if on a tensor: `%s` is a tensor after the else branch but a %s after the "
            .. "then branch; give it a tensor value in both", site, names[i], type(p)), 0)
        else
          check_kept(p, r[i], names[i], site, "if")
        end
      end
      return unpack(out, 1, #out)
    end
  end
  enter(site, "if")
  local res = pack(leave(site, control.cond(as_pred(c), wrap(then_fn, "then"), wrap(else_fn, "else"),
    unpack(init, 1, n))))
  local out, k = {}, 0
  for i = 1, n do
    if pattern[i] == true then k = k + 1; out[i] = res[k] else out[i] = pattern[i] end
  end
  return unpack(out, 1, n)
end

local OFF = "conversion is off ({convert = false})"
local mark, is_converted = guard.mark, guard.is_converted

-- functions (C, LuaJIT's builtins, ds's graph control flow) that call the Lua functions they are given (at these
-- argument positions): those are converted
local CALLBACKS = {
  [pcall] = { 1 }, [xpcall] = { 1, 2 }, [coroutine.wrap] = { 1 }, [coroutine.create] = { 1 }, [table.sort] = { 2 },
  [string.gsub] = { 3 }, [table.foreach] = { 2 }, [table.foreachi] = { 2 }, [load] = { 1 },
  [control.cond] = { 2, 3 }, [control.while_loop] = { 1, 2 }, [control.fori_loop] = { 3 }, [control.scan] = { 1 },
}

-- C functions that test the truth of what their callback returns (table.sort's comparator): a tensor there is
-- tested by its value eagerly and refused while tracing (its value exists only when the graph runs)
local TRUTH_TESTED = { [table.sort] = "table.sort's comparator" }

local function truth_tested(f, what, site)
  return function(...)
    local r = f(...)
    if not is_tensor(r) then return r end
    if state.trace ~= nil then
      error(string.format("%s: %s (%s) returns a tensor while tracing; Lua would test its truth, but its value "
        .. "exists only when the graph runs. Compare Lua numbers, or order with tensor ops (ds.sort, ds.argsort)",
        site, what, guard.describe(f)), 0)
    end
    return truth(r, what, site)
  end
end

-- the runtime functions that do not depend on the mode (M.new copies them into each runtime)
local R = {}

-- eager: the refusal holds for a tensor outside tracing too
function R.check(c, site, construct, reason, eager)
  if graph_value(c) then refuse(site, construct, reason) end
  if eager and is_tensor(c) then refuse(site, construct, reason, true) end
  return truth(c, construct, site)
end

function R.num(v, site, reason, eager)
  if is_tensor(v) then
    if state.trace then refuse(site, "for", reason) end
    if eager then refuse(site, "for", reason, true) end
    return v:item()
  end
  return v
end

function R.if_(c, then_fn, else_fn, site, names, reason, ...)
  mark(then_fn); mark(else_fn)
  if not graph_value(c) then
    if truth(c, "if", site) then return then_fn(...) end
    return else_fn(...)
  end
  if reason then refuse(site, "if", reason) end
  return graph_if(c, then_fn, else_fn, site, names, ...)
end

-- both branches return: the results of the branch taken (ds.cond's results in graph mode)
function R.if_ret(c, then_fn, else_fn, site, reason)
  mark(then_fn); mark(else_fn)
  if not graph_value(c) then
    if truth(c, "if", site) then return then_fn() end
    return else_fn()
  end
  if reason then refuse(site, "if", reason) end
  local function wrap(fn, which)
    return function()
      local r = pack(traced(fn, site, "if on a tensor: the " .. which .. " branch"))
      for i = 1, r.n do if type(r[i]) == "boolean" then r[i] = D.scalar(r[i], "bool") end end
      return unpack(r, 1, r.n)
    end
  end
  enter(site, "if")
  return leave(site, control.cond(as_pred(c), wrap(then_fn, "then"), wrap(else_fn, "else")))
end

-- ---- loops ----
-- a graph loop over carried variables (names[i] = vars[i]); the non-tensor ones must stay as they are.
-- cond(vars...) -> predicate; body(vars...) -> vars...
local function graph_loop(site, construct, names, vars, cond, body, opts)
  local n = #names
  local init, pos = {}, {}
  for i = 1, n do
    if type(vars[i]) == "boolean" then vars[i] = D.scalar(vars[i], "bool") end
    if is_tensor(vars[i]) then init[#init + 1] = vars[i]; pos[#pos + 1] = i end
  end
  if #init == 0 then
    error(string.format("%s: %s on a tensor changes no tensor variable, so it would never end", site, construct), 0)
  end
  local function full(...)
    local v = {}
    for i = 1, n do v[i] = vars[i] end
    for k = 1, #pos do v[pos[k]] = select(k, ...) end
    return unpack(v, 1, n)
  end
  local function body_t(...)
    local r = pack(traced(body, site, construct .. " on a tensor: the body", full(...)))
    local out = {}
    for i = 1, n do
      local x = r[i]
      if type(x) == "boolean" then x = D.scalar(x, "bool") end
      if is_tensor(vars[i]) then
        if not is_tensor(x) then
          error(string.format("%s: %s on a tensor: `%s` is a tensor before the body and a %s after it",
            site, construct, names[i], type(x)), 0)
        end
        if x.dtype ~= vars[i].dtype or not S.equal(x._shape, vars[i]._shape) then
          error(string.format("%s: %s on a tensor: the body turns `%s` from %s %s into %s %s; loop variables "
            .. "keep their shape and dtype", site, construct, names[i], vars[i].dtype, S.str(vars[i]._shape),
            x.dtype, S.str(x._shape)), 0)
        end
        out[#out + 1] = x
      else
        check_kept(vars[i], x, names[i], site, construct)
      end
    end
    return unpack(out, 1, #out)
  end
  enter(site, construct)
  local res = pack(leave(site, control.while_loop(function(...)
    return as_pred(traced(cond, site, construct .. " on a tensor: the condition", full(...)))
  end, body_t, init, opts)))
  for k = 1, #pos do vars[pos[k]] = res[k] end
  return unpack(vars, 1, n)
end

function R.while_(cond_fn, body_fn, site, names, reason, ...)
  mark(cond_fn); mark(body_fn)
  local n = #names
  local vars = pack(...)
  while true do
    local c = cond_fn(unpack(vars, 1, n))
    if graph_value(c) then
      if reason then refuse(site, "while", reason) end
      return graph_loop(site, "while", names, vars, cond_fn, body_fn)
    end
    if not truth(c, "while", site) then break end
    vars = pack(body_fn(unpack(vars, 1, n)))
  end
  return unpack(vars, 1, n)
end

-- repeat: body_fn(vars...) -> until_value, vars...
function R.repeat_(body_fn, site, names, reason, ...)
  mark(body_fn)
  local n = #names
  local vars = pack(...)
  while true do
    local r = pack(body_fn(unpack(vars, 1, n)))
    local c = r[1]
    vars = { unpack(r, 2, n + 1) }
    if graph_value(c) then
      if reason then refuse(site, "repeat", reason) end
      local names2, vars2 = { "(until)" }, { c }
      for i = 1, n do names2[i + 1] = names[i]; vars2[i + 1] = vars[i] end
      local res = pack(graph_loop(site, "repeat", names2, vars2,
        function(u) return as_pred(u):logical_not() end,
        function(_, ...) return body_fn(...) end))
      return unpack(res, 2, n + 1)
    end
    if truth(c, "repeat", site) then break end
  end
  return unpack(vars, 1, n)
end

-- numeric for with a tensor bound (or a break on a tensor): a counter tensor k runs a, a+s, ... while k <= b
-- (k >= b for a negative step); body_fn(k, vars...) -> vars...; brk: index of the break flag in vars (0: none)
local function graph_for(a, b, s, body_fn, site, names, brk, vars)
  local dt = "i64"
  for _, v in ipairs { a, b, s } do
    if is_tensor(v) and dtype.is_float[v.dtype] then dt = v.dtype end
  end
  local n = #names
  local names2, vars2 = { "(for counter)" }, { D.cast(a, dt) }
  for i = 1, n do names2[i + 1] = names[i]; vars2[i + 1] = vars[i] end
  local limit, step = D.cast(b, dt), is_tensor(s) and D.cast(s, dt) or s
  local function cond(k, ...)
    local c
    if is_tensor(step) then c = F.where(step:gt(0), k:le(limit), k:ge(limit))
    elseif step > 0 then c = k:le(limit) else c = k:ge(limit) end
    if brk > 0 then c = c:logical_and(as_pred((select(brk, ...))):logical_not()) end
    return c
  end
  local res = pack(graph_loop(site, "for", names2, vars2, cond, function(k, ...)
    return k + step, body_fn(k, ...)
  end))
  return unpack(res, 2, n + 1)
end

function R.for_(a, b, s, body_fn, site, names, reason, brk, ...)
  mark(body_fn)
  local n = #names
  local vars = pack(...)
  s = s == nil and 1 or s
  if is_tensor(a) or is_tensor(b) or is_tensor(s) then
    if reason and state.trace then refuse(site, "for", reason) end
    return graph_for(a, b, s, body_fn, site, names, brk, vars)
  end
  for i = a, b, s do
    vars = pack(body_fn(i, unpack(vars, 1, n)))
    if brk > 0 then
      local f = vars[brk]
      if graph_value(f) then
        if reason then refuse(site, "for", reason) end
        return graph_for(i + s, b, s, body_fn, site, names, brk, vars)
      end
      if truth(f, "for", site) then break end
    end
  end
  return unpack(vars, 1, n)
end

-- ---- and / or / not in conditions ----
-- eagerly, a tensor operand gives a tensor (of the same truth): what the condition is tested by stays a tensor, so a
-- construct refused eagerly (rt.check) sees it as traced code does
local function and_(mode, a, b_fn, site)
  mark(b_fn)
  if not graph_value(a) then
    if is_tensor(a) then if truth(a, "and", site) then return as_pred(b_fn()) end return a end
    return a and b_fn()
  end
  if mode == "check" then refuse(site, "and", OFF) end
  return control.cond(as_pred(a), function() return as_pred(b_fn()) end,
    function() return D.scalar(false, "bool") end)
end

local function or_(mode, a, b_fn, site)
  mark(b_fn)
  if not graph_value(a) then
    if is_tensor(a) then if truth(a, "or", site) then return a end return as_pred(b_fn()) end
    return a or b_fn()
  end
  if mode == "check" then refuse(site, "or", OFF) end
  return control.cond(as_pred(a), function() return D.scalar(true, "bool") end, function() return as_pred(b_fn()) end)
end

local function not_(mode, a, site)
  if graph_value(a) then
    if mode == "check" then refuse(site, "not", OFF) end
    return as_pred(a):logical_not()
  end
  if is_tensor(a) then return D.scalar(not truth(a, "not", site), "bool") end
  return not a
end

-- ---- calls: the Lua functions converted code reaches are converted too ----
local function converted(convert, f)
  if is_converted(f) then return f end
  return convert(f)
end

-- the arguments of a C function that calls back Lua functions, with those functions converted
local function callbacks(convert, f, positions, site, n, ...)
  local a = { ... }
  for _, i in ipairs(positions) do
    if type(a[i]) == "function" then
      a[i] = converted(convert, a[i])
      if TRUTH_TESTED[f] then a[i] = truth_tested(a[i], TRUTH_TESTED[f], site) end
    end
  end
  return unpack(a, 1, n)
end

-- the arguments of a call to ds code (or another library), each Lua function among them converted where its source
-- can be proven (ds.no_grad(helper), m:register_forward_hook(fn), opt:step(closure)): ds calls them later
local function has_function(...)
  for i = 1, select("#", ...) do if type((select(i, ...))) == "function" then return true end end
  return false
end
local function handed(convert, n, ...)
  local a = { ... }
  for i = 1, n do
    if type(a[i]) == "function" and not is_converted(a[i]) then a[i] = convert(a[i], true) end
  end
  return unpack(a, 1, n)
end

local function call_function(convert, f, site, ...)
  local positions = CALLBACKS[f]
  if positions then return f(callbacks(convert, f, positions, site, select("#", ...), ...)) end
  local g = converted(convert, f)
  if not is_converted(g) and has_function(...) then return f(handed(convert, select("#", ...), ...)) end
  return g(...)
end

-- f(...); what: "file:line: attempt to call <callee>" for the error when f is not callable
local function call(mode, convert, f, what, ...)
  local tf = type(f)
  if tf == "function" then return call_function(convert, f, what:match("^(.-): attempt to call") or what, ...) end
  if tf == "table" and not is_tensor(f) and rawget(f, "_order") and type(f.forward) == "function" then
    if mode == "eager" then return f(...) end -- its own call converts its forward, or not (ds.convert_modules)
    return converted(convert, f.forward)(f, ...) -- a module instance: its forward
  end
  local m = (tf == "table" or tf == "userdata") and getmetatable(f)
  if tf ~= "cdata" and not (type(m) == "table" and m.__call) and not is_tensor(f) then
    error(string.format("%s (a %s value)", what, tf), 0)
  end
  if type(m) == "table" and type(m.__call) == "function" then return converted(convert, m.__call)(f, ...) end
  return f(...)
end

local function mcall(convert, o, name, site, ...)
  local f = o[name]
  if type(f) == "function" then
    if is_tensor(o) then -- (x:register_hook(fn): fn converted)
      if has_function(...) then return f(o, handed(convert, select("#", ...), ...)) end
      return f(o, ...)
    end
    return call_function(convert, f, site, o, ...)
  end
  if f == nil then error(string.format("%s: attempt to call method '%s' (a nil value)", site, name), 0) end
  if has_function(...) then return f(o, handed(convert, select("#", ...), ...)) end -- (a callable table's method)
  return f(o, ...)
end

-- the runtime of one mode ("convert"; "check" for {convert = false}; "eager" for a module's forward called eagerly);
-- convert(f) converts a callee
function M.new(mode, convert)
  local rt = { mark = mark }
  for k, f in pairs(R) do rt[k] = f end
  function rt.and_(a, b_fn, site) return and_(mode, a, b_fn, site) end
  function rt.or_(a, b_fn, site) return or_(mode, a, b_fn, site) end
  function rt.not_(a, site) return not_(mode, a, site) end
  function rt.call(f, what, ...) return call(mode, convert, f, what, ...) end
  function rt.mcall(o, name, site, ...) return mcall(convert, o, name, site, ...) end
  return rt
end

return M
