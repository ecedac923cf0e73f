-- io/plan_writer.lua: name.plan, the lowered plans of a compiled graph for C programs (src/model.c reads
-- it; structs in src/ds.h, layout in docs/FORMAT.md): a header with the body's checksum and the params
-- file's name, size and checksum; the elementwise op names by opcode; one record per shape binding planned.
local ffi = require("ffi")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local C = require("ds.ffi").C   -- ds.ffi declares the ds_planfile_* structs (src/ds.h)

-- MAX_LOOP_TRIPS: a loop step's bound in the file (at most ds.load's default, lua/ds/io.lua; src/model.c's limit)
local M = { MAGIC = "DSPLAN02", VERSION = 2, MAX_LOOP_TRIPS = 1e6 }
local ROLE = { arena = C.DS_ROLE_ARENA, input = C.DS_ROLE_INPUT, output = C.DS_ROLE_OUTPUT, state = C.DS_ROLE_STATE,
               const = C.DS_ROLE_CONST, view = C.DS_ROLE_VIEW }

local function bytes_of(ct, n, init) return ffi.string(ffi.new(ct, n, init), ffi.sizeof(ct, n)) end

-- a plan's log as a record (ninputs, noutputs: its header's counts); role(r, id, b) fills buffer record r's role
-- and index (and data range) for log buffer b (id: 0-based). A loop step's sub-plans follow it as records of their
-- own whose inputs are the loop's sources (loop variables, then extras) and whose outputs are the cond's predicate
-- or the body's next loop variables (docs/FORMAT.md).
local function sub_role(binds, cond)
  local src = {}
  for _, b in ipairs(binds) do src[b[1]] = b[2] end
  return function(r, id, b)
    local s = src[id]
    if s == nil then
      if b.kind == C.DS_BUF_EXTERNAL then errors.raise("save: a loop sub-plan's external buffer is not bound") end
      r.role = ROLE[b.role]
    elseif s >= 0 then r.role, r.index = C.DS_ROLE_INPUT, s + 1
    else r.role, r.index = C.DS_ROLE_OUTPUT, cond and 1 or -s - 1 end
  end
end

local function record(log, ninputs, noutputs, role)
  local h = ffi.new("ds_planfile_record")
  h.nbuffers = #log.buffers; h.nsteps = #log.steps
  h.ninputs = ninputs; h.noutputs = noutputs; h.arena_bytes = log.arena_bytes
  local parts = { ffi.string(h, ffi.sizeof(h)) }
  for id, b in ipairs(log.buffers) do
    local r = ffi.new("ds_planfile_buffer")
    r.kind = b.kind; r.base = b.base; r.dtype = dtype.code[b.dtype]; r.ndim = #b.shape
    r.offset = b.offset
    for i, d in ipairs(b.shape) do r.shape[i - 1] = d end
    if b.strides then r.has_strides = 1; for i, d in ipairs(b.strides) do r.strides[i - 1] = d end end
    role(r, id - 1, b)
    parts[#parts + 1] = ffi.string(r, ffi.sizeof(r))
  end
  for _, st in ipairs(log.steps) do
    local r = ffi.new("ds_planfile_step")
    if #st.kernel > 63 then errors.raise("save: kernel name " .. st.kernel .. " is longer than 63 bytes") end
    ffi.copy(r.kernel, st.kernel)
    local attrs = st.cond and { st.nvars, math.min(st.max_trips or math.huge, M.MAX_LOOP_TRIPS) } or st.attrs
    r.nbuf = #st.buffers; r.nattrs = #attrs
    parts[#parts + 1] = ffi.string(r, ffi.sizeof(r))
    parts[#parts + 1] = bytes_of("int32_t[?]", #st.buffers, st.buffers)
    if #attrs > 0 then parts[#parts + 1] = bytes_of("double[?]", #attrs, attrs) end
    if st.cond then
      parts[#parts + 1] = record(st.cond.log, st.nvars + st.nextra, 1, sub_role(st.cond.binds, true))
      parts[#parts + 1] = record(st.body.log, st.nvars + st.nextra, st.nvars, sub_role(st.body.binds, false))
    end
  end
  return table.concat(parts)
end

-- the roles of a model plan's buffers: inputs, outputs, state and constants with their bytes in the params file
local function model_role(names, entries)
  return function(r, _, b)
    r.role = ROLE[b.role] or errors.raise("save: plan buffer role " .. tostring(b.role))
    r.index = b.index or 0
    if b.role == "state" or b.role == "const" then
      local e = entries[names[b.role][b.index]]
      r.data_offset, r.data_bytes = e.offset, e.nbytes
    end
  end
end

-- The plan file of compiled (ir: its fused IR; names: state/const index -> params tensor name; entries:
-- the params file's, safetensors.parse; params: {file, bytes, crc32 (hex)}), or nil when it has no C
-- plan (control nodes, gradient writes, a dynamic graph never called). Returns bytes and the bindings.
function M.bytes(compiled, ir, names, entries, params)
  local keys = {}
  for k in pairs(compiled._plans) do keys[#keys + 1] = k end
  if #keys == 0 then
    if sym.contains(ir.specs) then return nil end
    compiled:plan_for({})
    keys[1] = next(compiled._plans)
  end
  table.sort(keys)
  local records, bindings = {}, {}
  for i, k in ipairs(keys) do
    local p = compiled._plans[k]
    for _, seg in ipairs(p.segments) do if seg.lua then return nil end end
    if #p.L.grads > 0 then return nil end
    records[i] = record(p.log, #ir.inputs, #ir.outputs, model_role(names, entries))
    local env = {}
    for name, v in pairs(p.env) do env[name] = v end
    bindings[i] = env
  end
  -- the elementwise op names in this engine's opcode order: a reader with other numbers refuses by name
  local nops = C.ds_ew_count()
  local ops = ffi.new("ds_planfile_opname[?]", nops)
  for i = 0, nops - 1 do ffi.copy(ops[i].name, ffi.string(C.ds_ew_name(i))) end
  local body = ffi.string(ops, ffi.sizeof(ops)) .. table.concat(records)
  if #params.file > 255 then errors.raise("save: params file name " .. params.file .. " is longer than 255 bytes") end
  local h = ffi.new("ds_planfile_header")
  ffi.copy(h.magic, M.MAGIC, 8)
  h.version = M.VERSION; h.nrecords = #records; h.nops = nops
  h.params_crc32 = tonumber(params.crc32, 16); h.params_bytes = params.bytes
  h.body_crc32 = C.ds_crc32(body, #body); h.body_bytes = #body
  ffi.copy(h.params_file, params.file)
  return ffi.string(h, ffi.sizeof(h)) .. body, bindings
end

return M
