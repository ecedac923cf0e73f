-- ffi.lua: loads libds, declares src/ds.h to the FFI, turns C status codes into Lua errors.
local ffi = require("ffi")

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

return M
