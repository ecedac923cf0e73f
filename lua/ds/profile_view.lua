-- profile_view.lua: a compiled graph's profile (the rows of cg:profile) as a picture: a Chrome trace
-- (JSON for chrome://tracing or Perfetto: one run's steps laid end to end) or a flame-style SVG (the run,
-- then each op kind's share, then each step).
--   local rows, total = cg:profile(50, x); ds.save_profile(rows, total, "out/profile.svg")  -- or .json
local plot = require("ds.plot")
local errors = require("ds.errors")

local M = {}

local function json_string(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c)
    return c == '"' and '\\"' or c == "\\" and "\\\\" or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function check_rows(rows, opname)
  if type(rows) ~= "table" or (rows[1] ~= nil and type(rows[1].ms) ~= "number") then
    errors.raise(opname .. ": expects the rows of cg:profile (rows, total = cg:profile(n, inputs...))")
  end
end

-- the rows in plan order (cg:profile sorts them by time)
local function in_plan_order(rows)
  local ordered = {}
  for i, r in ipairs(rows) do ordered[i] = r end
  table.sort(ordered, function(a, b) return (a.step or 0) < (b.step or 0) end)
  return ordered
end

local function shape_str(shape)
  if type(shape) ~= "table" then return "" end
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = tostring(d) end
  return "(" .. table.concat(parts, ",") .. ")"
end

-- Chrome trace event format: complete events ("ph": "X") in microseconds
function M.chrome_trace(rows)
  check_rows(rows, "save_profile")
  local events, t = {}, 0
  for _, r in ipairs(in_plan_order(rows)) do
    local us = r.ms * 1e3
    events[#events + 1] = string.format(
      '{"name":%s,"cat":%s,"ph":"X","ts":%.3f,"dur":%.3f,"pid":1,"tid":1,' ..
      '"args":{"kernel":%s,"shape":%s,"source":%s,"step":%d}}',
      json_string(r.op or r.kernel), json_string(r.op or "step"), t, us, json_string(r.kernel or ""),
      json_string(shape_str(r.shape)), json_string(r.line or ""), r.step or 0)
    t = t + us
  end
  return '{"traceEvents":[\n' .. table.concat(events, ",\n") .. '\n],"displayTimeUnit":"ms"}\n'
end

-- flame-style SVG: three rows of boxes whose widths are time: the run, each op kind, each step
function M.flame_svg(rows, total)
  check_rows(rows, "save_profile")
  total = total or 0
  if total <= 0 then for _, r in ipairs(rows) do total = total + r.ms end end
  local W, L, H, top = 1000, 10, 26, 40
  local scale = total > 0 and (W - 2 * L) / total or 0
  local out = {
    '<?xml version="1.0" encoding="UTF-8"?>',
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" ' ..
      'font-size="11">',
      W, top + 3 * (H + 4) + 10),
    string.format('<rect width="%d" height="%d" fill="white"/>', W, top + 3 * (H + 4) + 10),
    string.format('<text x="%d" y="22" font-size="14" font-weight="bold">' ..
      'compiled plan: %.4f ms per run, %d steps</text>', L, total, #rows),
  }
  local function box(x, y, w, label, title, k)
    local color = plot.PALETTE[(k - 1) % #plot.PALETTE + 1]
    out[#out + 1] = string.format('<g><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" ' ..
      'fill-opacity="0.75" stroke="white"/>',
      plot.escape(title), x, y, math.max(w, 0.5), H, color)
    if w > #label * 6.5 then
      out[#out + 1] = string.format('<text x="%.2f" y="%d">%s</text>', x + 3, y + 17, plot.escape(label))
    end
    out[#out + 1] = "</g>"
  end
  box(L, top, total * scale, "plan", string.format("plan: %.4f ms", total), 1)
  local ordered = in_plan_order(rows)
  local kinds, order = {}, {}
  for _, r in ipairs(ordered) do
    local k = r.op or r.kernel or "?"
    if not kinds[k] then kinds[k] = 0; order[#order + 1] = k end
    kinds[k] = kinds[k] + r.ms
  end
  table.sort(order, function(a, b) return kinds[a] > kinds[b] end)
  local x, index = L, {}
  for i, k in ipairs(order) do
    index[k] = i
    box(x, top + H + 4, kinds[k] * scale, k, string.format("%s: %.4f ms (%.1f%%)", k, kinds[k],
      100 * kinds[k] / math.max(total, 1e-12)), i + 1)
    x = x + kinds[k] * scale
  end
  x = L
  for _, r in ipairs(ordered) do
    local k = r.op or r.kernel or "?"
    box(x, top + 2 * (H + 4), r.ms * scale, k, string.format("step %d %s %s %s: %.4f ms", r.step or 0, r.kernel or "",
      shape_str(r.shape), r.line or "", r.ms), index[k] + 1)
    x = x + r.ms * scale
  end
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

-- ds.save_profile(rows, total, path): ".json" writes a Chrome trace, ".svg" the flame-style picture
function M.save(rows, total, path)
  if type(path) ~= "string" then errors.raise("save_profile: expects (rows, total, path)") end
  if path:match("%.json$") then plot.write_file(path, M.chrome_trace(rows), "save_profile")
  elseif path:match("%.svg$") then plot.write_file(path, M.flame_svg(rows, total), "save_profile")
  else
    errors.raise("save_profile: the path must end in .json (Chrome trace) or .svg (flame-style picture), got " .. path)
  end
  return path
end

return M
