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

-- ds.debug(true): error reports (the `ds` prompt, `ds script.lua`) keep ds's internal stack frames
local show_internal = false
function M.set_debug(on) show_internal = on and true or false end

-- an error as a user reads it: the message (which names the op and the user's line), then the user's own
-- stack frames when there is more than the one the message names; everything under ds.debug(true).
-- level: the stack level of the function that raised (as for debug.traceback)
function M.report(err, level)
  local msg = tostring(err)
  if show_internal then return debug.traceback(msg, level + 1) end
  local frames, lvl = {}, level + 1
  while true do
    local info = debug.getinfo(lvl, "Sln")
    if not info then break end
    if info.what ~= "C" and not in_ds(info.source) and info.short_src ~= "stdin"
      and info.short_src ~= "(command line)" then
      frames[#frames + 1] = string.format("\t%s:%d: in %s", info.short_src, info.currentline or 0,
        info.name and ("function '" .. info.name .. "'") or (info.what == "main" and "main chunk" or "a function"))
    end
    lvl = lvl + 1
  end
  if #frames <= 1 then return msg end
  return msg .. "\nstack traceback (your code; ds.debug(true) shows all frames):\n" .. table.concat(frames, "\n")
end

return M
