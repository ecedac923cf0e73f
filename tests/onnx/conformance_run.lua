-- tests/onnx/conformance_run.lua: runs the ONNX node test cases under DIR whose names sort after AFTER (all if
-- absent): "start\t<name>" before each, "done\t<name>\t<pass|refused|wrong>\t<message>" after it, flushed as it
-- goes (the spec marks a case started and never done as a crash and resumes after it).
-- usage: luajit tests/onnx/conformance_run.lua DIR [AFTER [PATTERN]]  (PATTERN: a Lua pattern the names must match)
package.path = (debug.getinfo(1, "S").source:match("^@(.*)/onnx/[^/]*$") or "tests") .. "/?.lua;" .. package.path
local conformance = require("onnx.conformance")
local dir, after, pattern = arg[1], arg[2] or "", arg[3] or ""
local names = {}
for name in io.popen("ls " .. dir):lines() do
  if name > after and name:find(pattern) then names[#names + 1] = name end
end
table.sort(names)
for _, name in ipairs(names) do
  io.stdout:write("start\t", name, "\n")
  io.stdout:flush()
  local status, msg = conformance.run(dir .. "/" .. name)
  io.stdout:write("done\t", name, "\t", status, "\t", (tostring(msg):gsub("[\n\t]", " ")), "\n")
  io.stdout:flush()
  collectgarbage()
end
