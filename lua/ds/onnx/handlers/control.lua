-- onnx/handlers/control.lua: ONNX import handlers of control flow with subgraphs: If, Loop, Scan (opsets 8+).
--[[ A condition or trip count known at import time is resolved in Lua: If runs the chosen branch only, and a
  loop with a known trip count of at most UNROLL_LIMIT trips is unrolled (its values may then be anything:
  consts, sequences, shapes changing from trip to trip). Otherwise If becomes ds.cond (both branches traced;
  their outputs must agree in dtype and shape) and loops become ds.fori_loop (trip count known at import time,
  possibly a dynamic dim: scan outputs are stacked in tensors of that length) or ds.while_loop (a condition
  computed by the body, or a trip count known only at run time: no scan outputs, since their length would
  depend on the data). Loop-carried values keep their dtype and shape in a ds loop. ]]
local F = require("ds.ops")
local D = require("ds.dispatch")
local Tensor = require("ds.tensor")
local sym = require("ds.sym")
local control = require("ds.control")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local REQUIRED, T, refuse = common.REQUIRED, V.tensor, common.refuse
local UNROLL_LIMIT = 64 -- trips a loop with a trip count known at import time is unrolled up to

-- v is a tensor value (a ds tensor or a const), not a sequence or optional
local function is_tensor_value(v) return Tensor.is_tensor(v) or V.is_const(v) end

-- the list vs as ds tensors; what names them in the error for a sequence or optional
local function tensors(vs, what)
  local out = {}
  for k, v in ipairs(vs) do
    if not is_tensor_value(v) then
      refuse(string.format("%s %d is a sequence or optional; ds carries only tensors through a runtime %s", what,
        k, what:match("^%S+")))
    end
    out[k] = T(v)
  end
  return out
end

-- the Lua truth of a const with known data, or nil when the value is known only at run time
local function known_truth(v)
  if V.is_const(v) and v.data and #v.data == 1 and type(v.data[1]) == "number" then return v.data[1] ~= 0 end
  return nil
end

-- ---- If ----
-- a graph output declared a sequence or an optional
local function declares_container(g)
  for _, o in ipairs(g.output or {}) do
    if o.type and (o.type.sequence_type or o.type.optional_type) then return true end
  end
  return false
end

def("If", { then_branch = REQUIRED, else_branch = REQUIRED }, function(ins, at, _, _, ctx)
  if declares_container(at.then_branch) or declares_container(at.else_branch) then -- a graph input is specialized on
    V.data(ins[1], "If: the condition of an If whose outputs are sequences or optionals")
  end
  local known = known_truth(ins[1])
  if known ~= nil then return unpack(ctx.run_graph(known and at.then_branch or at.else_branch, {})) end
  local pred = T(ins[1])
  if #pred.shape > 0 then pred = pred:reshape({}) end
  local function branch(g) return function() return unpack(tensors(ctx.run_graph(g, {}), "If output")) end end
  return control.cond(pred, branch(at.then_branch), branch(at.else_branch))
end)

