-- tests/serve_http.lua: what the serve specs use to run bin/ds-serve and talk to it: shell commands outside the
-- sanitizer preload, requests with curl (status, decoded JSON, X-Model-Version), ports, start and wait.
local cjson = require("cjson")

local M = {}
M.root = io.popen("pwd"):read("*l")

-- child processes run without the sanitizer preload of make test-asan (curl hangs under it)
local CLEAN = "env -u LD_PRELOAD -u DS_ALLOC -u DS_LIB -u ASAN_OPTIONS -u UBSAN_OPTIONS "
function M.clean(cmd) return CLEAN .. "sh -c '" .. (cmd:gsub("'", "'\\''")) .. "'" end
function M.sh(cmd) local p = io.popen(M.clean(cmd) .. " 2>&1"); local s = p:read("*a"); p:close(); return s end

function M.write(path, text) local f = assert(io.open(path, "wb")); f:write(text); f:close() end
function M.read(path) local f = assert(io.open(path, "rb")); local s = f:read("*a"); f:close(); return s end

-- a port below the kernel's ephemeral range (32768 and up), so no client socket holds it; another one per try
local seed = os.time() + tonumber(tostring({}):match("0x(%x+)"), 16)
function M.pick_port(try) return 20000 + math.floor((seed + try * 7919) % 12000) end

-- a request to 127.0.0.1:port (dir: a scratch directory; curl_args: more curl options): the status, the reply
-- decoded as JSON (or its text with raw) and its X-Model-Version header
function M.request(dir, port, method, path, body, curl_args, raw)
  M.write(dir .. "/body", body or "")
  local out = M.sh(string.format("curl -s --max-time 30 %s -o %s/resp -w '%%{http_code} %%header{x-model-version}' -X %s --data-binary @%s/body http://127.0.0.1:%d%s",
    curl_args or "", dir, method, dir, port, path))
  local r = M.read(dir .. "/resp")
  local code, version = out:match("^(%d+) ?(%S*)")
  if raw then return tonumber(code), r, version end
  local ok, decoded = pcall(cjson.decode, r)
  assert(ok, method .. " " .. path:sub(1, 40) .. ": the reply is not JSON: " .. r:sub(1, 200))
  return tonumber(code), decoded, version
end

-- true once the server on port answers /health
function M.wait_up(port)
  for _ = 1, 50 do
    if M.sh(string.format("curl -s --max-time 5 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%d/health", port)) == "200" then return true end
    os.execute("sleep 0.1")
  end
  return false
end

-- bin/ds-serve PREFIX PORT MODELS CMD (env: variables to set, "NAME=value ...")
function M.serve(prefix, port, models, cmd, env)
  return M.sh(string.format("%s %s/bin/ds-serve %s %d %s %s", env or "", M.root, prefix, port, models, cmd))
end

-- start a server with run(port) on the first free port of five tries from pick_port(first_try): the port, or nil
-- and what run said plus nginx's error log
function M.start_with(run, error_log, first_try)
  local said
  for try = first_try, first_try + 4 do
    local at = M.pick_port(try)
    said = run(at)
    if M.wait_up(at) then return at end
    local log = M.sh("cat " .. error_log)
    if not log:find("Address already in use", 1, true) then return nil, said .. log end
    os.remove(error_log)
  end
  return nil, said
end

-- bin/ds-serve PREFIX PORT MODELS start on a free port (as start_with)
function M.start(prefix, models, first_try, env)
  return M.start_with(function(at) return M.serve(prefix, at, models, "start", env) end, prefix .. "/logs/error.log",
    first_try)
end

-- the value of a series in /metrics text (nil if absent)
function M.metric(text, series)
  return tonumber(text:match("\n" .. series:gsub("[%(%)%.%%%+%-%*%?%[%]%^%$]", "%%%0") .. " ([%d%.e%+%-]+)"))
end

return M
