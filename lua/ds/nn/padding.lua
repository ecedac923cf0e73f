-- nn/padding.lua: ConstantPad1d/2d/3d, ZeroPad2d, ReflectionPad1d/2d/3d and ReplicationPad1d/2d/3d (PyTorch's
-- constructors) over ds.F.pad: padding is a number (every side) or the 2 n sides in F.pad's order (last dim first).
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local errors = require("ds.errors")
local S = require("ds.shape")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- name, spatial dims n, F.pad mode, whether the constructor takes a value
local function pad_class(name, n, mode, has_value)
  local cls = Module:extend(name)
  cls._doc = "ds.F.pad (" .. mode .. ") of the last " .. n .. " dims as a module: " .. name .. "(padding" ..
    (has_value and ", value)" or ")")
  function cls:init(padding, value)
    if type(padding) == "number" then
      local p = {}
      for i = 1, 2 * n do p[i] = padding end
      padding = p
    end
    if type(padding) ~= "table" or #padding ~= 2 * n then
      raise("%s: padding must be a number or a list of %d numbers, got %s", name, 2 * n, tostring(padding))
    end
    for _, v in ipairs(padding) do
      if type(v) ~= "number" or v ~= math.floor(v) then raise("%s: paddings must be integers", name) end
    end
    if has_value and type(value) ~= "number" then raise("%s: expects %s(padding, value)", name, name) end
    if not has_value and value ~= nil then raise("%s: takes one argument (padding)", name) end
    self.padding, self.value = padding, value
  end
  function cls:forward(x)
    if not (#x._shape == n + 1 or #x._shape == n + 2) then
      raise("%s: input must have %d or %d dims, got %s", name, n + 1, n + 2, S.str(x._shape))
    end
    return F.pad(x, self.padding, mode, self.value)
  end
  function cls:extra_repr()
    local parts = {}
    for i, v in ipairs(self.padding) do parts[i] = tostring(v) end
    return "(" .. table.concat(parts, ", ") .. ")" .. (self.value and ", value=" .. tostring(self.value) or "")
  end
  M[name] = cls
end
for n = 1, 3 do
  pad_class("ConstantPad" .. n .. "d", n, "constant", true)
  pad_class("ReflectionPad" .. n .. "d", n, "reflect", false)
  pad_class("ReplicationPad" .. n .. "d", n, "replicate", false)
end

-- ZeroPad2d(padding): ConstantPad2d(padding, 0)
local ZeroPad2d = M.ConstantPad2d:extend("ZeroPad2d")
ZeroPad2d._doc = "ds.F.pad with zeros of the last 2 dims as a module: ZeroPad2d(padding)"
function ZeroPad2d:init(padding) M.ConstantPad2d.init(self, padding, 0) end
M.ZeroPad2d = ZeroPad2d

return M
