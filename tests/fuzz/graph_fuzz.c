/* graph_fuzz.c: libFuzzer target for ds.load: an input is a graph file and a params file (a flag byte,
   u32 little-endian graph length, the graph JSON, the params bytes), written to a private directory and
   loaded by ds.load in an embedded LuaJIT; what loads is called once on small zero inputs. The flag's low
   bit has the harness first point the graph at the params file with its true size and checksum, so
   mutations reach the header, entry and graph checks past the checksum. The library under test is the
   instrumented libds this program links (DS_LIB names it, so the FFI binds the same copy).
   Built and run by `make fuzz` (ASan + UBSan). */
#include <stdint.h>
#include <string.h>
#include "lua_harness.h"

/* fuzz_one(dir, flag, json, params): write, load, call; any Lua error is an expected outcome */
static const char *HARNESS =
  "local ds = require('ds')\n"
  "local cjson = require('cjson.safe')\n"
  "local function write(path, s) local f = assert(io.open(path, 'wb')); f:write(s); f:close() end\n"
  "local function call(m)\n"
  "  local args = {}\n"
  "  for i, s in ipairs(m.base.specs) do\n"
  "    local shape, n = {}, 1\n"
  "    for d, v in ipairs(s.shape) do shape[d] = type(v) == 'number' and v or 2; n = n * shape[d] end\n"
  "    if n > 65536 then return end\n"
  "    args[i] = ds.zeros(shape, { dtype = s.dtype })\n"
  "  end\n"
  "  m(unpack(args, 1, #m.base.specs))\n"
  "end\n"
  "function fuzz_one(dir, flag, json, params)\n"
  "  if flag % 2 == 1 then\n"
  "    local doc = cjson.decode(json)\n"
  "    if type(doc) == 'table' and type(doc.params) == 'table' then\n"
  "      doc.params.file = 'g.params.safetensors'; doc.params.bytes = #params\n"
  "      doc.params.crc32 = string.format('%08x', tonumber(require('ds.ffi').C.ds_crc32(params, #params)))\n"
  "      json = cjson.encode(doc) or json\n"
  "    end\n"
  "  end\n"
  "  write(dir .. '/g.json', json); write(dir .. '/g.params.safetensors', params)\n"
  "  local ok, m = pcall(ds.load, dir .. '/g', { max_loop_trips = 1000 })\n"
  "  if ok then pcall(call, m) end\n"
  "  collectgarbage()\n"
  "end\n";

HARNESS_TARGET("graph_fuzz", HARNESS)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  uint32_t json_len;
  memcpy(&json_len, data + 1, 4);
  if (json_len > size - 5) return 0;
  harness_begin(L, dir);
  lua_pushinteger(L, data[0]);
  lua_pushlstring(L, (const char *)data + 5, json_len);
  lua_pushlstring(L, (const char *)data + 5 + json_len, size - 5 - json_len);
  harness_call(L, "graph_fuzz", 4, 0);
  return 0;
}
