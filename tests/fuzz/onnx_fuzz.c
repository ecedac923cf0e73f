/* onnx_fuzz.c: libFuzzer target for ds.onnx.load: an input is an ONNX model file, written to a private
   directory and read by ds.onnx.load in an embedded LuaJIT; a graph that loads is called once on small
   zero inputs (dynamic dims 2). A Lua error is an expected outcome only when it names the file
   (ds.onnx.load's contract: "ds.onnx.load: <path>: what is wrong") and shows no Lua internal ("attempt to
   ..."); any other error, a load whose Lua heap grows past a small multiple of the file's size (the bounded
   reader's promise, lua/ds/onnx/proto.lua LIMITS), a crash, a sanitizer report or a hang (libFuzzer's
   -timeout) is a finding. The library under test is the instrumented libds
   this program links (DS_LIB names it, so the FFI binds the same copy); DS_ONNX_LIB names an instrumented
   libds_onnx.so (protobuf-c and the depth pre-check). Built and run by `make fuzz` (ASan + UBSan). */
#include <stdint.h>
#include <string.h>
#include "lua_harness.h"

/* fuzz_one(dir, bytes): write, load, call; returns nil, or what is wrong (an error that does not name the file or
   shows a Lua internal, a heap past the bound) */
static const char *HARNESS =
  "local ds = require('ds')\n"
  "local function write(path, s) local f = assert(io.open(path, 'wb')); f:write(s); f:close() end\n"
  "local function call(g)\n"
  "  local args = {}\n"
  "  for i, v in ipairs(g.specs) do\n"
  "    local shape, n = {}, 1\n"
  "    for d, s in ipairs(v.shape) do shape[d] = type(s) == 'number' and s or 2; n = n * shape[d] end\n"
  "    if n > 65536 then return end\n"
  "    args[i] = ds.zeros(shape, { dtype = v.dtype })\n"
  "  end\n"
  "  g(unpack(args, 1, #g.inputs))\n"
  "end\n"
  "function fuzz_one(dir, bytes)\n"
  "  local path = dir .. '/m.onnx'\n"
  "  write(path, bytes)\n"
  "  collectgarbage()\n"
  "  local before = collectgarbage('count')\n"
  "  local ok, g = pcall(ds.onnx.load, path)\n"
  "  local grew, bad = (collectgarbage('count') - before) * 1024\n"
  "  if not ok and (not tostring(g):find(path, 1, true) or tostring(g):find('attempt to', 1, true)) then bad = tostring(g) end\n"
  "  if grew > 64 * #bytes + 2 ^ 27 then bad = string.format('ds.onnx.load grew the Lua heap by %d bytes for a file of %d', grew, #bytes) end\n"
  "  if ok then pcall(call, g) end\n"
  "  collectgarbage()\n"
  "  return bad\n"
  "end\n";

HARNESS_TARGET("onnx_fuzz", HARNESS)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  harness_begin(L, dir);
  lua_pushlstring(L, (const char *)data, size);
  harness_call(L, "onnx_fuzz", 2, 1);
  if (!lua_isnil(L, -1)) { fprintf(stderr, "onnx_fuzz: %s\n", lua_tostring(L, -1)); abort(); }
  lua_pop(L, 1);
  return 0;
}
