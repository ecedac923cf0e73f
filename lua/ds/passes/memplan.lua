-- passes/memplan.lua: memory planning over lowered steps: liveness of every arena buffer over the
-- step order, in-place reuse (an elementwise step writes over an input that dies there, same layout
-- and element size), then first-fit offsets in ONE arena. Nothing is allocated per run.
local dtype = require("ds.dtype")
local layout = require("ds.passes.layout")

local ALIGN = 64

local function bytes_of(r) return layout.numel(r.shape) * dtype.size[r.dtype] end

local function whole(l)
  local r = l.root
  if l.offset ~= 0 or layout.numel(l.shape) ~= layout.numel(r.shape) then return false end
  local st = layout.contiguous_strides(l.shape)
  for i = 1, #l.shape do if l.shape[i] ~= 1 and l.strides[i] ~= st[i] then return false end end
  return true
end

-- L from lower.build; sets root.offset for arena roots; returns arena_bytes, eager_bytes, stats
return function(L)
  -- canonical root after in-place merges
  local alias = {}
  local function canon(r) while alias[r] do r = alias[r] end return r end
  local last = {}
  for i, s in ipairs(L.steps) do
    for _, l in ipairs(s.ins) do last[l.root] = i end
    for _, l in ipairs(s.outs) do last[l.root] = math.max(last[l.root] or 0, i) end
  end
  local inplace = 0
  for i, s in ipairs(L.steps) do
    if s.inplace_ok then
      local taken = {}
      for _, o in ipairs(s.outs) do
        local ro = o.root
        if ro.kind == "arena" and not alias[ro] and whole(o) then
          for _, l in ipairs(s.ins) do
            local ri = canon(l.root)
            if ri.kind == "arena" and not taken[ri] and last[l.root] == i and whole(l)
              and dtype.size[ri.dtype] == dtype.size[ro.dtype] and bytes_of(ri) == bytes_of(ro) then
              -- every other operand reading this root must read it the same way
              local same = true
              for _, l2 in ipairs(s.ins) do
                if canon(l2.root) == ri and not whole(l2) then same = false end
              end
              if same then
                alias[ro] = ri; taken[ri] = true; inplace = inplace + 1
                break
              end
            end
          end
        end
      end
    end
  end
  -- live ranges of canonical arena roots
  local first, lastc = {}, {}
  for i, s in ipairs(L.steps) do
    for _, group in ipairs { s.outs, s.ins } do
      for _, l in ipairs(group) do
        local r = canon(l.root)
        if r.kind == "arena" then
          first[r] = first[r] or i
          lastc[r] = math.max(lastc[r] or 0, i)
        end
      end
    end
  end
  -- first-fit placement; a block is free after its last step
  local live, arena, eager = {}, 0, 0
  local order = {}
  for r in pairs(first) do order[#order + 1] = r end
  table.sort(order, function(a, b) if first[a] ~= first[b] then return first[a] < first[b] end return a.id < b.id end)
  for _, r in ipairs(L.roots) do
    if r.kind == "arena" or r.kind == "output" then eager = eager + bytes_of(r) end
  end
  for _, r in ipairs(order) do
    local start = first[r]
    local kept = {}
    for _, b in ipairs(live) do if lastc[b.root] >= start then kept[#kept + 1] = b end end
    table.sort(kept, function(a, b) return a.offset < b.offset end)
    live = kept
    local size = math.max(ALIGN, math.ceil(bytes_of(r) / ALIGN) * ALIGN)
    local off = 0
    for _, b in ipairs(live) do
      if b.offset - off >= size then break end
      off = math.max(off, b.offset + b.size)
    end
    r.offset = off
    live[#live + 1] = { root = r, offset = off, size = size }
    arena = math.max(arena, off + size)
  end
  for _, r in ipairs(L.roots) do
    if alias[r] then r.offset = canon(r).offset end
  end
  return arena, eager, { inplace = inplace, buffers = #order }
end
