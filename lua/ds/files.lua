-- files.lua: files for savers and loaders: whole-file reads into memory (regular files only, refused
-- before opening otherwise), crash-safe writes (temporary file, fsync, rename, fsync of the directory),
-- directory listing and locking, and removal of temporary files left by savers that died.
local ffi = require("ffi")
local dsffi = require("ds.ffi")
local errors = require("ds.errors")

local C = dsffi.C
local M = {}

-- "dir/name" -> "dir", "name" ("." for a bare name)
function M.split(path)
  local dir, name = path:match("^(.*)/([^/]*)$")
  if not dir then return ".", path end
  return dir == "" and "/" or dir, name
end

-- The whole file as (pointer to a private copy, size, CRC-32 as 8 hex digits); the copy is freed with the
-- pointer. FIFOs, devices and directories are refused before any read; fail(msg) raises (msg names the
-- file and the reason).
local size_box, crc_box = ffi.new("int64_t[1]"), ffi.new("uint32_t[1]")
function M.read(path, limit, fail)
  local p = dsffi.check(C.ds_file_read(path, limit or 2 ^ 40, size_box, crc_box), fail)
  return ffi.gc(ffi.cast("uint8_t *", p), C.ds_file_free), tonumber(size_box[0]), string.format("%08x", crc_box[0])
end

function M.read_string(path, limit, fail)
  local p, n = M.read(path, limit, fail)
  return ffi.string(p, n)
end

function M.sync(path, fail)
  dsffi.check(C.ds_file_sync(path), fail)
end

-- the names in dir (a list)
function M.list(dir, fail)
  local cap = 4096
  while true do
    local buf = ffi.new("char[?]", cap)
    local n = dsffi.check_index(tonumber(C.ds_dir_list(dir, buf, cap)), fail)
    if n <= cap then
      local names, s = {}, ffi.string(buf, n)
      for name in s:gmatch("([^%z]+)%z") do names[#names + 1] = name end
      return names
    end
    cap = n
  end
end

-- fn() with an exclusive lock on dir (other savers into the same directory wait); the lock is released
-- when fn returns or raises (and by the kernel if the process dies)
function M.with_lock(dir, fn, fail)
  local h = dsffi.check_index(C.ds_dir_lock(dir), fail)
  local ok, a, b = pcall(fn)
  C.ds_dir_unlock(h)
  if not ok then error(a, 0) end
  return a, b
end

-- Temporary files are ".<stem>.<pid>.<n>.tmp" next to their target: a saver that dies leaves its own,
-- which the next save of stem removes (temp_pattern) once that process no longer runs.
local counter = 0
function M.temp_name(dir, stem)
  counter = counter + 1
  return string.format("%s/.%s.%d.%d.tmp", dir, stem, C.ds_process_id(), counter)
end

local function escape(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

-- remove ".<stem>.<pid>.<n>.tmp" files in dir whose process is gone (or is this one: none is in flight)
function M.remove_stale_temps(dir, stem, fail)
  local pattern = "^%." .. escape(stem) .. "%.(%d+)%.%d+%.tmp$"
  local me = C.ds_process_id()
  for _, name in ipairs(M.list(dir, fail)) do
    local pid = tonumber(name:match(pattern))
    if pid and (pid == me or C.ds_process_alive(pid) == 0) then os.remove(dir .. "/" .. name) end
  end
end

-- Write chunks (strings, or {pointer, bytes}) to a new temporary file next to path and fsync it; returns
-- the temporary name (the caller renames it into place with M.commit). fail(msg) raises.
function M.write_temp(path, chunks, fail)
  local dir, stem = M.split(path)
  local tmp = M.temp_name(dir, stem)
  local f, err = io.open(tmp, "wb")
  if not f then fail("cannot write " .. path .. ": " .. tostring(err)) end
  local ok, werr = true, nil
  for _, c in ipairs(chunks) do
    if type(c) == "string" then ok, werr = f:write(c)
    elseif c[2] > 0 then ok, werr = f:write(ffi.string(c[1], c[2])) end
    if not ok then break end
  end
  local closed, cerr = f:close()
  if not ok or not closed or C.ds_file_sync(tmp) ~= 0 then
    local why = tostring(werr or cerr or dsffi.last_error())
    os.remove(tmp)
    fail("write of " .. path .. " failed: " .. why)
  end
  return tmp
end

-- rename tmp to path and make the directory entry durable: after this returns, a crash keeps path
function M.commit(tmp, path, fail)
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then os.remove(tmp); fail("cannot rename into " .. path .. ": " .. tostring(rerr)) end
  M.sync((M.split(path)), fail)
end

-- path holds exactly chunks, or (after a crash) its previous content
function M.write_atomic(path, chunks, fail)
  M.commit(M.write_temp(path, chunks, fail), path, fail)
end

function M.raiser(prefix)
  return function(msg) errors.raise(prefix .. msg) end
end

return M
