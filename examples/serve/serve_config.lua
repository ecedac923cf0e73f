-- examples/serve/serve_config.lua: which models a server runs and their batching, queue and deadline settings:
-- the defaults below, each field overridable per model by MODELS_DIR/serve.json (docs/SERVING.md).
local cjson = require("cjson.safe")

local M = {}

-- kind: how a request becomes model inputs (serve_inputs.lua). max_batch: requests per model call (1 = no batching);
-- max_tokens: the most tokens of texts packed into one call (text models; a longer text still runs, alone);
-- max_wait_ms: how long the first request of an idle model waits for others; queue_limit: requests waiting per
-- worker before 503; timeout_ms: the longest a request may wait for its answer (queue + compute) before 503;
-- warm: compile every batch shape (batch size, or packed token count) when a worker starts, not at its first request.
M.DEFAULTS = {
  lenet = { kind = "image", max_batch = 32, max_wait_ms = 1, queue_limit = 256, timeout_ms = 1000 },
  bert = { kind = "text", vocab = "bert.vocab.json", max_batch = 32, max_tokens = 2048, max_wait_ms = 2,
           queue_limit = 256, timeout_ms = 2000 },
}
local FIELDS = { kind = "string", vocab = "string", max_batch = "number", max_tokens = "number",
                 max_wait_ms = "number", queue_limit = "number", timeout_ms = "number", warm = "boolean" }
local KINDS = { image = true, text = true }

-- the settings for the models in dir: DEFAULTS with dir/serve.json's {"models": {name: {field: value}}} applied
-- (a model named there and not in DEFAULTS is added). Unknown fields or bad values are an error naming them.
function M.read(dir)
  local models = {}
  for name, d in pairs(M.DEFAULTS) do
    models[name] = {}
    for k, v in pairs(d) do models[name][k] = v end
  end
  local f = io.open(dir .. "/serve.json", "rb")
  if not f then return models end
  local text = f:read("*a"); f:close()
  local cfg, err = cjson.decode(text)
  local where = dir .. "/serve.json"
  if type(cfg) ~= "table" or type(cfg.models) ~= "table" then
    error(where .. ": expected {\"models\": {name: settings}}" .. (err and (": " .. err) or ""), 0)
  end
  for name, s in pairs(cfg.models) do
    if type(s) ~= "table" then error(where .. ": models." .. name .. " must be an object", 0) end
    local m = models[name] or { max_batch = 1, max_tokens = 2048, max_wait_ms = 0, queue_limit = 256,
                                timeout_ms = 1000 }
    for k, v in pairs(s) do
      if not FIELDS[k] then error(string.format("%s: models.%s: unknown setting '%s'", where, name, k), 0) end
      if type(v) ~= FIELDS[k] then error(string.format("%s: models.%s.%s must be a %s", where, name, k, FIELDS[k]), 0) end
      if FIELDS[k] == "number" and not (v >= (k == "max_wait_ms" and 0 or 1) and v < 1e9) then
        error(string.format("%s: models.%s.%s = %s is out of range", where, name, k, tostring(v)), 0)
      end
      m[k] = v
    end
    if not KINDS[m.kind] then error(string.format("%s: models.%s.kind must be \"image\" or \"text\"", where, name), 0) end
    m.max_batch = math.floor(m.max_batch)
    m.max_tokens = m.max_tokens and math.floor(m.max_tokens)
    models[name] = m
  end
  return models
end

return M
