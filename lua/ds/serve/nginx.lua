-- serve/nginx.lua: the nginx configuration that serves a model directory with ds.serve (nginx + its Lua module),
-- as text: require("ds.serve.nginx").conf{models = dir, port = 8089} (bin/ds-serve writes and runs it).
-- Runs no ds code and needs no nginx: a plain Lua function of its options.
local M = {}

-- option -> {type, default (nil: required), meaning}
local OPTIONS = {
  models = { "string", nil, "the model directory (absolute path)" },
  port = { "number", nil, "the TCP port" },
  host = { "string", "127.0.0.1", "the address to listen on" },
  workers = { "number", 2, "nginx worker processes (one event loop each)" },
  threads = { "number", 2, "worker threads (and their Lua VMs) per worker: at least the number of models" },
  user = { "string", false, "the `user` directive's arguments (\"name group\"), for a server started by root" },
  lua_dir = { "string", false, "the directory holding ds/ (default: where this file was found)" },
  lua_path = { "string", false, "more package.path entries (\"/srv/lua/?.lua;...\"), e.g. for plug-in adapters" },
  body_limit_kb = { "number", 1024, "the largest request body (chunked or not)" },
  modules = { "string", "/usr/lib/nginx/modules", "where ndk_http_module.so and ngx_http_lua_module.so are" },
}

-- the directory holding ds/serve/nginx.lua's ds/: /x/lua for /x/lua/ds/serve/nginx.lua
local function lua_dir_of_this_file()
  local src = debug.getinfo(1, "S").source:match("^@(.*)$") or ""
  local dir = src:match("^(.*)/ds/serve/[^/]*$")
  if not dir or dir == "" then dir = "." end
  if dir:sub(1, 1) ~= "/" then dir = (os.getenv("PWD") or ".") .. "/" .. dir end
  return (dir:gsub("/%./", "/"):gsub("/%.$", ""))
end