-- ---- trips: the body run a known number of times n, scan outputs stacked ----
-- body(k, carried) -> carried', scans (lists); k the 0-based trip (a Lua number when unrolled, else a 0-d i64
-- tensor); n a number or a dynamic dim; backwards[j]: scan output j is built last trip first.
-- Returns the final carried values and each scan output stacked on a new dim 1: (n, ...)
local function run_trips(n, body, carried, nscan, backwards)
  if type(n) == "number" and n <= UNROLL_LIMIT then
    local rows = {}
    for j = 1, nscan do rows[j] = {} end
    for k = 0, n - 1 do
      local scans
      carried, scans = body(k, carried)
      for j = 1, nscan do rows[j][backwards[j] and n - k or k + 1] = T(scans[j]) end
    end
    local stacked = {}
    for j = 1, nscan do
      if n == 0 then refuse("a loop that runs no trip has scan outputs of unknown shape") end
      stacked[j] = F.stack(rows[j], 1)
    end
    return carried, stacked
  end
  carried = tensors(carried, "Loop-carried value")
  -- the scan outputs' row shapes from a probe trip (dead code once the loop is traced: compile drops it)
  local accs = {}
  if nscan > 0 then
    local _, probe = body(D.scalar(0, "i64"), carried)
    for j, v in ipairs(tensors(probe, "scan output")) do
      local shape = { n }
      for d, s in ipairs(v.shape) do shape[d + 1] = s end
      accs[j] = F.zeros(shape, { dtype = v.dtype })
    end
  end
  local nc = #carried
  local last = D.scalar(n, "i64")
  local init = {}
  for i = 1, nc do init[i] = carried[i] end
  for j = 1, nscan do init[nc + j] = accs[j] end
  local res = { control.fori_loop(0, last - 1, function(k, ...)
    local vars = { ... }
    local c, scans = body(k, { unpack(vars, 1, nc) })
    local out = tensors(c, "Loop-carried value")
    for j, y in ipairs(tensors(scans, "scan output")) do
      local row = backwards[j] and last - k or k + 1
      out[nc + j] = vars[nc + j]:index_add(1, row, y:unsqueeze(1))
    end
    return unpack(out, 1, nc + nscan)
  end, init) }
  return { unpack(res, 1, nc) }, { unpack(res, nc + 1, nc + nscan) }
end

-- ---- Loop ----
-- what the body does with the condition: "same" (passes cond_in through Identity nodes), "true"/"false"
-- (a Constant), or "computed"
local function cond_kind(body)
  local producer = {}
  for _, node in ipairs(body.node or {}) do
    for _, o in ipairs(node.output or {}) do producer[o] = node end
  end
  local name = body.output[1].name
  local cond_in = body.input[2] and body.input[2].name
  for _ = 1, #(body.node or {}) + 1 do
    if name == cond_in then return "same" end
    local node = producer[name]
    if not node then return "computed" end
    if node.op_type == "Identity" then
      name = node.input[1]
    elseif node.op_type == "Constant" and #node.attribute == 1 and node.attribute[1].t then
      local ok, c = pcall(V.tensor_of, node.attribute[1].t, "Constant")
      local truth = ok and known_truth(c)
      if truth == nil then return "computed" end
      return truth and "true" or "false"
    else
      return "computed"
    end
  end
  return "computed"
end

-- the trip count when it is known at import time (a number or a dynamic dim), else nil
local function known_trips(m, cond0, kind)
  local go = cond0 == nil or known_truth(cond0)
  if go == false then return 0 end
  if go == nil or kind == "computed" then return nil end
  local max
  if m then
    local d = V.is_const(m) and m.data and #m.data == 1 and m.data[1]
    if not (type(d) == "number" or sym.is(d)) then return nil end
    max = d
  end
  if kind == "false" then return max == 0 and 0 or 1 end
  if not max then refuse("Loop: no trip count and a condition that stays true: the loop never ends") end
  return max
end

-- a loop whose trips are known at import time: n trips (see known_trips)
local function counted_loop(body, n, carried0, nscan, ctx)
  local nc = #carried0
  local cond_value = V.const("bool", {}, { 1 })
  local function trip(k, carried)
    local iter = type(k) == "number" and V.const("i64", {}, { k }) or k
    local outs = ctx.run_graph(body, { iter, cond_value, unpack(carried, 1, nc) })
    return { unpack(outs, 2, 1 + nc) }, { unpack(outs, 2 + nc, 1 + nc + nscan) }
  end
  local carried, scans = run_trips(n, trip, carried0, nscan, {})
  local outs = {}
  for i = 1, nc do outs[i] = carried[i] end
  for j = 1, nscan do outs[nc + j] = scans[j] end
  return outs
end

