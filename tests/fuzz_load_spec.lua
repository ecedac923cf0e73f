-- fuzz_load_spec.lua: random mutations of saved graph/params files: ds.load (and running what loads)
-- either works or raises a Lua error -- never crashes the process.
local ds = require("ds")
local cjson = require("cjson")
local H = require("helpers")
local nn = ds.nn

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local base = dir .. "/fz"
local SCALE = tonumber(os.getenv("DS_FUZZ_SCALE")) or 1   -- DS_FUZZ_SCALE=20 for a longer run


-- a small deterministic generator (independent of math.random's state)
local seed = 12345
local function rnd(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end

-- the params file a saved graph names (ds.save names it by content)
local function params_of(path) return dir .. "/" .. cjson.decode(H.read_file(path .. ".json")).params.file end
local function crc32(s) return string.format("%08x", tonumber(require("ds.ffi").C.ds_crc32(s, #s))) end

local function try_load_and_run(x)
  local ok, m = pcall(ds.load, base)
  if not ok then
    assert.are.equal("string", type(m))
    return "error"
  end
  local ok2, err = pcall(function() return m(x) end)
  assert(ok2 or type(err) == "string")
  return ok2 and "ran" or "error"
end

describe("fuzz: ds.load on mutated files", function()
  local json, params, params_path
  local x = ds.randn(3, 8)
  setup(function()
    ds.manual_seed(5)
    local net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 4))
    net:eval()
    local cg = ds.compile(net, { ds.spec({ "batch", 8 }, "f32", "x") })
    cg(x)
    ds.save(cg, base)
    params_path = params_of(base)
    json, params = H.read_file(base .. ".json"), H.read_file(params_path)
  end)
  teardown(function() H.write_file(base .. ".json", json); H.write_file(params_path, params) end)

  it("byte flips, truncations and insertions in either file", function()
    local outcomes = {}
    for _ = 1, 150 * SCALE do
      local j, p = json, params
      local target = rnd(2)
      local s = target == 1 and j or p
      local kind, pos = rnd(3), rnd(#s)
      if kind == 1 then s = s:sub(1, pos - 1) .. string.char(rnd(256) - 1) .. s:sub(pos + 1)
      elseif kind == 2 then s = s:sub(1, pos)
      else s = s:sub(1, pos) .. string.char(rnd(256) - 1) .. s:sub(pos + 1) end
      if target == 1 then j = s else p = s end
      if target == 2 and rnd(2) == 1 then
        -- keep the checksum right so the safetensors header and data checks are what must catch it
        local doc = cjson.decode(j)
        doc.params.bytes = #p
        doc.params.crc32 = crc32(p)
        j = cjson.encode(doc)
      end
      H.write_file(base .. ".json", j); H.write_file(params_path, p)
      local r = try_load_and_run(x)
      outcomes[r] = (outcomes[r] or 0) + 1
    end
    assert.truthy((outcomes.error or 0) > 0)
  end)

  -- random edits of a saved graph document; returns how many loads ran / raised
  local function structural(doc_json, params_bytes, path, ppath, run, n)
    local weird = { -1, 0, 1, 2, 7, 1e300, -1e300, 2 ^ 53, 0.5, "x", true, {}, { 1, 2 }, cjson.null }
    local outcomes = {}
    for _ = 1, n do
      local doc = cjson.decode(doc_json)
      -- collect every (table, key) slot
      local slots = {}
      local function walk(t)
        for k, v in pairs(t) do
          slots[#slots + 1] = { t, k }
          if type(v) == "table" then walk(v) end
        end
      end
      walk(doc)
      for _ = 1, rnd(3) do
        local slot = slots[rnd(#slots)]
        local r = rnd(10)
        if r == 1 then slot[1][slot[2]] = nil
        elseif r == 2 and type(slot[1][slot[2]]) == "number" then slot[1][slot[2]] = slot[1][slot[2]] + rnd(5) - 3
        else slot[1][slot[2]] = weird[rnd(#weird)] end
      end
      local ok, text = pcall(cjson.encode, doc)
      if ok then
        H.write_file(path .. ".json", text); H.write_file(ppath, params_bytes)
        local loaded, m = pcall(ds.load, path)
        local res = "error"
        if loaded then
          local ran, err = pcall(run, m)
          assert(ran or type(err) == "string")
          res = ran and "ran" or "error"
        else
          assert.are.equal("string", type(m))
        end
        outcomes[res] = (outcomes[res] or 0) + 1
      end
    end
    H.write_file(path .. ".json", doc_json); H.write_file(ppath, params_bytes)
    return outcomes
  end

  it("structural edits of the graph document (numbers, ids, lists, fields)", function()
    local outcomes = structural(json, params, base, params_path, function(m) return m(x) end, 200 * SCALE)
    if os.getenv("DS_FUZZ_VERBOSE") then print("structural", outcomes.ran, outcomes.error) end
    assert.truthy((outcomes.error or 0) > 0)
  end)

  -- (a while_loop is left out: an edited loop may legitimately never end)
  it("structural edits of a graph with control flow (the sub-graphs of a cond)", function()
    local f = function(a, k)
      local y = ds.cond(a:sum():gt(0), function(u) return (u * 2):exp() end, function(u) return u - k end, a)
      return y * 3
    end
    local a, k = ds.randn(3, 4), ds.tensor(2)
    local path = dir .. "/fzc"
    ds.save(ds.compile(f, { a, k }), path)
    local outcomes = structural(H.read_file(path .. ".json"), H.read_file(params_of(path)), path, params_of(path),
      function(m) return m(a, k) end, 200 * SCALE)
    if os.getenv("DS_FUZZ_VERBOSE") then print("control", outcomes.ran, outcomes.error) end
    assert.truthy((outcomes.error or 0) > 0 and (outcomes.ran or 0) > 0)
  end)

  it("the C loader (ds_model_load) on mutated plan files", function()
    local ffi = require("ffi")
    local C = require("ds.ffi").C
    local plan = H.read_file(base .. ".plan")
    H.write_file(base .. ".json", json); H.write_file(params_path, params)
    -- most mutants get a matching body size and checksum, so the checks past the checksum must catch them
    local HEADER = ffi.sizeof("ds_planfile_header")
    local function reseal(bytes)
      local h = ffi.new("ds_planfile_header")
      ffi.copy(h, bytes, HEADER)
      local body = bytes:sub(HEADER + 1)
      h.body_bytes = #body; h.body_crc32 = C.ds_crc32(body, #body)
      return ffi.string(h, HEADER) .. body
    end
    local outcomes = {}
    for _ = 1, 300 * SCALE do
      local s, pos = plan, rnd(#plan)
      local kind = rnd(4)
      if kind == 1 then s = s:sub(1, pos - 1) .. string.char(rnd(256) - 1) .. s:sub(pos + 1)
      elseif kind == 2 then s = s:sub(1, pos)
      elseif kind == 3 then
        -- a plausible small integer in an aligned 4-byte field
        local at = (pos - 1) - (pos - 1) % 4
        s = s:sub(1, at) .. ffi.string(ffi.new("int32_t[1]", rnd(40) - 8), 4) .. s:sub(at + 5)
      else
        local at = (pos - 1) - (pos - 1) % 8
        s = s:sub(1, at) .. ffi.string(ffi.new("int64_t[1]", rnd(5000) - 100), 8) .. s:sub(at + 9)
      end
      if rnd(4) > 1 and #s >= HEADER then s = reseal(s) end
      H.write_file(base .. ".plan", s)
      local m = C.ds_model_load(base)
      if m == nil then
        outcomes.error = (outcomes.error or 0) + 1
      else
        local out = ds.empty(3, 4)
        local ins = ffi.new("const ds_tensor*[1]", { x._c })
        local outs = ffi.new("ds_tensor*[1]", { out._c })
        local rc = C.ds_model_run(m, ins, outs)
        outcomes[rc == 0 and "ran" or "error"] = (outcomes[rc == 0 and "ran" or "error"] or 0) + 1
        C.ds_model_free(m)
      end
    end
    H.write_file(base .. ".plan", plan)
    if os.getenv("DS_FUZZ_VERBOSE") then print("plan", outcomes.ran, outcomes.error) end
    assert.truthy((outcomes.error or 0) > 0)
  end)
end)
