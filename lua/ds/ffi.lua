-- ffi.lua: loads libds, declares src/ds.h to the FFI, turns C status codes into Lua errors.
local ffi = require("ffi")
local errors = require("ds.errors")

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a"); f:close(); return s
end

-- The header ships next to this file (installed) or in ../../src (source tree).
local header = read(here .. "/ds.h") or read(here .. "/../../src/ds.h")
if not header then error("ds: cannot find ds.h next to " .. here .. " or in the source tree", 0) end
header = header:gsub("#[^\n]*", "")
ffi.cdef(header)
-- poll(2), for the REPL (stdin) and serve/session.lua (its sockets): a C function has one FFI declaration per
-- process, so it is declared here once (pcall: a program may have declared the same before loading ds)
pcall(ffi.cdef, "struct ds_pollfd { int fd; short events; short revents; };")
pcall(ffi.cdef, "int poll(struct ds_pollfd *fds, unsigned long nfds, int timeout);")

local function load_lib()
  local tried = {}
  local candidates = {}
  if os.getenv("DS_LIB") then candidates[#candidates + 1] = os.getenv("DS_LIB") end
  candidates[#candidates + 1] = here .. "/libds.so"
  candidates[#candidates + 1] = here .. "/../../build/libds.so"
  local found = package.searchpath("libds", package.cpath)
  if found then candidates[#candidates + 1] = found end
  for _, path in ipairs(candidates) do
    local ok, lib = pcall(ffi.load, path)
    if ok then return lib, path end
    tried[#tried + 1] = path
  end
  local ok, lib = pcall(ffi.load, "ds")
  if ok then return lib, "ds" end
  error("ds: cannot load libds.so (tried " .. table.concat(tried, ", ") .. "); run `make`", 0)
end

local C, libpath = load_lib()

local isa_refused = C.ds_isa_check()
if isa_refused ~= nil then error("ds: " .. ffi.string(isa_refused), 0) end

local M = { C = C, ffi = ffi, libpath = libpath }

function M.last_error()
  return ffi.string(C.ds_last_error())
end

-- The one way a failed C call becomes a Lua error. what: a string, raising "what: <libds's message>" (what
-- once: kernels already name their op), or a function what(message) that raises (a loader naming its file).
-- Hot paths test the status themselves and call fail only then (what is often built with string.format).
local function fail(what)
  local msg = M.last_error()
  if type(what) == "function" then what(msg) end
  errors.raise(msg:sub(1, #what + 2) == what .. ": " and msg or what .. ": " .. msg)
end

M.fail = fail

-- check(C.ds_x(...), what): a status other than DS_OK, or a NULL pointer, raises (fail(what)); returns the result
function M.check(result, what)
  if type(result) == "number" then
    if result ~= 0 then fail(what) end
  elseif result == nil then
    fail(what)
  end
  return result
end

-- check_index(C.ds_plan_add_buffer(...), what): for the calls that return an index or a count, or -1 on failure
function M.check_index(i, what)
  if i < 0 then fail(what) end
  return i
end

return M