-- a loop with scan outputs whose body computes the condition, unrolled in Lua while that condition folds to a
-- const (at most m trips, m a number up to UNROLL_LIMIT)
local function folded_loop(body, m, carried, nscan, ctx)
  local nc = #carried
  local rows, go = {}, true
  for j = 1, nscan do rows[j] = {} end
  for k = 0, m - 1 do
    if not go then break end
    local outs = ctx.run_graph(body, { V.const("i64", {}, { k }), V.const("bool", {}, { 1 }), unpack(carried, 1, nc) })
    go = known_truth(outs[1])
    if go == nil then
      refuse("Loop: the body computes its condition at run time and the loop has scan outputs, whose length " ..
        "would then depend on the data, which ds graphs cannot express")
    end
    carried = { unpack(outs, 2, 1 + nc) }
    for j = 1, nscan do rows[j][k + 1] = T(outs[1 + nc + j]) end
  end
  local outs = {}
  for i = 1, nc do outs[i] = carried[i] end
  for j = 1, nscan do
    if #rows[j] == 0 then refuse("Loop: a loop that runs no trip has scan outputs of unknown shape") end
    outs[nc + j] = F.stack(rows[j], 1)
  end
  return outs
end

-- a loop whose trips are counted at run time: ds.while_loop on (i, cond, carried...), no scan outputs
local function runtime_loop(body, m, cond0, carried0, ctx)
  local nc = #carried0
  local limit = m and T(m):astype("i64"):reshape({})
  local init = { D.scalar(0, "i64"), cond0 and T(cond0):astype("bool"):reshape({}) or D.scalar(true, "bool") }
  for i, v in ipairs(tensors(carried0, "Loop-carried value")) do init[2 + i] = v end
  local res = { control.while_loop(function(i, c)
    if not limit then return c end
    return F.logical_and(i:lt(limit), c)
  end, function(i, c, ...)
    local nxt = tensors(ctx.run_graph(body, { i, c, ... }), "Loop body output")
    nxt[1] = nxt[1]:astype("bool"):reshape({})
    return i + 1, unpack(nxt, 1, 1 + nc)
  end, init) }
  return { unpack(res, 3, 2 + nc) }
end

