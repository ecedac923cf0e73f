-- io.lua: ds.save(compiled, "dir/name") -> name.json (the graph as data), name.<crc32>.safetensors (state
-- and constants, named by content) and name.plan (for C programs); ds.load("dir/name") -> a compiled
-- callable, without the model's code. Saves are crash-atomic: the graph file's rename is the one commit
-- point. Loading validates everything (io/graph_reader) and holds the params in memory (io/params).
-- docs/FORMAT.md documents the files.
local ffi = require("ffi")
local cjson = require("cjson.safe")
local errors = require("ds.errors")
local options = require("ds.options")
local Graph = require("ds.graph")
local compile = require("ds.compile")
local lazy = require("ds.lazy")
local version = require("ds.version")
local files = require("ds.files")
local safetensors = require("ds.safetensors")
local params_file = require("ds.io.params")
local writer = require("ds.io.graph_writer")
local reader = require("ds.io.graph_reader")
local plan_writer = require("ds.io.plan_writer")

local M = { MAX_JSON_BYTES = 256 * 2 ^ 20, MAX_LOOP_TRIPS = 1e6 }

-- what ds.save accepts -> a compiled graph
local function saveable(x)
  if Graph.is_graph(x) then return compile.compile_graph(x) end
  if getmetatable(x) == lazy.Lazy then
    -- ds.compile(fn) without specs: one traced signature can be saved
    local entries = {}
    if x.fixed then entries[1] = x.fixed end
    for _, e in pairs(x.cache) do entries[#entries + 1] = e end
    if #entries ~= 1 then
      errors.raise(string.format("save: %s was traced %d times (one graph per signature); save one with "
        .. "ds.compile(fn, specs)", tostring(x), #entries))
    end
    return entries[1].run
  end
  if not compile.is_compiled(x) then errors.raise("save: expects a compiled graph (ds.compile) or a ds.Graph") end
  return x.current and x.current() or x -- compiled from modules: the graph of their current mode
end

local function same_bytes(a, b, n) return ffi.string(a, n) == ffi.string(b, n) end

-- The params file is named by its content, "stem.<crc32>.safetensors" ("-2", "-3"... if another file has
-- that checksum): a file the current graph file names is never overwritten. tmp (written and synced) is
-- renamed there, or removed when an identical file is already there. Returns the file name.
local function commit_params(dir, stem, tmp, p, fail)
  for k = 1, 100 do
    local name = string.format("%s.%s%s.safetensors", stem, p.crc32, k == 1 and "" or ("-" .. k))
    local ok, theirs, size, crc = pcall(files.read, dir .. "/" .. name, nil, error)
    if not ok then files.commit(tmp, dir .. "/" .. name, fail); return name end
    if size == p.size and crc == p.crc32 and same_bytes(p.bytes, theirs, size) then os.remove(tmp); return name end
  end
  fail("100 different params files share checksum " .. p.crc32 .. " in " .. dir)
end

-- after the commit: temporary files of dead savers, params files no graph names, a plan of an older save
local function clean_up(dir, stem, keep, old_params, has_plan, fail)
  for _, target in ipairs { stem .. ".json", stem .. ".safetensors", stem .. ".plan" } do
    files.remove_stale_temps(dir, target, fail)
  end
  local esc = stem:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  for _, name in ipairs(files.list(dir, fail)) do
    local content = name:match("^" .. esc .. "%.(%x%x%x%x%x%x%x%x)%.safetensors$") or
      name:match("^" .. esc .. "%.(%x%x%x%x%x%x%x%x%-%d+)%.safetensors$")
    if content and name ~= keep and not io.open(dir .. "/" .. stem .. "." .. content .. ".json") then
      os.remove(dir .. "/" .. name)
    end
  end
  if old_params and old_params ~= keep then os.remove(dir .. "/" .. old_params) end
  if not has_plan then os.remove(dir .. "/" .. stem .. ".plan") end
end

-- the params file the graph file at path names now (removed after the next commit), or nil
local function current_params(path)
  local ok, text = pcall(files.read_string, path, M.MAX_JSON_BYTES, error)
  local doc = ok and cjson.decode(text)
  local p = type(doc) == "table" and type(doc.params) == "table" and doc.params.file
  return type(p) == "string" and not p:find("/", 1, true) and p:sub(1, 1) ~= "." and p or nil
end

-- a predictor traced in train mode samples unlike the model in eval mode: refused unless opts.allow_train_mode
local function check_mode(compiled, opts)
  local sites = writer.train_sites(compiled.base)
  if #sites == 0 or writer.trains(compiled.base) or opts.allow_train_mode then return end
  errors.raise(string.format("save: %s was traced with its modules in train mode and holds train-mode sites (%s%s); "
    .. "the saved model would not predict as in eval mode: call model:eval() before ds.compile/ds.save, or pass "
    .. "{allow_train_mode = true} to ds.save to keep them (the file then says so: training, train_sites)",
    compiled.ir.name or "the graph", table.concat(sites, ", ", 1, math.min(#sites, 3)),
    #sites > 3 and string.format(" and %d more", #sites - 3) or ""))
end

-- Order: params (synced, named by content), the plan, then the graph file: its rename commits the save,
-- and a crash at any point leaves the previous or the new model loadable. Then the leftovers are removed.
-- Saves into one directory take its lock, so concurrent saves cannot remove each other's files.
-- opts: {allow_train_mode = true} saves a predictor traced in train mode (dropout, batch-norm statistics).
function M.save(compiled, path, opts)
  if type(path) ~= "string" or path == "" then
    errors.raise("save: path must be a non-empty string like \"dir/name\"")
  end
  opts = options.check(opts, "save", { allow_train_mode = "boolean" })
  compiled = saveable(compiled)
  check_mode(compiled, opts)
  local base = path:gsub("%.json$", "")
  local dir, stem = files.split(base)
  local fail = files.raiser("save: ")
  local doc, tensors = writer.document(compiled.base, version)
  for name, t in pairs(tensors) do tensors[name] = t:is_contiguous() and t or t:contiguous() end
  -- the plan is lowered from the fused IR without prepacked weights: the saved IR's states and constants
  local packed = (compiled.stats.prepack or 0) + (compiled.stats.prepack_bf16 or 0)
  local planned = packed > 0 and compile.unpacked(compiled) or compiled
  local names = { state = {}, const = {} }
  for i, st in ipairs(planned.ir.state) do names.state[i] = st.name end
  for i, c in ipairs(planned.ir.consts) do names.const[i] = "const." .. c.value end
  files.with_lock(dir, function()
    local old_params = current_params(base .. ".json")
    local tmp = files.write_temp(base .. ".safetensors", safetensors.chunks(tensors,
      { format = writer.FORMAT, graph = stem }, fail), fail)
    local p = params_file.open(tmp, nil, fail)
    local pname = commit_params(dir, stem, tmp, p, fail)
    doc.params = { file = pname, bytes = p.size, crc32 = p.crc32 }
    local plan, bindings = plan_writer.bytes(planned, planned.ir, names, p.entries, doc.params)
    if plan then
      files.write_atomic(base .. ".plan", { plan }, fail)
      doc.plan = { file = stem .. ".plan", bytes = #plan, bindings = bindings }
    end
    files.write_atomic(base .. ".json", { writer.text(doc) }, fail)
    clean_up(dir, stem, pname, old_params, plan ~= nil, fail)
  end, fail)
  return base
end

-- load options: max_loop_trips (a positive integer or math.huge), the rest go to compile (dce, cse, ...)
local function load_options(opts)
  if opts ~= nil and type(opts) ~= "table" then errors.raise("load: options must be a table") end
  local trips, rest = M.MAX_LOOP_TRIPS, {}
  for k, v in pairs(opts or {}) do
    if k == "max_loop_trips" then
      if type(v) ~= "number" or v < 1 or (v ~= math.huge and v ~= math.floor(v)) then
        errors.raise("load: option 'max_loop_trips' must be a positive integer (or math.huge), got " .. tostring(v))
      end
      trips = v
    else rest[k] = v end
  end
  return trips, rest
end

function M.load(path, opts)
  if type(path) ~= "string" or path == "" then
    errors.raise("load: path must be a non-empty string like \"dir/name\"")
  end
  local trips, copts = load_options(opts)
  local base = path:gsub("%.json$", "")
  local dir = files.split(base)
  local L = { path = base .. ".json", max_loop_trips = trips }
  function L.fail(msg) errors.raise(string.format("load %s: %s", L.path, msg)) end
  local text = files.read_string(L.path, M.MAX_JSON_BYTES, L.fail)
  local doc, jerr = cjson.decode(text)
  if type(doc) ~= "table" then L.fail("not valid JSON (" .. tostring(jerr or "not an object") .. ")") end
  local p = reader.check_document(L, doc, writer.FORMAT, writer.FORMAT_VERSION)
  local params = params_file.open(dir .. "/" .. p.file, p, L.fail)
  local ir = reader.build(L, doc, params)
  -- the loaded model's parameters are its own: inference graphs run with them as constants (freeze)
  if copts.freeze == nil then copts.freeze = true end
  local cg = compile.from_ir(ir, copts, true)
  cg.loaded_from = base
  cg.format_version = doc.format_version
  cg.params_file = p.file
  return cg
end

function M.install(ds)
  ds.save = M.save
  ds.load = M.load
end

return M
