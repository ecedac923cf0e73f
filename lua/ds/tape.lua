-- tape.lua: the autograd tape's recording half: dispatch links each op's outputs to a node
-- {def, inputs, attrs, outputs, needs, versions} when an input requires grad (autograd.lua walks the nodes back),
-- and keeps the version counters of in-place writes (PyTorch's: shared by the views of one storage).
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")

local M = {}
local is_tensor = Tensor.is_tensor

local function requires(x) return is_tensor(x) and rawget(x, "requires_grad") == true end
M.requires = requires

-- x's storage was written in place this many times (shared by its views), nil if never (x._version reads it)
local function version(x) return rawget(rawget(x, "_base") or x, "_version") end
M.version = version
function M.bump(x)
  local owner = rawget(x, "_base") or x
  rawset(owner, "_version", (rawget(owner, "_version") or 0) + 1)
end

-- M.inplace(def, inputs, attrs, out): an in-place op while autograd records (set by autograd.lua, which rebases
-- the written tensor's history as PyTorch's rebase_history); dispatch calls it when out or an input requires grad
M.inplace = nil

-- Called after every op with a backward rule while grad mode is on. needs[i] is the edge to input i as it is now:
-- its producer node (a non-leaf), true (a leaf requiring grad) or false, so a later in-place write to an input does
-- not reroute this node's gradient into the write's history.
function M.maybe_record(def, inputs, attrs, outputs)
  local any, needs = false, {}
  for i = 1, #inputs do
    local x = inputs[i]
    local hv = rawget(x, "_hist_version")
    if hv and hv ~= (version(x) or 0) and M.refresh_view then M.refresh_view(x) end
    local r = requires(x)
    needs[i] = r and (rawget(x, "_grad_fn") or true)
    any = any or r
  end
  if not any then return end
  local versions, out_versions -- the write counts of inputs and outputs now, checked by backward (nil: never written)
  for i = 1, #inputs do
    local v = version(inputs[i])
    if v then versions = versions or {}; versions[i] = v end
  end
  for i = 1, #outputs do
    local v = version(outputs[i])
    if v then out_versions = out_versions or {}; out_versions[i] = v end
  end
  local node = { def = def, inputs = inputs, attrs = attrs, outputs = outputs, needs = needs, versions = versions,
    out_versions = out_versions }
  if M.observer then M.observer(node) end -- control.lua's eager loops: which tensors a trip made
  for i = 1, #outputs do
    local o = outputs[i]
    if dtype.is_float[o.dtype] then
      rawset(o, "requires_grad", true)
      rawset(o, "_grad_fn", node)
      rawset(o, "_out_index", i)
      if rawget(o, "_base") then rawset(o, "_hist_version", version(o) or 0) end
    end
  end
end

-- M.refresh_view(v): a view whose storage was written in place since its history was recorded takes a history
-- read from its base's current one (set by autograd.lua; PyTorch regenerates a view's grad_fn likewise)
M.refresh_view = nil

-- src (x's value before an in-place write) takes x's place as the output of x's producer: nodes that read x before
-- the write keep their gradient path through src; the producer's output counts as modified (PyTorch's check)
function M.rebase(x, src)
  local fn = rawget(x, "_grad_fn")
  if not fn then return end
  local i = rawget(x, "_out_index")
  rawset(src, "requires_grad", true)
  rawset(src, "_grad_fn", fn)
  rawset(src, "_out_index", i)
  fn.outputs[i] = src
  fn.moved = fn.moved or setmetatable({}, { __mode = "k" })
  fn.moved[x] = i
  fn.stale = fn.stale or {}
  fn.stale[i] = (version(x) or 0) + 1
end

-- x (written in place with r's value) takes r's place as the output of r's producer; nodes that read r since
-- send their gradient to x (r leaves the graph)
function M.adopt(x, r)
  local fn = rawget(r, "_grad_fn")
  if not fn then return end
  local i = rawget(r, "_out_index")
  rawset(x, "requires_grad", true)
  rawset(x, "_grad_fn", fn)
  rawset(x, "_out_index", i)
  fn.outputs[i] = x
  fn.moved = fn.moved or setmetatable({}, { __mode = "k" })
  fn.moved[r] = i
  rawset(r, "requires_grad", nil)
  rawset(r, "_grad_fn", nil)
  fn.out_versions = fn.out_versions or {}
  fn.out_versions[i] = version(x) -- the write that gave x the value counts as the node's own
  if rawget(x, "_base") then rawset(x, "_hist_version", version(x) or 0) end
end

-- the key under which backward collects the gradient of input i of node: the input itself, or, when the input was
-- written in place after node read it, the tensor that took its place in its producer (M.rebase)
function M.edge_key(node, i)
  local x, e = node.inputs[i], node.needs[i]
  if e == true or not e or e == rawget(x, "_grad_fn") then return x end
  local j = e.moved and e.moved[x]
  return j and e.outputs[j] or x
end

-- an in-place op on x, which requires grad, with no rule for it (an op without backward, a leaf)
function M.check_inplace(def, x)
  if rawget(x, "_grad_fn") == nil then
    errors.raise(def.name .. "_: a leaf Variable that requires grad is being used in an in-place operation; wrap "
      .. "it in ds.no_grad or use the out-of-place form")
  end
  errors.raise(def.name .. "_: in-place op on a tensor that is part of a graph needing grad, and " .. def.name ..
    " has no gradient; use the out-of-place form")
end

return M
