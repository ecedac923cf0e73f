-- graphviz.lua: render Graphviz dot text to an SVG file with Graphviz's `dot` (Debian package graphviz).
local errors = require("ds.errors")

local M = {}

-- a string as a double-quoted dot ID
function M.quote(s) return '"' .. tostring(s):gsub("\\", "\\\\"):gsub('"', '\\"'):gsub("\n", "\\n") .. '"' end

-- render(dot_text, "out.svg", "graph:to_svg"): writes the SVG; raises naming the op when dot fails
function M.render(dot, path, opname)
  if type(path) ~= "string" or path == "" then errors.raise(opname .. ": expects the output path (a string)") end
  if os.execute("command -v dot >/dev/null 2>&1") ~= 0 then
    errors.raise(opname .. ": Graphviz's dot is not installed (apt-get install graphviz)")
  end
  local src = os.tmpname()
  local f = assert(io.open(src, "wb"))
  f:write(dot)
  f:close()
  local log = src .. ".log"
  local cmd = string.format("dot -Tsvg -o '%s' '%s' 2>'%s'", path:gsub("'", "'\\''"), src, log)
  local ok = os.execute(cmd) == 0
  local lf = io.open(log, "rb")
  local msg = lf and lf:read("*a") or ""
  if lf then lf:close() end
  os.remove(src); os.remove(log)
  if not ok then errors.raise(string.format("%s: dot could not write %s: %s", opname, path, msg)) end
  return path
end

return M
