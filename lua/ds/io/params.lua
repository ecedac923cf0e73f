-- io/params.lua: a saved graph's params file, held in memory: read whole into a private copy (so replacing
-- or truncating the file later cannot touch a loaded model), its size and CRC-32 checked against what the
-- graph file says, its header parsed by ds/safetensors.lua; tensors are made only for the entries the graph
-- names, as views of the copy (copied when misaligned for their dtype).
local files = require("ds.files")
local safetensors = require("ds.safetensors")

local M = {}

-- want: {bytes, crc32 (hex)} or nil (no check: the caller computes them). Returns
-- { entries = name -> entry, tensor = function(entry) -> tensor, bytes (the copy), size, crc32 }.
function M.open(path, want, fail)
  local bytes, size, crc = files.read(path, nil, function(msg) fail("params file: " .. msg) end)
  if want and size ~= want.bytes then
    fail(string.format("params file %s has %d bytes, the graph file says %s (truncated or replaced?)", path, size,
      tostring(want.bytes)))
  end
  if want and crc ~= want.crc32 then
    fail("params file " .. path .. " does not match its checksum (corrupted or replaced)")
  end
  local where = function(msg) fail("params file " .. path .. ": " .. msg) end
  local entries = safetensors.parse(bytes, size, where)
  return { entries = entries, bytes = bytes, size = size, crc32 = crc,
           tensor = function(e) return safetensors.tensor(e, bytes, bytes, where) end }
end

return M
