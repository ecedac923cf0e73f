-- plot.lua: SVG line charts with no dependency (training curves: loss, accuracy, learning rate), one
-- chart per panel, stacked; and the small SVG helpers the graph and profile pictures share.
--   ds.plot.lines("out/lenet.svg", {
--     { title = "loss", xlabel = "epoch",
--       series = { { name = "train", y = losses }, { name = "test", x = xs, y = ys } } },
--     { title = "accuracy", series = { { name = "test", y = accs } } } })
local errors = require("ds.errors")

local M = {}

M.PALETTE = { "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f" }

-- text escaped for SVG/XML content and attribute values
function M.escape(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
    ["'"] = "&apos;" }))
end

-- write a whole file, or raise naming the op and the path
function M.write_file(path, text, opname)
  local f, err = io.open(path, "wb")
  if not f then errors.raise(string.format("%s: cannot write %s (%s)", opname, tostring(path), tostring(err))) end
  f:write(text)
  f:close()
end

local function finite(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end

-- about `count` round tick values (1, 2, 5 x 10^k steps) and the axis range they span, covering [lo, hi]
local function ticks(lo, hi, count)
  if hi <= lo then -- one value: centre it
    local span = lo == 0 and 1 or math.abs(lo) * 0.1
    lo, hi = lo - span, hi + span
  end
  local raw = (hi - lo) / count
  local mag = 10 ^ math.floor(math.log10(raw))
  local step = mag
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if m * mag >= raw then step = m * mag; break end
  end
  local first, last, out = math.floor(lo / step), math.ceil(hi / step - 1e-9), {}
  for i = first, last do out[#out + 1] = i * step end
  return out, first * step, last * step
end

local function tick_label(v)
  if v == 0 then return "0" end
  if math.abs(v) >= 1e5 or math.abs(v) < 1e-3 then return string.format("%.1e", v) end
  return (string.format("%.4f", v):gsub("0+$", ""):gsub("%.$", ""))
end

local function check_series(s, p, k)
  local where = string.format("plot: panel %d series %d", p, k)
  if type(s) ~= "table" or type(s.y) ~= "table" then
    errors.raise(where .. ": expects {name =, y = {numbers}, x = {numbers}?}")
  end
  if s.x ~= nil and (type(s.x) ~= "table" or #s.x ~= #s.y) then
    errors.raise(string.format("%s: x has %s values, y has %d", where, type(s.x) == "table" and
      tostring(#s.x) or "no", #s.y))
  end
  for i = 1, #s.y do
    if type(s.y[i]) ~= "number" then
      errors.raise(string.format("%s: y[%d] is a %s, not a number", where, i, type(s.y[i])))
    end
    if s.x and type(s.x[i]) ~= "number" then
      errors.raise(string.format("%s: x[%d] is a %s, not a number", where, i, type(s.x[i])))
    end
  end
end

-- one panel's SVG elements at vertical offset `top`; W x H the panel size
local function panel_svg(out, panel, top, W, H)
  local L, R, T, B = 64, 150, 30, 42 -- margins: axis labels left, legend right, title, x labels
  local x0, x1, y0, y1 = math.huge, -math.huge, math.huge, -math.huge
  for _, s in ipairs(panel.series) do
    for i, y in ipairs(s.y) do
      local x = s.x and s.x[i] or i
      if finite(x) and finite(y) then
        x0, x1, y0, y1 = math.min(x0, x), math.max(x1, x), math.min(y0, y), math.max(y1, y)
      end
    end
  end
  if x0 > x1 then x0, x1, y0, y1 = 0, 1, 0, 1 end
  local xt, xlo, xhi = ticks(x0, x1, 6)
  local yt, ylo, yhi = ticks(y0, y1, 5)
  local pw, ph = W - L - R, H - T - B
  local function px(x) return L + (x - xlo) / (xhi - xlo) * pw end
  local function py(y) return top + T + ph - (y - ylo) / (yhi - ylo) * ph end
  local add = function(s) out[#out + 1] = s end
  if panel.title then
    add(string.format('<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>', L, top + 18,
      M.escape(panel.title)))
  end
  for _, v in ipairs(yt) do
    add(string.format('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>', L, py(v), L + pw, py(v)))
    add(string.format('<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>', L - 6,
      py(v) + 4, tick_label(v)))
  end
  for _, v in ipairs(xt) do
    add(string.format('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>', px(v), top + T,
      px(v), top + T + ph))
    add(string.format('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>', px(v),
      top + T + ph + 16, tick_label(v)))
  end
  add(string.format('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>', L, top + T, pw, ph))
  if panel.xlabel then
    add(string.format('<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>', L + pw / 2, top + H - 6,
      M.escape(panel.xlabel)))
  end
  if panel.ylabel then
    add(string.format('<text x="14" y="%.1f" font-size="12" text-anchor="middle" ' ..
      'transform="rotate(-90 14 %.1f)">%s</text>',
      top + T + ph / 2, top + T + ph / 2, M.escape(panel.ylabel)))
  end
  for k, s in ipairs(panel.series) do
    local color = s.color or M.PALETTE[(k - 1) % #M.PALETTE + 1]
    local run = {}
    local function flush()
      if #run >= 2 then
        add(string.format('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>', color,
          table.concat(run, " ")))
      elseif #run == 1 then
        local x, y = run[1]:match("([^,]+),(.+)")
        add(string.format('<circle cx="%s" cy="%s" r="3" fill="%s"/>', x, y, color))
      end
      run = {}
    end
    for i, y in ipairs(s.y) do -- a NaN or inf breaks the line
      local x = s.x and s.x[i] or i
      if finite(x) and finite(y) then run[#run + 1] = string.format("%.1f,%.1f", px(x), py(y)) else flush() end
    end
    flush()
    local ly = top + T + 10 + (k - 1) * 18
    add(string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>', L + pw + 12, ly,
      L + pw + 32, ly, color))
    add(string.format('<text x="%d" y="%d" font-size="12">%s</text>', L + pw + 38, ly + 4,
      M.escape(s.name or ("series " .. k))))
  end
end

-- the SVG text of stacked line-chart panels; opts: {width = 720, height = 260 per panel, title}
function M.lines_svg(panels, opts)
  if type(panels) ~= "table" or #panels == 0 then
    errors.raise("plot: expects a list of panels {title =, series = {...}}")
  end
  if panels.series then panels = { panels } end
  for p, panel in ipairs(panels) do
    if type(panel) ~= "table" or type(panel.series) ~= "table" or #panel.series == 0 then
      errors.raise(string.format("plot: panel %d has no series (expects {title =, series = {{name =, y =}}})", p))
    end
    for k, s in ipairs(panel.series) do check_series(s, p, k) end
  end
  opts = opts or {}
  local W, H = opts.width or 720, opts.height or 260
  local out = {
    '<?xml version="1.0" encoding="UTF-8"?>',
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
      'font-family="sans-serif">',
      W, H * #panels, W, H * #panels),
    string.format('<rect width="%d" height="%d" fill="white"/>', W, H * #panels),
  }
  for p, panel in ipairs(panels) do panel_svg(out, panel, (p - 1) * H, W, H) end
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

-- ds.plot.lines(path, panels, opts): write the charts to an SVG file; returns the path
function M.lines(path, panels, opts)
  if type(path) ~= "string" then errors.raise("plot: the first argument is the output path (a string)") end
  M.write_file(path, M.lines_svg(panels, opts), "plot")
  return path
end

-- ds.plot.history(path, history, opts): one panel per metric of a {metric = {values per epoch}} table
-- (or {metric = {series = values, ...}}), metrics in name order; x is the epoch (1-based)
function M.history(path, history, opts)
  if type(history) ~= "table" then errors.raise("plot: history must be a table {metric = {values}}") end
  local names = {}
  for k in pairs(history) do names[#names + 1] = k end
  table.sort(names)
  local panels = {}
  for _, name in ipairs(names) do
    local v = history[name]
    local series = {}
    if type(v) == "table" and #v > 0 then series[1] = { name = name, y = v }
    elseif type(v) == "table" then
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do series[#series + 1] = { name = k, y = v[k] } end
    end
    panels[#panels + 1] = { title = name, xlabel = (opts and opts.xlabel) or "epoch", series = series }
  end
  return M.lines(path, panels, opts)
end

return M
