-- tape.lua: the autograd tape's recording half: dispatch links each op's outputs to a node
-- {def, inputs, attrs, outputs, needs} when an input requires grad (autograd.lua walks the nodes back).
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")

local M = {}
local is_tensor = Tensor.is_tensor

local function requires(x) return is_tensor(x) and rawget(x, "requires_grad") == true end
M.requires = requires

-- x's storage was written in place (x[key] = v) this many times (shared by its views), nil if never
function M.version(x) return rawget(rawget(x, "_base") or x, "_version") end
function M.bump(x)
  local owner = rawget(x, "_base") or x
  rawset(owner, "_version", (rawget(owner, "_version") or 0) + 1)
end

-- Called after every op with a backward rule while grad mode is on.
function M.maybe_record(def, inputs, attrs, outputs)
  local any, needs = false, {}
  for i = 1, #inputs do
    needs[i] = requires(inputs[i])
    any = any or needs[i]
  end
  if not any then return end
  local versions -- the inputs' write counts now, checked by backward (nil: never written)
  for i = 1, #inputs do
    local v = M.version(inputs[i])
    if v then versions = versions or {}; versions[i] = v end
  end
  local node = { def = def, inputs = inputs, attrs = attrs, outputs = outputs, needs = needs, versions = versions }
  if M.observer then M.observer(node) end -- control.lua's eager loops: which tensors a trip made
  for i = 1, #outputs do
    local o = outputs[i]
    if dtype.is_float[o.dtype] then
      rawset(o, "requires_grad", true)
      rawset(o, "_grad_fn", node)
      rawset(o, "_out_index", i)
    end
  end
end

-- an in-place op on x, which requires grad, is always an error (leaf or part of a graph)
function M.check_inplace(def, x)
  if rawget(x, "_grad_fn") == nil then
    errors.raise(def.name ..
      "_: in-place op on a leaf tensor that requires grad; wrap it in ds.no_grad or use the out-of-place form")
  end
  errors.raise(def.name .. "_: in-place op on a tensor that is part of a graph needing grad; use the out-of-place form")
end

return M
