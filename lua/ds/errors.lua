-- errors.lua: raise Lua errors at the first stack level outside the ds package (the caller's line).
local M = {}

-- every ds module is loaded from the directory this file is in
local prefix = debug.getinfo(1, "S").source:match("^(@.*/)[^/]*$") or "@"

local function in_ds(source)
  return source:sub(1, #prefix) == prefix
end

-- level of the user's frame, counted from the caller of raise
local function user_level()
  local level = 3
  while true do
    local info = debug.getinfo(level, "S")
    if not info then return 0 end
    if info.what ~= "C" and not in_ds(info.source) then return level - 1 end
    level = level + 1
  end
end

function M.raise(msg)
  error(msg, user_level())
end

-- where the user's code is: "file.lua:12" (for trace nodes and trace errors)
function M.user_site()
  local level = 2
  while true do
    local info = debug.getinfo(level, "Sl")
    if not info then return "?" end
    if info.what ~= "C" and not in_ds(info.source) then
      return (info.short_src or "?") .. ":" .. (info.currentline or 0)
    end
    level = level + 1
  end
end

return M
