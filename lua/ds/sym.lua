-- sym.lua: symbolic dims for tracing -- integer polynomials over named dims ("batch", "batch*10", "n-2").
-- A symbolic dim is an interned object: equal expressions are the same Lua object, so `a == b` and
-- shape.same work by identity. Expressions that reduce to a constant are plain Lua numbers.
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local D = require("ds.dispatch")
local F = require("ds.ops.common").functions -- add, sub, mul, div (ops/elementwise.lua)

local M = {}
local Sym = { __metatable = "ds.sym" }
Sym.__index = Sym

local interned = setmetatable({}, { __mode = "v" })

local function is_sym(v) return getmetatable(v) == "ds.sym" end
M.is = is_sym

-- a monomial is a sorted list of names, keyed "a*b*b"; the constant monomial is ""
local function mono_key(names) return table.concat(names, "*") end
local function mono_names(key)
  local names = {}
  if key ~= "" then for n in key:gmatch("[^*]+") do names[#names + 1] = n end end
  return names
end

-- terms: {[monomial key] = integer coefficient} -> number or interned Sym
local function make(terms)
  local keys = {}
  for k, c in pairs(terms) do if c ~= 0 then keys[#keys + 1] = k end end
  if #keys == 0 then return 0 end
  if #keys == 1 and keys[1] == "" then return terms[""] end
  -- canonical order: higher degree first, then by name; the constant last
  table.sort(keys, function(a, b)
    if (a == "") ~= (b == "") then return b == "" end
    local na, nb = #mono_names(a), #mono_names(b)
    if na ~= nb then return na > nb end
    return a < b
  end)
  local parts = {}
  for i, k in ipairs(keys) do
    local c = terms[k]
    local body
    if k == "" then body = tostring(math.abs(c))
    elseif math.abs(c) == 1 then body = k
    else body = math.abs(c) .. "*" .. k end
    if i == 1 then parts[1] = (c < 0 and "-" or "") .. body
    else parts[#parts + 1] = (c < 0 and "-" or "+") .. body end
  end
  local text = table.concat(parts)
  local s = interned[text]
  if s then return s end
  local own = {}
  for _, k in ipairs(keys) do own[k] = terms[k] end
  s = setmetatable({ terms = own, text = text }, Sym)
  interned[text] = s
  return s
end

local function terms_of(v)
  if is_sym(v) then return v.terms end
  if type(v) ~= "number" or v ~= math.floor(v) then
    errors.raise("symbolic dim arithmetic: expected an integer or a symbolic dim, got " .. tostring(v))
  end
  return { [""] = v }
end

-- a named dim (a single symbol); a floor symbol's name (below) registers its definition
function M.named(name)
  assert(type(name) == "string" and name ~= "" and not name:find("[*+%- ]"),
    "bad symbolic dim name: " .. tostring(name))
  if name:sub(1, 6) == "floor#" then M.floor_of(name) end
  return make({ [name] = 1 })
end

-- the name of a plain symbol (coefficient 1, degree 1), or nil for compound expressions
function M.symbol_name(v)
  if not is_sym(v) then return nil end
  local k, c = next(v.terms)
  if next(v.terms, k) == nil and c == 1 and k ~= "" and not k:find("*", 1, true) then return k end
  return nil
end

function M.add(a, b)
  local ta, tb, out = terms_of(a), terms_of(b), {}
  for k, c in pairs(ta) do out[k] = c end
  for k, c in pairs(tb) do out[k] = (out[k] or 0) + c end
  return make(out)
end

function M.sub(a, b)
  local ta, tb, out = terms_of(a), terms_of(b), {}
  for k, c in pairs(ta) do out[k] = c end
  for k, c in pairs(tb) do out[k] = (out[k] or 0) - c end
  return make(out)
end

function M.mul(a, b)
  if type(a) == "number" and type(b) == "number" then return a * b end
  local ta, tb, out = terms_of(a), terms_of(b), {}
  for ka, ca in pairs(ta) do
    for kb, cb in pairs(tb) do
      local names = mono_names(ka)
      for _, n in ipairs(mono_names(kb)) do names[#names + 1] = n end
      table.sort(names)
      local k = mono_key(names)
      out[k] = (out[k] or 0) + ca * cb
    end
  end
  return make(out)
end

-- the leading term {key, coefficient} of terms in make()'s order (higher degree first, then by name)
local function leading(terms)
  local best
  for k, c in pairs(terms) do
    if c ~= 0 then
      local nk = k == "" and -1 or #mono_names(k)
      if not best or nk > best.n or (nk == best.n and k < best.k) then best = { k = k, c = c, n = nk } end
    end
  end
  return best
end

-- a / b by polynomial long division when b has several terms (32*batch*t+32*batch over batch*t+batch): the
-- quotient, or nil when it does not divide exactly
local function long_div(a, b)
  local q, r = 0, a
  for _ = 1, 64 do
    if r == 0 then return q end
    local lr, lb = leading(terms_of(r)), leading(terms_of(b))
    local t = lr and lb and lr.c % lb.c == 0 and M.div(make({ [lr.k] = lr.c }), make({ [lb.k] = lb.c }), nil, true)
    if not t then return nil end
    q, r = M.add(q, t), M.sub(r, M.mul(t, b))
  end
  return nil
end

-- exact division by a number, a single-term expression or (by long division) a polynomial; anything else
-- is an error naming the op (quiet: return nil instead)
function M.div(a, b, opname, quiet)
  local ta, tb = terms_of(a), terms_of(b)
  local kb, cb = next(tb)
  local function fail()
    if quiet then return nil end
    errors.raise(string.format("%s: cannot divide symbolic size %s by %s exactly", opname or "symbolic dim",
      tostring(a), tostring(b)))
  end
  if cb ~= nil and next(tb, kb) ~= nil then return long_div(a, b) or fail() end
  if cb == nil or cb == 0 then return fail() end
  local div_names = mono_names(kb)
  local out = {}
  for k, c in pairs(ta) do
    if c % cb ~= 0 then return fail() end
    local names, left = mono_names(k), {}
    local need = {}
    for _, n in ipairs(div_names) do need[n] = (need[n] or 0) + 1 end
    for _, n in ipairs(names) do
      if need[n] and need[n] > 0 then need[n] = need[n] - 1 else left[#left + 1] = n end
    end
    for _, r in pairs(need) do if r > 0 then return fail() end end
    out[mono_key(left)] = c / cb
  end
  return make(out)
end

-- ---- floor division: a symbol of its own, "floor#c#<expr>" (expr's text with - + * # escaped as #m #p #x ##),
-- whose value is floor(expr / c) once expr's names are bound: the output size of a strided conv or pool over
-- a dynamic dim. The name carries its definition, so a saved graph reads it back (M.named re-registers it).
local floors = {}   -- name -> {expr = dim, c = positive integer}
local ESCAPE, UNESCAPE = { ["-"] = "#m", ["+"] = "#p", ["*"] = "#x", ["#"] = "##" }, { m = "-", p = "+", x = "*",
  ["#"] = "#" }

-- "10*batch-2" -> a dim; nil, message for text that is not one
function M.parse(text)
  if type(text) ~= "string" or #text == 0 or #text > 200 or not text:match("^[%w_#*+%-]+$") then
    return nil, "bad dim " .. tostring(text)
  end
  local total, s, pos = 0, text:sub(1, 1) == "-" and text or ("+" .. text), 1
  while pos <= #s do
    local sign, term, nxt = s:match("^([+-])([^+-]+)()", pos)
    if not sign or term:sub(-1) == "*" or term:sub(1, 1) == "*" or term:find("**", 1, true) then
      return nil, "bad dim expression " .. text
    end
    local t = sign == "-" and -1 or 1
    for f in term:gmatch("[^*]+") do
      if f:match("^%d+$") then t = M.mul(t, tonumber(f))
      elseif f:match("^[%a_][%w_#]*$") then
        local ok, named = pcall(M.named, f)
        if not ok then return nil, tostring(named) end
        t = M.mul(t, named)
      else return nil, "bad factor '" .. f .. "' in dim " .. text end
    end
    total = M.add(total, t)
    pos = nxt
  end
  return total
end

-- floor(a / c) for a dim a and a positive integer c: a number, an exact quotient, or a floor symbol
function M.floordiv(a, c)
  if type(a) == "number" then return math.floor(a / c) end
  if c == 1 then return a end
  local exact = true
  for _, coef in pairs(a.terms) do if coef % c ~= 0 then exact = false end end
  if exact then return M.div(a, c) end
  local name = "floor#" .. c .. "#" .. a.text:gsub("[-+*#]", ESCAPE)
  floors[name] = floors[name] or { expr = a, c = c }
  return make({ [name] = 1 })
end

-- the definition {expr, c} of a floor symbol's name, registered from the name itself if new; nil otherwise
function M.floor_of(name)
  if floors[name] then return floors[name] end
  local c, body = name:match("^floor#(%d+)#(.+)$")
  if not c then return nil end
  local text = body:gsub("#(.)", function(e) return UNESCAPE[e] or error("bad floor dim " .. name, 0) end)
  local expr = M.parse(text)
  if not expr or tonumber(c) < 1 then error("bad floor dim " .. name, 0) end
  floors[name] = { expr = expr, c = tonumber(c) }
  return floors[name]
end

-- two dims are the same when their canonical forms are (interning makes that identity)
function M.same(a, b) return a == b end

-- the value of a dim given bindings {name = number}
function M.eval(v, env)
  if not is_sym(v) then return v end
  local total = 0
  for k, c in pairs(v.terms) do
    local p = c
    for _, n in ipairs(mono_names(k)) do
      local x = env[n]
      local fl = x == nil and floors[n]
      if fl then x = math.floor(M.eval(fl.expr, env) / fl.c) end
      if x == nil then error("symbolic dim '" .. n .. "' has no value (no input bound it)", 0) end
      p = p * x
    end
    total = total + p
  end
  return total
end

-- deep copy of attrs/shapes with every symbolic dim replaced by its value (Graphs and tensors kept)
function M.subst(v, env)
  if is_sym(v) then return M.eval(v, env) end
  if type(v) ~= "table" or getmetatable(v) ~= nil then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = M.subst(x, env) end
  return out
end

-- does a (nested, plain) table contain a symbolic dim?
function M.contains(v)
  if is_sym(v) then return true end
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  for _, x in pairs(v) do if M.contains(x) then return true end end
  return false
end

-- ---- Lua operators: arithmetic with numbers and other dims; tensors delegate to tensor ops ----
-- a dim meeting a tensor becomes a 0-d node of the tensor's dtype (an integer: a weak scalar)
local function tensor_op(name, a, b)
  local t = Tensor.is_tensor(a) and a or Tensor.is_tensor(b) and b or nil
  if not t then return nil end
  local dt = t.dtype == "bool" and "i64" or t.dtype
  if is_sym(a) then a = D.scalar(a, dt) end
  if is_sym(b) then b = D.scalar(b, dt) end
  return F[name](a, b)
end
Sym.__add = function(a, b) return tensor_op("add", a, b) or M.add(a, b) end
Sym.__sub = function(a, b) return tensor_op("sub", a, b) or M.sub(a, b) end
Sym.__mul = function(a, b) return tensor_op("mul", a, b) or M.mul(a, b) end
Sym.__div = function(a, b) return tensor_op("div", a, b) or M.div(a, b, "/") end
Sym.__unm = function(a) return M.mul(a, -1) end
Sym.__tostring = function(s) return s.text end
Sym.__concat = function(a, b) return tostring(a) .. tostring(b) end
local function no_compare(a, b)
  errors.raise(string.format("cannot compare symbolic dims %s and %s while tracing (the value is only known "
    .. "when the graph runs); use a spec with a fixed size, or ds.cond on tensors", tostring(a), tostring(b)))
end
Sym.__lt = no_compare
Sym.__le = no_compare

-- Bind symbolic dims from actual input tensors. specs[i] = {name, shape, dtype}; label names the graph in
-- messages ("graph g", "compiled g"); env may carry an enclosing graph's bindings. Returns env.
function M.bind_inputs(label, specs, args, env)
  env = env or {}
  local from, deferred = {}, {}
  if #args ~= #specs then
    errors.raise(string.format("%s: expects %d tensor inputs, got %d", label, #specs, #args))
  end
  for i, spec in ipairs(specs) do
    local t, name = args[i], spec.name or ("input " .. i)
    if getmetatable(t) ~= "ds.Tensor" then
      errors.raise(string.format("%s: input %d (%s) must be a tensor, got %s", label, i, name, type(t)))
    end
    if not rawget(t, "_c") then
      errors.raise(string.format("%s: input %d (%s) is an abstract tensor; inside a trace call the graph",
        label, i, name))
    end
    if t.dtype ~= spec.dtype or #t._shape ~= #spec.shape then
      errors.raise(string.format("%s: input %d (%s) must be %s %s, got %s %s", label, i, name,
        spec.dtype, S.str(spec.shape), t.dtype, S.str(t._shape)))
    end
    for d, want in ipairs(spec.shape) do
      local got = t._shape[d]
      local sname = M.symbol_name(want)
      if type(want) == "number" then
        if got ~= want then
          errors.raise(string.format("%s: input %d (%s) has shape %s, its spec is %s (dim %d must be %d)",
            label, i, name, S.str(t._shape), S.str(spec.shape), d, want))
        end
      elseif sname then
        if env[sname] == nil then
          env[sname] = got; from[sname] = string.format("input %d (%s) dim %d", i, name, d)
        elseif env[sname] ~= got then
          errors.raise(string.format("%s: input %d (%s) dim %d is %d, but dim '%s' is %d (from %s)",
            label, i, name, d, got, sname, env[sname], from[sname] or "the enclosing graph"))
        end
      else
        deferred[#deferred + 1] = { i, d, want, got, name }
      end
    end
  end
  for _, c in ipairs(deferred) do
    local ok, v = pcall(M.eval, c[3], env)
    if not ok or v ~= c[4] then
      errors.raise(string.format("%s: input %d (%s) dim %d is %d, its spec says %s%s", label, c[1], c[5], c[2], c[4],
        tostring(c[3]), ok and (" = " .. v) or ""))
    end
  end
  return env
end

-- a stable string for a binding ("batch=4,seq=7"), to cache per-shape plans
function M.env_key(env)
  local names = {}
  for k in pairs(env) do names[#names + 1] = k end
  table.sort(names)
  for i, k in ipairs(names) do names[i] = k .. "=" .. env[k] end
  return table.concat(names, ",")
end

return M
