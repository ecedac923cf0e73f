-- nn/summary.lua: model:summary(input_shape): the layers a forward pass calls, in call order and nested,
-- with their output shapes and parameter counts, and the totals (like torchinfo / Keras's summary).
--   print(model:summary({1, 1, 28, 28}))         -- or {{1, 16}, {1, 16}} for two inputs, or tensors
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local autograd = require("ds.autograd")
local ops = require("ds.ops")

local M = {}

local Summary = {}
Summary.__index = Summary

local function count(params)
  local n = 0
  for _, p in ipairs(params) do n = n + p:numel() end
  return n
end

local function grouped(n) -- 61706 -> "61,706"
  local s = tostring(n)
  repeat local k; s, k = s:gsub("^(%d+)(%d%d%d)", "%1,%2") until k == 0
  return s
end

local function shapes_of(v, depth)
  if Tensor.is_tensor(v) then return S.str(v.shape) end
  if type(v) == "table" and (depth or 0) < 3 then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = shapes_of(x, (depth or 0) + 1) end
    return "[" .. table.concat(parts, ", ") .. "]"
  end
  return type(v)
end

-- the example inputs: a shape {1, 3, 8, 8}, a list of shapes, or tensors (opts.dtype for made ones)
local function example_inputs(spec, dtype)
  if Tensor.is_tensor(spec) then return { spec } end
  if type(spec) ~= "table" or #spec == 0 then
    errors.raise("summary: expects an input shape such as {1, 1, 28, 28}, a list of shapes, or tensors")
  end
  if type(spec[1]) == "number" then spec = { spec } end
  local out = {}
  for i, s in ipairs(spec) do
    if Tensor.is_tensor(s) then out[i] = s
    elseif type(s) == "table" then out[i] = ops.zeros(s, { dtype = dtype or "f32" })
    else errors.raise(string.format("summary: input %d is a %s, not a shape or a tensor", i, type(s))) end
  end
  return out
end

-- summary(model, input_shape, {dtype = "f32"}) -> a Summary (tostring prints the table)
function M.summary(model, input, opts)
  if type(model) ~= "table" or not model._is_module then
    errors.raise("summary: expects a module (model:summary(input_shape))")
  end
  opts = options.check(opts, "summary", { dtype = "dtype" })
  local inputs = example_inputs(input, opts.dtype)
  local names = {}
  for name, m in model:named_modules() do names[m] = name end
  local rows, depth, wrapped = {}, 0, {}
  for m, name in pairs(names) do
    local forward = m.forward
    wrapped[#wrapped + 1] = { m, rawget(m, "forward") } -- its own forward (forward hooks) comes back after
    rawset(m, "forward", function(self, ...)
      local row = { name = name, type = self._name, depth = depth, module = self }
      rows[#rows + 1] = row
      depth = depth + 1
      local res = { pcall(forward, self, ...) }
      depth = depth - 1
      if not res[1] then error(res[2], 0) end
      local results = {}
      for i = 2, table.maxn(res) do results[#results + 1] = res[i] end
      row.output = #results == 1 and shapes_of(results[1]) or shapes_of(results)
      return unpack(res, 2, table.maxn(res))
    end)
  end
  local ok, err = pcall(autograd.no_grad, function() return model(unpack(inputs)) end)
  for _, w in ipairs(wrapped) do rawset(w[1], "forward", w[2]) end
  if not ok then error(err, 0) end
  for _, row in ipairs(rows) do -- a module's own parameters (its children have their rows)
    local child_total = 0
    for _, child in ipairs(row.module:children()) do child_total = child_total + count(child:parameters()) end
    row.params = count(row.module:parameters()) - child_total
    row.module = nil
  end
  local total, trainable = 0, 0
  for _, p in ipairs(model:parameters()) do
    total = total + p:numel()
    if p.requires_grad then trainable = trainable + p:numel() end
  end
  local buffers = 0
  for _, b in ipairs(model:buffers()) do buffers = buffers + b:numel() end
  return setmetatable({ rows = rows, total_params = total, trainable_params = trainable, buffer_elements = buffers,
                        input = shapes_of(inputs) }, Summary)
end

function Summary:__tostring()
  local lines, width = {}, 36
  for _, r in ipairs(self.rows) do
    local label = string.rep("  ", r.depth) .. (r.name ~= "" and (r.name .. " (" .. r.type .. ")") or r.type)
    width = math.max(width, #label + 2)
  end
  local rule = string.rep("=", width + 40)
  lines[1] = string.format("%-" .. width .. "s%-28s%12s", "Layer (type)", "Output shape", "Param #")
  lines[2] = rule
  for _, r in ipairs(self.rows) do
    local label = string.rep("  ", r.depth) .. (r.name ~= "" and (r.name .. " (" .. r.type .. ")") or r.type)
    lines[#lines + 1] = string.format("%-" .. width .. "s%-28s%12s", label, r.output or "?", r.params > 0 and
      grouped(r.params) or "--")
  end
  lines[#lines + 1] = rule
  lines[#lines + 1] = "Input: " .. self.input
  lines[#lines + 1] = "Total params: " .. grouped(self.total_params)
  lines[#lines + 1] = "Trainable params: " .. grouped(self.trainable_params)
  lines[#lines + 1] = "Non-trainable params: " .. grouped(self.total_params - self.trainable_params)
  lines[#lines + 1] = "Buffer elements: " .. grouped(self.buffer_elements)
  return table.concat(lines, "\n")
end

return M
