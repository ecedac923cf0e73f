-- pretty.lua: any Lua value as text for the REPL: tensors and objects by their own tostring, tables
-- with depth and length limits (cycles marked), on one line when short, indented otherwise.
local M = {}

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat return
  then true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

local function has_tostring(v)
  local mt = getmetatable(v)
  if type(mt) == "string" then return true end -- protected metatables (ds.Tensor) have their own tostring
  return type(mt) == "table" and mt.__tostring ~= nil
end

local function key_text(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") and not KEYWORDS[k] then return k end
  return "[" .. (type(k) == "string" and string.format("%q", k) or tostring(k)) .. "]"
end

-- array part first (1..n), then the other keys ordered by type and text
local function ordered_keys(t)
  local n, keys, rest = #t, {}, {}
  for i = 1, n do keys[i] = i end
  for k in pairs(t) do
    if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then rest[#rest + 1] = k end
  end
  table.sort(rest, function(a, b)
    if type(a) ~= type(b) then return type(a) < type(b) end
    if type(a) == "number" then return a < b end
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(rest) do keys[#keys + 1] = k end
  return keys, n
end

local function scalar(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "number" and v % 1 == 0 and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
  return tostring(v)
end

local format

local function format_table(t, opts, depth, seen, indent)
  if seen[t] then return "<cycle " .. tostring(t):gsub("^table: ", "") .. ">" end
  if depth >= opts.depth then return next(t) == nil and "{}" or "{...}" end
  seen[t] = true
  local keys, n = ordered_keys(t)
  local parts = {}
  for i, k in ipairs(keys) do
    if i > opts.items then
      parts[#parts + 1] = string.format("... (%d more)", #keys - opts.items)
      break
    end
    local v = format(t[k], opts, depth + 1, seen, indent .. "  ")
    parts[#parts + 1] = (type(k) == "number" and k <= n) and v or (key_text(k) .. " = " .. v)
  end
  seen[t] = nil
  if #parts == 0 then return "{}" end
  local one_line = "{ " .. table.concat(parts, ", ") .. " }"
  if #one_line + #indent <= opts.width and not one_line:find("\n", 1, true) then return one_line end
  return "{\n" .. indent .. "  " .. table.concat(parts, ",\n" .. indent .. "  ") .. "\n" .. indent .. "}"
end

function format(v, opts, depth, seen, indent)
  if type(v) == "table" and not has_tostring(v) then return format_table(v, opts, depth, seen, indent) end
  if type(v) == "table" or type(v) == "userdata" or type(v) == "cdata" then
    local s = tostring(v)
    return (s:gsub("\n", "\n" .. indent))
  end
  return scalar(v)
end

-- pretty.format(value, {depth = 3, items = 20, width = 100})
function M.format(v, opts)
  opts = opts or {}
  local o = { depth = opts.depth or 3, items = opts.items or 20, width = opts.width or 100 }
  return format(v, o, 0, {}, "")
end

return M
