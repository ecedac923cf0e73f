-- tests/serve_conf_spec.lua: ds.serve's configuration without nginx: ds.serve.nginx.conf (options, their errors, the
-- routes it writes) and ds.serve.config.read (graph files found, serve.json settings and their errors).
local nginx = require("ds.serve.nginx")
local config = require("ds.serve.config")
local H = require("helpers")

describe("ds.serve.nginx.conf", function()
  it("writes the routes, the pools and the package path for the options given", function()
    local c = nginx.conf { models = "/srv/models", port = 8089, workers = 3, threads = 4, lua_dir = "/opt/lua",
                           lua_path = "/srv/plug/?.lua", user = "svc svc", body_limit_kb = 2048 }
    assert.truthy(c:find("worker_processes 3;", 1, true))
    assert.truthy(c:find("user svc svc;", 1, true))
    assert.truthy(c:find("thread_pool ds threads=4;", 1, true))
    assert.truthy(c:find("lua_worker_thread_vm_pool_size 4;", 1, true))
    assert.truthy(c:find('lua_package_path "/opt/lua/?.lua;/opt/lua/?/init.lua;/srv/plug/?.lua;;";', 1, true))
    assert.truthy(c:find('require("ds.serve").init("/srv/models", 4)', 1, true))
    assert.truthy(c:find("listen 127.0.0.1:8089 reuseport;", 1, true))
    assert.truthy(c:find("client_max_body_size 2048k;", 1, true))
    assert.truthy(c:find('body larger than 2 MiB', 1, true))
    for _, route in ipairs { "location = /health", "location = /metrics", "location = /predict ",
                             "location ~ ^/predict/", "location ~ ^/generate/" } do
      assert.truthy(c:find(route, 1, true), route)
    end
    assert.truthy(c:match("location ~ %^/generate/[^\n]*lua_check_client_abort on"))
    -- defaults: no user line, ds's own directory on the package path
    local d = nginx.conf { models = "/m", port = 1 }
    assert.is_nil(d:find("\nuser ", 1, true))
    assert.truthy(d:match('lua_package_path "(/[^"]*)/%?%.lua;'):find("/lua$"))
  end)

  it("refuses unknown options, missing ones and bad values, naming them", function()
    H.raises(function() nginx.conf { models = "/m", port = 1, prot = 2 } end, "unknown option 'prot'")
    H.raises(function() nginx.conf { port = 1 } end, "'models' is required")
    H.raises(function() nginx.conf { models = "m", port = 1 } end, "models must be an absolute path")
    H.raises(function() nginx.conf { models = "/m", port = 70000 } end, "port must be at most 65535")
    H.raises(function() nginx.conf { models = "/m", port = 1, workers = 0 } end, "workers must be a positive integer")
    H.raises(function() nginx.conf { models = "/m", port = "80" } end, "port must be a number")
  end)
end)

describe("ds.serve.config.read", function()
  local dir
  before_each(function()
    local path = os.tmpname(); os.remove(path); os.execute("mkdir -p " .. path)
    local function write(name, text) local f = io.open(path .. "/" .. name, "wb"); f:write(text); f:close() end
    write("a.json", '{"format": "ds-graph", "format_version": 1}')
    write("b.json", '{"format": "ds-graph", "format_version": 1}')
    write("words.vocab.json", '{"x": 1}')
    dir = { path = path, write = write }
  end)
  after_each(function() os.execute("rm -rf " .. dir.path) end)

  it("serves every graph file with the defaults, and serve.json's settings and default model", function()
    local s, names, default = config.read(dir.path)
    assert.same({ "a", "b" }, names)
    assert.is_nil(default)
    assert.equal("tensor", s.a.adapter)
    assert.equal(32, s.a.max_batch)
    assert.equal(2, s.a.sessions)   -- a KV-cache model's sessions at once: one per core of a 2-core host
    dir.write("serve.json", '{"default": "b", "models": {"b": {"max_batch": 4, "labels": ["no", "yes"]},'
      .. ' "c": {"adapter": "text", "vocab": "words.vocab.json"}}}')
    s, names, default = config.read(dir.path)
    assert.same({ "a", "b", "c" }, names)
    assert.equal("b", default)
    assert.equal(4, s.b.max_batch)
    assert.same({ "no", "yes" }, s.b.labels)
    assert.equal("ds.serve.text", s.c.adapter_module)
  end)

  it("refuses unknown settings and bad values, naming the model and the setting", function()
    local cases = {
      { '{"models": {"a": {"max_batc": 4}}}', "models.a: unknown setting 'max_batc'" },
      { '{"models": {"a": {"max_batch": "4"}}}', "models.a.max_batch must be a number" },
      { '{"models": {"a": {"max_batch": 0}}}', "models.a.max_batch = 0 is out of range" },
      { '{"models": {"a": {"adapter": "csv"}}}', "models.a.adapter must be \"tensor\", \"image\", \"text\" or a Lua module name" },
      { '{"models": {"a": {"adapter": "text"}}}', "models.a: the text adapter needs a \"vocab\" file" },
      { '{"models": {"a": {"generate": true, "adapter": "image"}}}', "models.a: a generate model takes token ids" },
      { '{"models": {"a": {"generate": true, "sessions": 2}}}', "models.a: sessions is for kv_cache models" },
      { '{"models": {"a": {"generate": true, "kv_cache": true, "sessions": 0}}}',
        "models.a.sessions = 0 is out of range" },
      { '{"default": "z"}', "default model 'z' is not served" },
      { '{"modles": {}}', "unknown field 'modles'" },
      { '[1', "expected {\"default\": name" },
    }
    for _, c in ipairs(cases) do
      dir.write("serve.json", c[1])
      H.raises(function() config.read(dir.path) end, c[2])
    end
  end)
end)
