-- options.lua: the option tables of ds functions and nn modules, checked against the keys and kinds
-- each one declares (an unknown key, a wrong type or an out-of-range value is an error naming the op).
local errors = require("ds.errors")
local dtype = require("ds.dtype")
local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

local function is_tensor(v) return getmetatable(v) == "ds.Tensor" end

-- kind: "number", "integer", "boolean", "string", "tensor", "dtype", "function", "any", a list of
-- allowed strings, or { kind, min = , max = } for a number range
local function kind_ok(kind, v)
  if type(kind) == "table" and kind[1] ~= nil and kind.min == nil and kind.max == nil then
    for _, s in ipairs(kind) do if v == s then return true end end
    return false, "one of '" .. table.concat(kind, "', '") .. "'"
  end
  local base = type(kind) == "table" and kind[1] or kind
  local ok
  if base == "number" then ok = type(v) == "number" and v == v
  elseif base == "integer" then ok = type(v) == "number" and v == math.floor(v) and math.abs(v) < math.huge
  elseif base == "tensor" then ok = is_tensor(v)
  elseif base == "dtype" then ok = type(v) == "string" and dtype.normalize(v) ~= nil
  elseif base == "any" then ok = true
  else ok = type(v) == base end
  if not ok then return false, base == "integer" and "an integer" or base == "number" and "a number" or base end
  if type(kind) == "table" and ((kind.min and v < kind.min) or (kind.max and v > kind.max)) then
    return false, string.format("in [%s, %s]", tostring(kind.min or -math.huge), tostring(kind.max or math.huge))
  end
  return true
end

-- opts: the caller's table or nil; spec: { key = kind }. Returns opts, or an empty table for nil.
function M.check(opts, opname, spec)
  if opts == nil then return {} end
  if type(opts) ~= "table" or getmetatable(opts) ~= nil then
    raise("%s: options must be a table {key = value}, got %s", opname, is_tensor(opts) and "a tensor" or type(opts))
  end
  for k, v in pairs(opts) do
    local kind = spec[k]
    if kind == nil then
      local known = {}
      for name in pairs(spec) do known[#known + 1] = name end
      table.sort(known)
      raise("%s: unknown option '%s' (options: %s)", opname, tostring(k), #known > 0 and
        table.concat(known, ", ") or "none")
    end
    local ok, want = kind_ok(kind, v)
    if not ok then
      raise("%s: option '%s' must be %s, got %s", opname, k, want, type(v) == "number" and tostring(v) or type(v))
    end
  end
  return opts
end

return M
