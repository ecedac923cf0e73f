-- args.lua: declared positional signatures of public functions and methods, checked before the body
-- runs, so a wrong argument is an error naming the function ("view_as: argument 2 must be a tensor, got
-- nil"), never a Lua internal from deep inside it.
--[[ A signature is a list of kinds, one per positional argument: "tensor", "number", "integer",
  "boolean", "string", "function", "table" (a plain table: a list or an options table), "module", "size"
  (an integer or a symbolic ds.sym size), "any",
  or alternatives "tensor|number"; a trailing "?" lets the argument be nil. Arguments past the list are
  not checked (varargs). M.wrap(name, sig, f) returns f behind the check; M.original maps the wrapper back
  to f (tools/gen_api.lua documents f's own parameter names). Hot elementwise ops do not go through this:
  dispatch checks their operands. ]]
local errors = require("ds.errors")

local M = { original = setmetatable({}, { __mode = "k" }) }

local function is_tensor(v) return getmetatable(v) == "ds.Tensor" end

local TESTS = {
  tensor = is_tensor,
  number = function(v) return type(v) == "number" and v == v end,
  integer = function(v) return type(v) == "number" and v == math.floor(v) and v > -math.huge and v < math.huge end,
  boolean = function(v) return type(v) == "boolean" end,
  string = function(v) return type(v) == "string" end,
  ["function"] = function(v) return type(v) == "function" end,
  table = function(v) return type(v) == "table" and getmetatable(v) == nil end,
  module = function(v) return type(v) == "table" and not is_tensor(v) and v._is_module == true end,
  size = function(v) -- an integer or a symbolic size (ds.sym, while tracing)
    return type(v) == "number" and v == math.floor(v) and v > -math.huge and v < math.huge
      or getmetatable(v) == "ds.sym"
  end,
  any = function() return true end,
}
local TEXT = { tensor = "a tensor", number = "a number", integer = "an integer", boolean = "a boolean",
  string = "a string", ["function"] = "a function", table = "a table", module = "a module", size = "an integer size",
  any = "anything" }

-- "tensor|number?" -> { tests = {...}, optional = true, text = "a tensor or a number" }
local function parse_kind(kind)
  local optional = kind:sub(-1) == "?"
  local tests, texts = {}, {}
  for k in (optional and kind:sub(1, -2) or kind):gmatch("[^|]+") do
    tests[#tests + 1] = TESTS[k] or error("args: unknown kind " .. k, 3)
    texts[#texts + 1] = TEXT[k]
  end
  return { tests = tests, optional = optional, text = table.concat(texts, " or ") .. (optional and " or nil" or "") }
end

local function describe(v)
  if is_tensor(v) then return "a tensor" end
  if type(v) == "table" and v._is_module == true then return "a module" end
  if type(v) == "number" then return tostring(v) end
  return type(v)
end

-- the parsed form of a signature (a list of kind strings)
function M.signature(kinds)
  local sig = {}
  for i, k in ipairs(kinds) do sig[i] = parse_kind(k) end
  return sig
end

-- the position of the first argument that does not fit sig, or nil
local function first_misfit(sig, ...)
  for i = 1, #sig do
    local v, s = select(i, ...), sig[i]
    if not (v == nil and s.optional) then
      local ok = false
      for j = 1, #s.tests do if s.tests[j](v) then ok = true; break end end
      if not ok then return i end
    end
  end
end

local function raise_misfit(name, sig, i, ...)
  errors.raise(string.format("%s: argument %d must be %s, got %s", name, i, sig[i].text, describe((select(i, ...)))))
end

-- raise "name: argument i must be ..., got ..." for the first argument that does not fit sig
function M.check(name, sig, ...)
  local i = first_misfit(sig, ...)
  if i then raise_misfit(name, sig, i, ...) end
end

-- as check, for method k of a module: the error names the instance's class ("LSTM:forward")
function M.check_method(self, k, sig, ...)
  local i = first_misfit(sig, ...)
  if i then raise_misfit(tostring(self._name) .. ":" .. k, sig, i, ...) end
end

-- f behind a check of its positional arguments against kinds
function M.wrap(name, kinds, f)
  local sig = M.signature(kinds)
  local check = M.check
  local w = function(...)
    check(name, sig, ...)
    return f(...)
  end
  M.original[w] = M.original[f] or f
  return w
end

return M
