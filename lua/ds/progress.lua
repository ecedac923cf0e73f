-- progress.lua: progress bars for epochs and long loops: count, rate, ETA and running means (loss).
-- On a terminal one line is redrawn in place; otherwise (a file, a pipe, CI) a plain line is printed
-- every `interval` seconds and at the end.
--   local bar = ds.progress.bar{total = loader:len(), desc = "epoch 1"}
--   for x, y in loader:iter() do ...; bar:update(1, {loss = loss:item()}) end
--   bar:close()
local dsffi = require("ds.ffi")
local errors = require("ds.errors")
local monotonic_clock = require("ds.clock")

local M = {}

local Bar = {}
Bar.__index = Bar

local function hms(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  local h, m = math.floor(s / 3600), math.floor(s / 60) % 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s % 60) end
  return string.format("%d:%02d", m, s % 60)
end

-- is `out` a terminal? (only io.stdout / io.stderr can be; TERM=dumb counts as not)
local function is_terminal(out)
  if os.getenv("TERM") == "dumb" then return false end
  if out == io.stdout then return dsffi.C.ds_isatty(1) ~= 0 end
  if out == io.stderr then return dsffi.C.ds_isatty(2) ~= 0 end
  return false
end

-- bar{total =, desc =, unit = "it", out = io.stdout, tty = auto, interval = 10 (seconds, plain lines),
--     width = 30 (bar cells), clock = ds.clock}
function M.bar(opts)
  opts = opts or {}
  if opts.total ~= nil and (type(opts.total) ~= "number" or opts.total < 0) then
    errors.raise("progress.bar: total must be a non-negative number, got " .. tostring(opts.total))
  end
  local out = opts.out or io.stdout
  local clock = opts.clock or monotonic_clock
  local tty = opts.tty
  if tty == nil then tty = is_terminal(out) end
  local now = clock()
  return setmetatable({
    total = opts.total, desc = opts.desc, unit = opts.unit or "it", out = out, tty = tty, clock = clock,
    interval = opts.interval or 10, width = opts.width or 30, n = 0, start = now, last_draw = now,
    sums = {}, counts = {}, keys = {}, closed = false,
  }, Bar)
end

-- running means of the values given to update, in the order their keys first appeared
function Bar:means()
  local m = {}
  for _, k in ipairs(self.keys) do m[k] = self.sums[k] / self.counts[k] end
  return m
end

function Bar:line(now)
  local elapsed = now - self.start
  local rate = elapsed > 0 and self.n / elapsed or 0
  local parts = {}
  if self.desc then parts[#parts + 1] = self.desc end
  if self.total and self.total > 0 then
    local frac = math.min(self.n / self.total, 1)
    if self.tty then
      local full = math.floor(frac * self.width + 0.5)
      parts[#parts + 1] = "[" .. string.rep("#", full) .. string.rep(".", self.width - full) .. "]"
    end
    parts[#parts + 1] = string.format("%d/%d %3d%%", self.n, self.total, math.floor(frac * 100))
  else
    parts[#parts + 1] = string.format("%d", self.n)
  end
  parts[#parts + 1] = string.format("%.1f %s/s", rate, self.unit)
  if self.closed then
    parts[#parts + 1] = hms(elapsed)
  elseif self.total then
    parts[#parts + 1] = "ETA " .. (rate > 0 and hms((self.total - self.n) / rate) or "?")
  end
  for _, k in ipairs(self.keys) do
    parts[#parts + 1] = string.format("%s %.4f", k, self.sums[k] / self.counts[k])
  end
  return table.concat(parts, " ")
end

function Bar:draw(now)
  self.last_draw = now
  if self.tty then
    self.out:write("\r", self:line(now), "\27[K")
  else
    self.out:write(self:line(now), "\n")
  end
  if self.out.flush then self.out:flush() end
end

-- update(k = 1, {name = value, ...}): k more steps done; values join their running means
function Bar:update(k, values)
  if type(k) == "table" then k, values = 1, k end
  self.n = self.n + (k or 1)
  if values then
    for name, v in pairs(values) do
      if type(v) ~= "number" then
        if type(v) == "table" and v.item then v = v:item() else
          errors.raise(string.format("progress: value '%s' must be a number, got %s", tostring(name), type(v)))
        end
      end
      if not self.sums[name] then
        self.sums[name], self.counts[name] = 0, 0
        self.keys[#self.keys + 1] = name
      end
      self.sums[name] = self.sums[name] + v
      self.counts[name] = self.counts[name] + 1
    end
  end
  local now = self.clock()
  local wait = self.tty and 0.1 or self.interval
  if now - self.last_draw >= wait then self:draw(now) end
end

-- close(): draws the final line (total time, rate, means); returns the running means
function Bar:close()
  if self.closed then return self:means() end
  self.closed = true
  self:draw(self.clock())
  if self.tty then self.out:write("\n") end
  return self:means()
end

-- for x, y in ds.progress.wrap(loader:iter(), {total = loader:len()}) do: one step per iteration
-- (iter is a closure iterator; the bar closes when it ends)
function M.wrap(iter, opts)
  local bar = M.bar(opts)
  return function()
    local r = { iter() }
    if r[1] == nil then bar:close(); return nil end
    bar:update(1)
    return unpack(r, 1, table.maxn(r))
  end
end

M.Bar = Bar

return M
