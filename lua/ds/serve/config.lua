-- serve/config.lua: which models a server runs and their settings: every ds graph file NAME.json in the model
-- directory (docs/FORMAT.md) with the defaults below, and MODELS_DIR/serve.json ({"default": name, "models":
-- {name: {setting: value}}}) overriding any setting per model or adding models (docs/SERVING.md).
local cjson = require("cjson.safe")
local util = require("ds.serve.util")

local M = {}

-- adapter: how a request becomes model inputs and an output a reply ("tensor", "image", "text", or a Lua module
-- name with a dot, serve/tensor.lua describes the interface). max_batch: requests per model call (1 = no
-- batching); max_tokens: tokens per call for adapters that count them; max_wait_ms: how long the first request
-- of an idle model waits for others; queue_limit: requests waiting per worker before 503; timeout_ms: the longest
-- a request may wait for its answer before 503; warm: compile every batch shape at start (adapters with shapes);
-- vocab: a JSON file next to the model (part of its version); labels: class names; outputs: output names;
-- positions: the text adapter's token limit. generate: served at POST /generate/NAME (serve/generate.lua) as a
-- step model; max_length: its prompt + generated tokens; eos: its end token id; kv_cache: the step model keeps KV
-- caches (ids (slots, 1), pos (slots)) and runs in ds.generator sessions (serve/generate.lua); sessions: how many
-- of them a version runs at once (each in a pool thread with its own cache rows; 2: one per core of a 2-core host).
M.DEFAULTS = { adapter = "tensor", max_batch = 32, max_tokens = 2048, max_wait_ms = 1, queue_limit = 256,
               timeout_ms = 1000, warm = false, generate = false, max_length = 128, sessions = 2 }
local FIELDS = { adapter = "string", vocab = "string", max_batch = "number", max_tokens = "number",
                 max_wait_ms = "number", queue_limit = "number", timeout_ms = "number", warm = "boolean",
                 labels = "table", outputs = "table", positions = "number", generate = "boolean",
                 max_length = "number", eos = "number", kv_cache = "boolean",
                 sessions = "number" }
M.ADAPTERS = { tensor = "ds.serve.tensor", image = "ds.serve.image", text = "ds.serve.text" }

-- the names of the ds graph files in dir (NAME.json with "format": "ds-graph")
local function graph_files(dir)
  local out = {}
  local p = io.popen("ls -1 '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
  for file in p:lines() do
    local name = file:match("^(.+)%.json$")
    if name and name ~= "serve" then
      local doc = cjson.decode(util.read(dir .. "/" .. file) or "")
      if type(doc) == "table" and doc.format == "ds-graph" then out[#out + 1] = name end
    end
  end
  p:close()
  return out
end

local function fail(fmt, ...) error(string.format(fmt, ...), 0) end

-- one model's settings: DEFAULTS with s applied; where: for errors
local function settings(s, where)
  local m = {}
  for k, v in pairs(M.DEFAULTS) do m[k] = v end
  for k, v in pairs(s) do
    if not FIELDS[k] then fail("%s: unknown setting '%s'", where, tostring(k)) end
    if type(v) ~= FIELDS[k] then fail("%s.%s must be a %s", where, k, FIELDS[k] == "table" and "list" or FIELDS[k]) end
    if FIELDS[k] == "number" and not (v >= ((k == "max_wait_ms" or k == "eos") and 0 or 1) and v < 1e9) then
      fail("%s.%s = %s is out of range", where, k, tostring(v))
    end
    m[k] = v
  end
  local adapter = M.ADAPTERS[m.adapter] or m.adapter
  if not adapter:find(".", 1, true) then
    fail("%s.adapter must be \"tensor\", \"image\", \"text\" or a Lua module name (with a dot), got \"%s\"", where,
      m.adapter)
  end
  m.adapter_module = adapter
  if m.adapter == "text" and not m.vocab then fail("%s: the text adapter needs a \"vocab\" file", where) end
  if m.generate and m.adapter ~= "tensor" then fail("%s: a generate model takes token ids (no adapter)", where) end
  if m.kv_cache and not m.generate then fail("%s: kv_cache is for generate models", where) end
  if s.sessions and not m.kv_cache then fail("%s: sessions is for kv_cache models", where) end
  m.max_batch, m.max_tokens, m.sessions = math.floor(m.max_batch), math.floor(m.max_tokens), math.floor(m.sessions)
  return m
end

-- dir -> settings (name -> settings), the sorted names, the default model of POST /predict (or nil).
-- Unknown fields or bad values are an error naming them.
function M.read(dir)
  local raw = {}
  for _, name in ipairs(graph_files(dir)) do raw[name] = {} end
  local where = dir .. "/serve.json"
  local text, default = util.read(where), nil
  if text then
    local cfg, err = cjson.decode(text)
    if type(cfg) ~= "table" or (cfg.models ~= nil and type(cfg.models) ~= "table") then
      fail("%s: expected {\"default\": name, \"models\": {name: settings}}%s", where, err and (": " .. err) or "")
    end
    for k in pairs(cfg) do
      if k ~= "models" and k ~= "default" then fail("%s: unknown field '%s' (default, models)", where, tostring(k)) end
    end
    for name, s in pairs(cfg.models or {}) do
      if type(s) ~= "table" then fail("%s: models.%s must be an object", where, name) end
      raw[name] = s
    end
    default = cfg.default
    if default ~= nil and not raw[default] then
      fail("%s: default model '%s' is not served", where, tostring(default))
    end
  end
  local out, names = {}, {}
  for name, s in pairs(raw) do
    if not name:match("^[%w_.-]+$") then fail("%s: model name '%s' must be letters, digits, _ . -", where, name) end
    out[name] = settings(s, where .. ": models." .. name)
    names[#names + 1] = name
  end
  table.sort(names)
  if not default and #names == 1 then default = names[1] end
  return out, names, default
end

return M