local function check(opts)
  if type(opts) ~= "table" then error("ds.serve.nginx.conf: give a table of options", 2) end
  local o = {}
  for k, v in pairs(opts) do
    local spec = OPTIONS[k]
    if not spec then
      local names = {}
      for name in pairs(OPTIONS) do names[#names + 1] = name end
      table.sort(names)
      error(string.format("ds.serve.nginx.conf: unknown option '%s' (%s)", tostring(k), table.concat(names, ", ")), 3)
    end
    if type(v) ~= spec[1] then error(string.format("ds.serve.nginx.conf: %s must be a %s", k, spec[1]), 3) end
    if spec[1] == "number" and not (v >= 1 and v < 2 ^ 31 and v == math.floor(v)) then
      error(string.format("ds.serve.nginx.conf: %s must be a positive integer, got %s", k, tostring(v)), 3)
    end
    o[k] = v
  end
  for k, spec in pairs(OPTIONS) do
    if o[k] == nil then
      if spec[2] == nil then error(string.format("ds.serve.nginx.conf: '%s' is required (%s)", k, spec[3]), 3) end
      o[k] = spec[2] or nil
    end
  end
  if o.models:sub(1, 1) ~= "/" then
    error("ds.serve.nginx.conf: models must be an absolute path, got " .. o.models, 3)
  end
  if o.port > 65535 then error("ds.serve.nginx.conf: port must be at most 65535", 3) end
  o.lua_dir = o.lua_dir or lua_dir_of_this_file()
  return o
end

-- nginx's own rejections as JSON: status -> error text (error_page to internal locations with a fixed body)
local REJECTIONS = {
  { 400, "bad request: malformed HTTP or headers too large", "400 494" }, { 404, "no such path (POST /predict[/name], "
    .. "POST /generate/name, GET /health, GET /metrics)" }, { 405, "method not allowed" },
  { 408, "request timed out" }, { 411, "a request body needs Content-Length" }, { 413, "body larger than %s" },
  { 414, "URI too long" }, { 500, "internal server error", "500 502 503 504" },
}

-- the configuration text for opts (OPTIONS above); an unknown option or a bad value is an error naming it
function M.conf(opts)
  local o = check(opts)
  local limit = o.body_limit_kb % 1024 == 0 and (o.body_limit_kb / 1024) .. " MiB" or o.body_limit_kb .. " KiB"
  local pages, internal = {}, {}
  for _, r in ipairs(REJECTIONS) do
    local text = r[2]:format(limit)
    pages[#pages + 1] = string.format("    error_page %s /__error/%d;", r[3] or r[1], r[1])
    internal[#internal + 1] = string.format(
      "    location = /__error/%d { internal; return %d '{\"error\":\"%s\"}\\n'; }", r[1], r[1], text)
  end
  local L = o.lua_dir
  local serve = 'require("ds.serve")'
  return table.concat({
    "# nginx.conf written by ds.serve.nginx.conf (docs/SERVING.md): ds models served from " .. o.models,
    "worker_processes " .. o.workers .. ";",
    o.user and ("user " .. o.user .. ";  # started by root: the workers run as the model directory's owner")
      or "# the workers run as the user who starts nginx",
    "# the models run here, off the event loop (ngx.run_worker_thread): one thread per model call in flight",
    "thread_pool ds threads=" .. o.threads .. ";",
    "error_log logs/error.log warn;",
    "pid logs/nginx.pid;",
    "load_module " .. o.modules .. "/ndk_http_module.so;",
    "load_module " .. o.modules .. "/ngx_http_lua_module.so;",
    "# no OpenMP team inside a model call: a worker per core, no oversubscription (TOOLCHAIN.md)",
    "env OMP_NUM_THREADS=1;", "env OPENBLAS_NUM_THREADS=1;", "env OPENBLAS_CORETYPE;", "env DS_LIB;",
    "events { worker_connections 1024; }",
    "http {",
    "  access_log off;",
    string.format("  client_body_buffer_size %dk;", o.body_limit_kb),
    string.format("  client_max_body_size %dk;", o.body_limit_kb),
    "  # temp directories in the prefix, not in /var/lib/nginx (which only root can write)",
    "  client_body_temp_path temp/body; proxy_temp_path temp/proxy; fastcgi_temp_path temp/fastcgi;",
    "  uwsgi_temp_path temp/uwsgi; scgi_temp_path temp/scgi;",
    string.format('  lua_package_path "%s/?.lua;%s/?/init.lua;%s;";', L, L,
      o.lua_path and (o.lua_path:gsub(";*$", ";")) or ""),
    "  # one Lua VM per pool thread, each holding the models (docs/SERVING.md \"Thread model\")",
    "  lua_worker_thread_vm_pool_size " .. o.threads .. ";",
    "  lua_shared_dict ds_metrics 1m;",
    "  # the socket of each KV-cache model's running generation session, which every worker joins (serve/generate.lua)",
    "  lua_shared_dict ds_generate 64k;",
    "  # the master reads settings only (no ds code, no OpenMP before fork); the workers' thread VMs load the models",
    string.format('  init_by_lua_block { %s.init("%s", %d) }', serve, o.models, o.threads),
    string.format("  init_worker_by_lua_block { %s.init_worker() }", serve),
    "  server {",
    "    # reuseport: a listening socket per worker, the kernel spreads connections over them",
    string.format("    listen %s:%d reuseport;", o.host, o.port),
    "    default_type application/json;",
    table.concat(pages, "\n"),
    table.concat(internal, "\n"),
    string.format("    location = /health { content_by_lua_block { %s.health() } }", serve),
    string.format("    location = /metrics { content_by_lua_block { %s.metrics() } }", serve),
    string.format("    location = /predict { content_by_lua_block { %s.predict() } }", serve),
    string.format("    location ~ ^/predict/([\\w.-]+)$ { content_by_lua_block { %s.predict(ngx.var[1]) } }", serve),
    "    # streamed generation: unbuffered, and a client that goes away cancels its sequence",
    string.format("    location ~ ^/generate/([\\w.-]+)$ { lua_check_client_abort on; "
      .. "content_by_lua_block { %s.generate(ngx.var[1]) } }", serve),
    "    # the same JSON parse and a reply without a model, to show the model's share of the cost",
    string.format("    location = /echo { content_by_lua_block { %s.echo() } }", serve),
    "    location / { return 404; }",
    "  }",
    "}", "" }, "\n")
end

return M
