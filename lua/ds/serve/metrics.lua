-- serve/metrics.lua: per-model counters and histograms in the shared dict ds_metrics (all workers
-- add to the same numbers), rendered as Prometheus text by GET /metrics.
local M = {}

local SECONDS = { 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5 }
local SIZES = { 1, 2, 4, 8, 16, 32, 64 }
-- histogram name -> {help, bucket bounds}; counters name -> help
local HISTOGRAMS = {
  { "ds_batch_size", "requests per model call (answered by one run of the compiled plan; sequences per generation "
    .. "step)", SIZES },
  { "ds_queue_wait_seconds", "time from a request's arrival to the start of the model call that answers it", SECONDS },
  { "ds_compute_seconds", "time of one model call in the worker thread", SECONDS },
}
local COUNTERS = {
  { "ds_requests_total", "prediction requests received" },
  { "ds_errors_total", "prediction requests not answered 200, by reason" },
  { "ds_reloads_total", "new model versions loaded by a worker (ok) or refused, the old one serving (failed)" },
  { "ds_generated_tokens_total", "tokens streamed by generation requests" },
  { "ds_generation_sessions_total", "KV-cache generation sessions started (each in a pool thread, its own cache rows)" },
  { "ds_generations_total", "generation requests ended, by reason (length, eos, max_length, deadline, cancelled, "
    .. "error)" },
}
local BOUNDS = {}
for _, h in ipairs(HISTOGRAMS) do BOUNDS[h[1]] = h[3] end

local dict = ngx and ngx.shared.ds_metrics

function M.count(name, model, reason, n)
  local key = reason and string.format('%s{model="%s",reason="%s"}', name, model, reason)
    or string.format('%s{model="%s"}', name, model)
  dict:incr(key, n or 1, 0)
end

-- one observation: its bucket (the first bound >= v, or +Inf), the sum and the count
function M.observe(name, model, v)
  local bounds = BOUNDS[name]
  local le = "+Inf"
  for _, b in ipairs(bounds) do if v <= b then le = tostring(b); break end end
  dict:incr(string.format('%s_bucket{model="%s",le="%s"}', name, model, le), 1, 0)
  dict:incr(string.format('%s_sum{model="%s"}', name, model), v, 0)
  dict:incr(string.format('%s_count{model="%s"}', name, model), 1, 0)
end

-- Prometheus text exposition format 0.0.4 for the given model names (buckets cumulative, as the format wants)
function M.render(models)
  local out = {}
  for _, c in ipairs(COUNTERS) do
    out[#out + 1] = string.format("# HELP %s %s\n# TYPE %s counter", c[1], c[2], c[1])
    local keys = dict:get_keys(0)
    table.sort(keys)
    for _, k in ipairs(keys) do
      if k:sub(1, #c[1] + 1) == c[1] .. "{" then out[#out + 1] = k .. " " .. dict:get(k) end
    end
  end
  for _, h in ipairs(HISTOGRAMS) do
    local name = h[1]
    out[#out + 1] = string.format("# HELP %s %s\n# TYPE %s histogram", name, h[2], name)
    for _, model in ipairs(models) do
      local acc = 0
      local les = {}
      for _, b in ipairs(h[3]) do les[#les + 1] = tostring(b) end
      les[#les + 1] = "+Inf"
      for _, le in ipairs(les) do
        acc = acc + (dict:get(string.format('%s_bucket{model="%s",le="%s"}', name, model, le)) or 0)
        out[#out + 1] = string.format('%s_bucket{model="%s",le="%s"} %d', name, model, le, acc)
      end
      local sum = dict:get(string.format('%s_sum{model="%s"}', name, model)) or 0
      out[#out + 1] = string.format('%s_sum{model="%s"} %.9g', name, model, sum)
      out[#out + 1] = string.format('%s_count{model="%s"} %d', name, model, acc)
    end
  end
  return table.concat(out, "\n") .. "\n"
end

return M
