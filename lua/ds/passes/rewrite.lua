-- passes/rewrite.lua: idioms recognized, as data. A rule (passes/rewrite_<idiom>.lua) is a table of patterns over
-- the IR and a function that builds the fused form; this file matches them at every node, whatever produced the
-- graph (ds code, traced primitives, ds.onnx.load), last node first so the largest form is found before its parts.
--
-- A pattern is data:
--   "x"                     any value, captured as m.x; a name seen again must be the same value
--   0.5                     a one-element constant equal to 0.5 (to f32 rounding; -math.huge exactly)
--   { scalar = "eps" }      a one-element constant, its number captured as m.eps
--   { constant = "w" }      a constant value (any shape: a frozen parameter), captured as m.w
--   { alt = { p1, p2 } }    the first alternative that matches (with the rest of the pattern)
--   { "div", p1, p2, as = "y", attrs = { keepdim = true } }
--                           a node of that op (or one of a list of ops) whose inputs match p1, p2 and whose attrs
--                           hold those values; add, mul, maximum, minimum also match with their inputs swapped;
--                           `as` captures its (first) output
-- A rule: { name, exact (the fused kernel gives the unrewritten bits: on by default), tolerance (otherwise: the
-- documented bound, and the rule is opt-in), patterns = { ... }, check(m, ctx) -> bool, rewrite(m, ctx) -> id }.
-- rewrite builds the replacement with ctx.emit(op, inputs, attrs) and returns the value that replaces the root.
-- Every matched node but the root must be read only inside the match (else the match is refused); the
-- replacement takes the root's value id, so readers are unchanged, and the matched nodes are dropped.
local D = require("ds.dispatch")
local S = require("ds.shape")
local IR = require("ds.passes.ir")
local errors = require("ds.errors")

local M = {}

-- the rules, in the order they are tried at a node
M.RULES = {
  require("ds.passes.rewrite_attention"),
  require("ds.passes.rewrite_layer_norm"),
  require("ds.passes.rewrite_gelu"),
  require("ds.passes.rewrite_conv_bn"),
}

local COMMUTATIVE = { add = true, mul = true, maximum = true, minimum = true }
local NODES = {} -- key of a binding's list of matched nodes
local REFUSED = {} -- raised by ctx.emit when the op's infer refuses the inputs: the match is not rewritten

local function extend(b, k, v) return setmetatable({ [k] = v }, { __index = b }) end

local function close(x, n)
  if n == math.huge or n == -math.huge or n == 0 then return x == n end
  return math.abs(x - n) <= 1e-6 * math.abs(n)
end

local function op_is(want, op)
  if type(want) == "string" then return want == op end
  for _, w in ipairs(want) do if w == op then return true end end
  return false
end

local function attrs_hold(want, attrs)
  for k, v in pairs(want or {}) do if attrs[k] ~= v then return false end end
  return true
end

-- match pattern p against value id under binding b; k(binding) continues (nil: backtrack)
local function match(ctx, p, id, b, k)
  local tp = type(p)
  if tp == "string" then
    local cur = b[p]
    if cur == nil then return k(extend(b, p, id)) end
    return cur == id and k(b) or nil
  elseif tp == "number" then
    local x = ctx.scalar(id)
    return x and close(x, p) and k(b) or nil
  elseif p.alt then
    for _, q in ipairs(p.alt) do
      local r = match(ctx, q, id, b, k)
      if r then return r end
    end
    return nil
  elseif p.scalar then
    local x = ctx.scalar(id)
    if x == nil or (b[p.scalar] ~= nil and b[p.scalar] ~= x) then return nil end
    return k(extend(b, p.scalar, x))
  elseif p.constant then
    if ctx.ir.values[id].kind ~= "const" or (b[p.constant] ~= nil and b[p.constant] ~= id) then return nil end
    return k(extend(b, p.constant, id))
  end
  if p.as and b[p.as] ~= nil then return b[p.as] == id and k(b) or nil end
  local v = ctx.ir.values[id]
  local node = v.node
  if v.kind ~= "node" or v.index ~= 1 or ctx.dead[node] or IR.has_effects(node) or node.program
    or not op_is(p[1], node.op) or #node.inputs ~= #p - 1 or not attrs_hold(p.attrs, node.attrs) then
    return nil
  end
  b = extend(b, NODES, { node = node, next = b[NODES] })
  if p.as then b = extend(b, p.as, id) end
  local n = #node.inputs
  local function inputs(order, j, bj)
    if j > n then return k(bj) end
    return match(ctx, p[order[j] + 1], node.inputs[j], bj, function(b2) return inputs(order, j + 1, b2) end)
  end
  local r = inputs({ 1, 2, 3, 4, 5, 6 }, 1, b)
  if r == nil and n == 2 and COMMUTATIVE[node.op] then r = inputs({ 2, 1 }, 1, b) end
  return r
