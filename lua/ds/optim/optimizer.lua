-- optim/optimizer.lua: the Optimizer base: param groups, per-parameter state, zero_grad,
-- state_dict / load_state_dict (PyTorch's layout, 1-based parameter indices), the hyper-parameter tensors the
-- update ops read (opt.hyper).
local Tensor = require("ds.tensor")
local hyper = require("ds.ops.optim")
local errors = require("ds.errors")
local S = require("ds.shape")
local options = require("ds.options")
local constructor_args = require("ds.nn.constructor_args")

local Optimizer = {}
Optimizer.__index = Optimizer

-- a subclass with its own defaults and PyTorch 1.13's constructor parameters after params, in order (positional);
-- Class(params, positional..., [opts]) builds an instance
function Optimizer:extend(name, defaults, positional)
  local cls = setmetatable({ name = name, defaults = defaults, positional = positional or {} },
    { __index = self, __call = function(c, ...) return c.new(c, ...) end })
  cls.__index = cls
  cls.__tostring = self.__tostring
  return cls
end

-- state entries that are 1-element f32 counters, whatever the parameter's shape and dtype
local COUNTERS = { step = true, mu_product = true }

local function check_params(list, name)
  if type(list) ~= "table" then errors.raise(name .. ": params must be a list of tensors or of param groups") end
  for i, p in ipairs(list) do
    if not Tensor.is_tensor(p) then
      errors.raise(string.format("%s: param %d is a %s, not a tensor", name, i, type(p)))
    end
    if p.dtype ~= "f32" and p.dtype ~= "f64" then
      errors.raise(string.format("%s: param %d is %s; only floating point tensors can be optimized", name, i, p.dtype))
    end
    if rawget(p, "_grad_fn") then errors.raise(string.format("%s: param %d is not a leaf tensor", name, i)) end
  end
end

-- the kind of each option, from its default's Lua type (lr = 1e-3: a number, nesterov = false: a boolean,
-- betas: a table); with_params: a param group's keys (params too)
local function option_kinds(defaults, with_params)
  local kinds = { params = with_params and "any" or nil }
  for k, v in pairs(defaults) do kinds[k] = type(v) end
  return kinds
end