def("Loop", { body = REQUIRED }, function(ins, at, node, _, ctx)
  local body = at.body
  local nc = math.max(#node.input - 2, 0) -- ins has holes where an optional input is ""
  local nscan = #body.output - 1 - nc
  if #body.input ~= nc + 2 or nscan < 0 then
    refuse(string.format("Loop: the body takes %d inputs and gives %d outputs for %d loop-carried values",
      #body.input, #body.output, nc))
  end
  local m, cond0 = ins[1], ins[2]
  local carried0 = {}
  for i = 1, nc do carried0[i] = ins[2 + i] end
  local kind = cond_kind(body)
  -- stacked scan outputs and sequences or optionals carried in Lua need the number of trips: a graph input it
  -- depends on is specialized on
  local what = nscan > 0 and "a loop with scan outputs"
  for i = 1, nc do
    if carried0[i] ~= nil and not is_tensor_value(carried0[i]) then what = "a loop carrying sequences or optionals" end
  end
  if what then
    if m then V.data(m, "Loop: the trip count M of " .. what) end
    if cond0 then V.data(cond0, "Loop: the condition of " .. what) end
  end
  local n = known_trips(m, cond0, kind)
  local outs
  if n then
    outs = counted_loop(body, n, carried0, nscan, ctx)
  elseif nscan == 0 then
    outs = runtime_loop(body, m, cond0, carried0, ctx)
  else
    local limit = m and V.data(m)[1]
    if type(limit) ~= "number" or limit > UNROLL_LIMIT then
      refuse(string.format("Loop: the body computes its condition and the loop has scan outputs: ds unrolls such a " ..
        "loop for a trip count known at import time of at most %d, got %s", UNROLL_LIMIT, tostring(limit)))
    end
    outs = folded_loop(body, limit, carried0, nscan, ctx)
  end
  return unpack(outs, 1, nc + nscan)
end)

-- ---- Scan ----
-- the permutation that moves dim 1 of a rank-r tensor to dim d (1-based)
local function move_first_to(r, d)
  local perm = {}
  for i = 2, r do perm[#perm + 1] = i end
  table.insert(perm, d, 1)
  return perm
end

-- Scan (opset 9+) on state values and scan inputs; returns the final states and the scan outputs
local function scan(states, xs, at, ctx)
  local body = at.body
  local nstate = #states
  local nscan = #body.output - nstate
  local in_axes, in_dirs = at.scan_input_axes or {}, at.scan_input_directions or at.directions or {}
  local out_axes, out_dirs = at.scan_output_axes or {}, at.scan_output_directions or {}
  local slices, n = {}, nil
  for j, x in ipairs(xs) do
    local r = common.rank(x)
    local axis = common.axis0(in_axes[j] or 0, r, "Scan: scan_input_axes") + 1
    local len = V.shape(x)[axis]
    if n ~= nil and len ~= n then refuse("Scan: the scan inputs have different lengths along their scan axes") end
    n = len
    slices[j] = { x = T(x), axis = axis, backward = (in_dirs[j] or 0) ~= 0 }
  end
  if n == nil then refuse("Scan: no scan inputs (num_scan_inputs must be at least 1)") end
  local backwards = {}
  for j = 1, nscan do backwards[j] = (out_dirs[j] or 0) ~= 0 end
  local function trip(k, carried)
    local args = {}
    for i = 1, nstate do args[i] = carried[i] end
    for j, s in ipairs(slices) do
      if type(k) == "number" then
        args[nstate + j] = s.x:select(s.axis, s.backward and n - k or k + 1)
      else
        local row = s.backward and D.scalar(n, "i64") - k or k + 1
        args[nstate + j] = s.x:index_select(s.axis, row):squeeze(s.axis)
      end
    end
    local outs = ctx.run_graph(body, args)
    return { unpack(outs, 1, nstate) }, { unpack(outs, nstate + 1, nstate + nscan) }
  end
  local finals, stacked = run_trips(n, trip, states, nscan, backwards)
  local outs = {}
  for i = 1, nstate do outs[i] = finals[i] end
  for j = 1, nscan do
    local y = stacked[j]
    local r = common.rank(y)
    local axis = common.axis0(out_axes[j] or 0, r, "Scan: scan_output_axes") + 1
    outs[nstate + j] = axis == 1 and y or y:permute(move_first_to(r, axis))
  end
  return outs
end

def("Scan", { body = REQUIRED, num_scan_inputs = REQUIRED, directions = false, scan_input_axes = false,
  scan_input_directions = false, scan_output_axes = false, scan_output_directions = false },
  function(ins, at, node, opset, ctx)
    local nin, nins = at.num_scan_inputs, #node.input -- ins has a hole where sequence_lens is ""
    if opset >= 9 then
      if at.directions then refuse("Scan: the attribute directions is opset 8's (scan_input_directions since 9)") end
      local nstate = nins - nin
      return unpack(scan({ unpack(ins, 1, nstate) }, { unpack(ins, nstate + 1, nins) }, at, ctx))
    end
    -- opset 8: inputs sequence_lens, states..., scan inputs...: all with a leading batch dim, scanned on dim 2
    if ins[1] then refuse("Scan (opset 8): sequence_lens is not supported") end
    if at.scan_input_axes or at.scan_input_directions or at.scan_output_axes or at.scan_output_directions then
      refuse("Scan (opset 8): scan axes and output directions are opset 9's attributes")
    end
    local nstate = nins - 1 - nin
    local batch = V.shape(ins[2])[1]
    if type(batch) ~= "number" then refuse("Scan (opset 8): the batch dim must be static") end
    local per_batch = {}
    for b = 1, batch do
      local states, xs = {}, {}
      for i = 1, nstate do states[i] = T(ins[1 + i]):select(1, b) end
      for j = 1, nin do xs[j] = T(ins[1 + nstate + j]):select(1, b) end
      per_batch[b] = tensors(scan(states, xs, at, ctx), "Scan output")
    end
    local outs = {}
    for k = 1, #per_batch[1] do
      local rows = {}
      for b = 1, batch do rows[b] = per_batch[b][k] end
      outs[k] = F.stack(rows, 1)
    end
    return unpack(outs)
  end)

return OPS
