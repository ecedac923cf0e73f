-- rocks/ds-scm-1.rockspec: `luarocks --lua-version=5.1 make rocks/ds-scm-1.rockspec --tree=DIR` from the source tree.
rockspec_format = "3.0"
package = "ds"
version = "scm-1"
source = { url = "git+file:///dev/null" }   -- built from the checkout with `luarocks make`
description = {
  summary = "Deep learning for LuaJIT on a C engine: eager tensors, autograd, tracing, compile, save/load",
  license = "MIT",
}
-- LuaJIT (luajit2), OpenBLAS (OpenMP variant) and lua-cjson come from Debian: `make deps`.
-- `make install` copies lua/ds (every module: ds.serve's lua/ds/serve/ included), ds.h and libds, bin/ds and
-- bin/ds-serve (serving from nginx, docs/SERVING.md) into the rock's tree.
dependencies = { "lua == 5.1" }
build = {
  type = "make",
  build_variables = { MARCH = "x86-64-v3" },   -- not CFLAGS: the Makefile adds its own flags to it
  install_variables = { INST_LUADIR = "$(LUADIR)", INST_BINDIR = "$(BINDIR)" },
}
