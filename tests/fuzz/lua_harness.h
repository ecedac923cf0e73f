/* lua_harness.h: the setup the fuzz targets that embed LuaJIT share: a private temporary directory and a
   Lua state with the source tree's lua/ (DS_ROOT) on package.path that has run the target's harness chunk,
   opened by libFuzzer's initializer, and the call of the chunk's fuzz_one for an input.
   DS_LIB must name the instrumented libds.so the target links, so the FFI binds the same copy. */
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

/* target: the program's name for messages and the directory; dir: 64 bytes, receives the directory */
static lua_State *harness_open(const char *target, const char *chunk, char *dir) {
  const char *root = getenv("DS_ROOT"), *lib = getenv("DS_LIB");
  if (!root || !lib) { fprintf(stderr, "%s: set DS_ROOT (the source tree) and DS_LIB (the fuzz libds.so)\n", target); exit(2); }
  snprintf(dir, 64, "/tmp/ds-%s.XXXXXX", target);
  if (!mkdtemp(dir)) { perror("mkdtemp"); exit(2); }
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  char path[4096];
  snprintf(path, sizeof path, "package.path = '%s/lua/?.lua;%s/lua/?/init.lua;' .. package.path", root, root);
  if (luaL_dostring(L, path) || luaL_dostring(L, chunk)) { fprintf(stderr, "%s: %s\n", target, lua_tostring(L, -1)); exit(2); }
  return L;
}

/* HARNESS_TARGET(target, chunk), after the chunk: the target's Lua state L and private directory dir, which
   libFuzzer's initializer opens with harness_open */
#define HARNESS_TARGET(target, chunk) \
  static lua_State *L; \
  static char dir[64]; \
  int LLVMFuzzerInitialize(int *argc, char ***argv) { \
    L = harness_open(target, chunk, dir); \
    return 0; \
  }

/* an input's call of the chunk's fuzz_one(dir, ...): harness_begin pushes fuzz_one and dir, the target pushes
   the input's arguments, harness_call calls it with nargs arguments (dir among them) and nresults results;
   an error the chunk lets through is a finding (abort) */
static void harness_begin(lua_State *L, const char *dir) {
  lua_getglobal(L, "fuzz_one");
  lua_pushstring(L, dir);
}
static void harness_call(lua_State *L, const char *target, int nargs, int nresults) {
  if (lua_pcall(L, nargs, nresults, 0) == 0) return;
  fprintf(stderr, "%s: harness error: %s\n", target, lua_tostring(L, -1));
  abort();
}