end

-- the matched nodes other than the root are read only by matched nodes
local function closed(ctx, b, root)
  local set = {}
  local l = b[NODES]
  while l do set[l.node] = true; l = l.next end
  local inner = {}
  for node in pairs(set) do
    for _, id in ipairs(node.inputs) do inner[id] = (inner[id] or 0) + 1 end
  end
  for node in pairs(set) do
    if node ~= root then
      for _, id in ipairs(node.outputs) do
        if ctx.escapes[id] or (ctx.uses[id] or 0) ~= (inner[id] or 0) then return nil end
      end
    end
  end
  return set
end

-- the rewriting context of one graph: scalar reader, emitter, use counts
local function context(ir)
  local ctx = { ir = ir, dead = {}, uses = {}, escapes = {} }
  for _, node in ipairs(ir.nodes) do
    for _, id in ipairs(node.inputs) do ctx.uses[id] = (ctx.uses[id] or 0) + 1 end
  end
  for _, id in ipairs(ir.outputs) do ctx.escapes[id] = true end
  for _, w in ipairs(ir.state_writes) do ctx.escapes[w.value] = true end
  local scalars = {}
  function ctx.scalar(id)
    if scalars[id] == nil then
      local v = ir.values[id]
      local t = v.kind == "const" and ir.consts[v.index].tensor
      scalars[id] = t and t:numel() == 1 and t.dtype ~= "bool" and t:item() or false
    end
    return scalars[id] or nil
  end
  function ctx.value(id) return ir.values[id] end
  function ctx.node(id) return ir.values[id].node end
  -- a new node (its attrs completed with the op's defaults, its outputs inferred); the same op on the same
  -- inputs and attrs within one rewrite is emitted once. Returns the output ids; when infer refuses, the rewrite
  -- is abandoned.
  function ctx.emit(op, inputs, attrs)
    local def = D.by_name[op]
    attrs = D.attrs(def, attrs, { symbolic = true })
    local key = op .. "(" .. table.concat(inputs, ",") .. ")" .. IR.attrs_str({ attrs = attrs })
    if ctx.cache[key] then return unpack(ctx.cache[key].outputs) end
    local ok, node = pcall(IR.new_node, ir, def, inputs, attrs, ctx.line)
    if not ok then error(REFUSED, 0) end
    ctx.cache[key] = node
    ctx.emitted[#ctx.emitted + 1] = node
    return unpack(node.outputs)
  end
  -- a new constant holding tensor t
  function ctx.constant(t)
    local id = ir.next_id
    ir.next_id = id + 1
    ir.consts[#ir.consts + 1] = { name = "c" .. id, tensor = t, value = id }
    ir.values[id] = { id = id, shape = t._shape, dtype = t.dtype, kind = "const", index = #ir.consts }
    return id
  end
  -- x as a contiguous value: views other than reshape (which lowers to a contiguous layout) are copied
  function ctx.contiguous(id)
    local node = ir.values[id].node
    if node and node.def.view and node.op ~= "reshape" then return (ctx.emit("contiguous", { id }, {})) end
    return id
  end
  return ctx
end

-- try rule at root; on success the replacement nodes (in order) are returned
local function apply(ctx, rule, root)
  local ir, out = ctx.ir, root.outputs[1]
  for _, p in ipairs(rule.patterns) do
    local set
    local m = match(ctx, p, out, {}, function(b)
      set = closed(ctx, b, root)
      if set and (not rule.check or rule.check(b, ctx)) then return b end
      set = nil
      return nil
    end)
    if m then
      local before = ir.next_id
      ctx.emitted, ctx.cache, ctx.line = {}, {}, root.line
      local ok, id = pcall(rule.rewrite, m, ctx)
      local v, ov = ok and id and ir.values[id], ir.values[out]
      if v and v.kind == "node" and v.dtype == ov.dtype and S.equal(v.shape, ov.shape) then
        local node = v.node
        node.outputs[v.index] = out
        ir.values[id] = nil
        ov.node, ov.index, ov.shape = node, v.index, v.shape
        return set, ctx.emitted
      end
      if not ok and id ~= REFUSED then error(id, 0) end
      for i = before, ir.next_id - 1 do ir.values[i] = nil end -- refused: drop what it emitted (consts too)
      for i = #ir.consts, 1, -1 do if ir.consts[i].value >= before then ir.consts[i] = nil end end
    end
  end
  return nil
end

-- the rules opts.rewrite turns on: true (default) the exact ones; "all" every rule; a table {name = bool} the
-- exact ones plus those named true, minus those named false; false none
function M.enabled(opt)
  local on = {}
  if opt == false then return on end
  if opt ~= nil and opt ~= true and opt ~= "all" and type(opt) ~= "table" then
    errors.raise("compile: option 'rewrite' must be true, false, \"all\" or a table {rule = true|false}")
  end
  local known = {}
  for _, r in ipairs(M.RULES) do known[r.name] = true end
  for k in pairs(type(opt) == "table" and opt or {}) do
    if not known[k] then
      local names = {}
      for _, r in ipairs(M.RULES) do names[#names + 1] = r.name end
      errors.raise(string.format("compile: unknown rewrite rule '%s' (%s)", tostring(k), table.concat(names, ", ")))
    end
  end
  for _, r in ipairs(M.RULES) do
    local want = r.exact
    if opt == "all" then want = true elseif type(opt) == "table" and opt[r.name] ~= nil then want = opt[r.name] end
    if want then on[#on + 1] = r end
  end
  return on
end

-- ir: rewritten in place; opts.rewrite as M.enabled; stats.rewrite_rules receives {rule name = count}.
-- Returns ir, the number of rewrites.
function M.run(ir, opts, stats)
  local rules = M.enabled(opts and opts.rewrite)
  local ctx = context(ir)
  local put, count, per = {}, 0, {}
  for i = #ir.nodes, 1, -1 do
    local root = ir.nodes[i]
    if not ctx.dead[root] and root.outputs[1] then
      for _, rule in ipairs(rules) do
        local set, emitted = apply(ctx, rule, root)
        if set then
          for node in pairs(set) do
            ctx.dead[node] = true
            for _, id in ipairs(node.inputs) do ctx.uses[id] = ctx.uses[id] - 1 end
            for k, id in ipairs(node.outputs) do if node ~= root or k > 1 then ir.values[id] = nil end end
          end
          for _, node in ipairs(emitted) do
            for _, id in ipairs(node.inputs) do ctx.uses[id] = (ctx.uses[id] or 0) + 1 end
          end
          put[root] = emitted
          count, per[rule.name] = count + 1, (per[rule.name] or 0) + 1
          break
        end
      end
    end
  end
  local nodes = {}
  for _, node in ipairs(ir.nodes) do
    if put[node] then for _, n in ipairs(put[node]) do nodes[#nodes + 1] = n end
    elseif not ctx.dead[node] then nodes[#nodes + 1] = node end
  end
  ir.nodes = nodes
  if stats then stats.rewrite_rules = per end
  return ir, count
end

return M