-- the f64 tensor of group gi's hyper-parameters for the update op def (ops/optim.lua), made once, as
-- opt.hyper[gi][def.name] (the name a traced step gives it), with the function that rewrites it from the group:
-- called by every eager step and, through hyper.refresh, before every run of a compiled step that reads the
-- tensor (so a scheduler's lr reaches compiled steps). One tensor per group and update: a compiled step keeps the
-- update it was traced with and refuses to run once the group's options choose another (self:_update(g)).
local function hyper_tensor(self, gi, def)
  local per = self.hyper[gi]
  if not per then per = {}; self.hyper[gi] = per end
  local t = per[def.name]
  if t then return t end
  t = hyper.tensor(def)
  local what = string.format("%s param group %d", self.name, gi)
  local function refresh()
    local g = self.param_groups[gi]
    local now = g and self:_update(g)
    if now ~= def then
      errors.raise(string.format("%s: a compiled step was traced with the update %s, the group's options now "
        .. "choose %s (%s); compile the step again after changing them", what, def.name, now and now.name or "none",
        self.update_choice))
    end
    hyper.fill(t, def, self:_values(g), what)
  end
  per[def.name] = t
  self._refresh[t] = refresh -- the optimizer keeps it; hyper.refresh holds it weakly
  hyper.refresh[t] = refresh
  return t
end

-- params: list of tensors, or list of groups {params = {...}, lr = ...}; then the defaults' overrides, positionally
-- (SGD(params, 0.1, 0.9)) and/or as options
local NOT_REFUSED = {}
function Optimizer.new(cls, params, ...)
  local opts = constructor_args.merge(cls.name, cls.positional, option_kinds(cls.defaults), NOT_REFUSED, ...)
  local self = setmetatable({ param_groups = {}, state = {}, defaults = {}, hyper = {}, _refresh = {} }, cls)
  for k, v in pairs(cls.defaults) do
    if opts[k] ~= nil then self.defaults[k] = opts[k] else self.defaults[k] = v end
  end
  if type(params) ~= "table" or #params == 0 then errors.raise(cls.name .. ": got an empty parameter list") end
  local groups = Tensor.is_tensor(params[1]) and { { params = params } } or params
  for _, g in ipairs(groups) do self:add_param_group(g) end
  return self
end

-- add a group {params = {...}, option = value...}; options it does not give take the optimizer's
-- defaults; a parameter may belong to one group only
function Optimizer:add_param_group(g)
  local name, gi = self.name, #self.param_groups + 1
  if type(g) ~= "table" or Tensor.is_tensor(g) or g.params == nil then
    errors.raise(string.format("%s: param group %d must be a table with a params list", name, gi))
  end
  local list = Tensor.is_tensor(g.params) and { g.params } or g.params
  check_params(list, name)
  local seen = {}
  for _, og in ipairs(self.param_groups) do for _, p in ipairs(og.params) do seen[p] = true end end
  local group = { params = {} }
  for i, p in ipairs(list) do
    if seen[p] then errors.raise(string.format("%s: a parameter appears twice (group %d, index %d)", name, gi, i)) end
    seen[p] = true
    group.params[i] = p
  end
  options.check(g, name .. " param group " .. gi, option_kinds(self.defaults, true))
  for k, v in pairs(self.defaults) do
    if g[k] ~= nil then group[k] = g[k] else group[k] = v end
  end
  if self.check_group then self.check_group(group, name) end
  self.param_groups[gi] = group
  for _, def in ipairs(self.updates or {}) do hyper_tensor(self, gi, def) end -- before any trace, to be named
end

-- drop every gradient (PyTorch's set_to_none = true)
function Optimizer:zero_grad()
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do rawset(p, "grad", nil) end
  end
end

-- group gi's hyper-parameter tensor for the update def, refreshed from the group
function Optimizer:_hyper(gi, def)
  local t = hyper_tensor(self, gi, def)
  self._refresh[t]()
  return t
end

-- the group's hyper-parameters by the names of the updates' operands (ops/optim.lua); Adam's betas differ
function Optimizer:_values(g) return g end

-- the update kernels take a grad of the parameter's dtype, with any strides
function Optimizer.grad_of(p)
  local g = rawget(p, "grad")
  if g ~= nil and g.dtype ~= p.dtype then g = g:astype(p.dtype) end
  return g
end

-- {state = {[i] = {name = tensor...}}, param_groups = {{lr = ..., params = {i...}}}} with i counting
-- parameters across groups from 1; tensors are copies
function Optimizer:state_dict()
  local sd = { state = {}, param_groups = {} }
  local idx = 0
  for gi, g in ipairs(self.param_groups) do
    local pg = { params = {} }
    for k, v in pairs(g) do if k ~= "params" then pg[k] = v end end
    for _, p in ipairs(g.params) do
      idx = idx + 1
      pg.params[#pg.params + 1] = idx
      local st = self.state[p]
      if st then
        local copy = {}
        for k, v in pairs(st) do copy[k] = Tensor.is_tensor(v) and v:clone() or v end
        sd.state[idx] = copy
      end
    end
    sd.param_groups[gi] = pg
  end
  return sd
end

function Optimizer:load_state_dict(sd)
  local name = self.name
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    errors.raise(name .. ".load_state_dict: expects {state = ..., param_groups = ...}")
  end
  if #sd.param_groups ~= #self.param_groups then
    errors.raise(string.format("%s.load_state_dict: %d param groups given, optimizer has %d", name, #sd.param_groups,
      #self.param_groups))
  end
  local by_index, idx = {}, 0
  for gi, g in ipairs(self.param_groups) do
    local pg = sd.param_groups[gi]
    if #pg.params ~= #g.params then
      errors.raise(string.format("%s.load_state_dict: group %d has %d params, optimizer's has %d", name, gi,
        #pg.params, #g.params))
    end
    for i, p in ipairs(g.params) do idx = idx + 1; by_index[pg.params[i]] = p end
  end
  local new_state = {}
  for i, st in pairs(sd.state) do
    local p = by_index[i]
    if not p then
      errors.raise(string.format("%s.load_state_dict: state for parameter %s, which no group lists", name, tostring(i)))
    end
    local copy = {}
    for k, v in pairs(st) do
      if Tensor.is_tensor(v) then
        if not COUNTERS[k] and not S.equal(v._shape, p._shape) then
          errors.raise(string.format("%s.load_state_dict: state '%s' of parameter %d has shape %s, parameter has " ..
            "%s", name, k, i,
            S.str(v._shape), S.str(p._shape)))
        end
        v = v:astype(COUNTERS[k] and "f32" or p.dtype):clone()
      end
      copy[k] = v
    end
    new_state[p] = copy
  end
  for gi, g in ipairs(self.param_groups) do
    for k, v in pairs(sd.param_groups[gi]) do if k ~= "params" then g[k] = v end end
  end
  self.state = new_state
end

function Optimizer:__tostring()
  local lines = { self.name .. " (" }
  for gi, g in ipairs(self.param_groups) do
    lines[#lines + 1] = string.format("Parameter Group %d", gi - 1)
    local keys = {}
    for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = g[k]
      if type(v) == "table" then
        local parts = {}
        for i, x in ipairs(v) do parts[i] = tostring(x) end
        v = "(" .. table.concat(parts, ", ") .. ")"
      end
      lines[#lines + 1] = "    " .. k .. ": " .. tostring(v)
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

return Optimizer
