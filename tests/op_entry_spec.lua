-- tests/op_entry_spec.lua: an elementwise op is declared once, by its C row: the export C gives Lua matches the
-- rows of src/elementwise.def, the Lua entries agree with their rows or fail at load time naming the op, each op
-- of a row has every touch point docs/INTERNALS.md lists, and that list names every file the ops share.
local ds = require("ds")
local D = require("ds.dispatch")
local H = require("helpers")
local dsffi = require("ds.ffi")
local dtype = require("ds.dtype")
local ffi, lib = dsffi.ffi, dsffi.C

-- the rows of src/elementwise.def as written: {name, kind ("unary" ...), dtypes (a set)}, the dtype lists
-- expanded from src/elementwise_table.h's #defines
local function source_rows()
  local lists = {}
  for name, body in H.read_file("src/elementwise_table.h"):gmatch("#define (EW_%u+)%(M, op%) ([^\n]*)") do
    lists[name] = body
  end
  local function expand(list, out)
    local body = assert(lists[list], "no dtype list " .. list .. " in src/elementwise_table.h")
    for ref in body:gmatch("(EW_%u+)%(M, op%)") do expand(ref, out) end
    for dt in body:gmatch("M%(op, (%w+), [%w_]+%)") do out[dt] = true end
    return out
  end
  local rows = {}
  for name, kind, list in H.read_file("src/elementwise.def"):gmatch("\nEW%(([%w_]+), EW_(%u+), (EW_%u+),") do
    rows[#rows + 1] = { name = name, kind = kind:lower(), dtypes = expand(list, {}) }
  end
  return rows
end

-- the ops of the table each row serves (kernel ds_<row>_%s)
local function ops_of_rows()
  local by_row = {}
  for _, def in ipairs(D.list) do
    local row = def.elementwise and def.kernel and def.kernel:match("^ds_(.-)_%%s$")
    if row then by_row[row] = by_row[row] or {}; table.insert(by_row[row], def) end
  end
  return by_row
end

local function keys(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return table.concat(out, " ")
end

describe("the C rows, as exported", function()
  local rows = source_rows()
  it("ds_ew_count/name/kind/dtypes give the rows of src/elementwise.def in order", function()
    assert.is_true(#rows > 50)
    assert.equal(#rows, lib.ds_ew_count())
    local KINDS = { [0] = "unary", "param", "binary", "compare", "where", "cast" }
    for i, r in ipairs(rows) do
      local op = i - 1
      assert.equal(r.name, ffi.string(lib.ds_ew_name(op)))
      assert.equal(r.kind, KINDS[lib.ds_ew_kind(op)], r.name)
      assert.equal(keys(r.dtypes), keys(dtype.from_bits(lib.ds_ew_dtypes(op))), r.name)
    end
    assert.equal(0, lib.ds_ew_dtypes(#rows))
    assert.equal(0, lib.ds_ew_dtypes(-1))
  end)

  it("every row is an op of the table with the row's kind and dtypes (a subset with `only`, all with `storage`)",
    function()
    local by_row, OP_KIND = ops_of_rows(), { unary = "unary", param = "unary", cast = "unary", binary = "binary",
      compare = "binary", where = "where" }
    for _, r in ipairs(rows) do
      local defs = by_row[r.name]
      assert(defs, "row " .. r.name .. " has no op")
      for _, def in ipairs(defs) do
        assert.equal(OP_KIND[r.kind], def.kind, def.name)
        if r.kind == "cast" then
          assert.equal(keys(dtype.code), keys(def.dtypes), def.name)
        else
          for dt in pairs(def.dtypes) do assert(r.dtypes[dt], def.name .. ": " .. dt .. " not in row " .. r.name) end
        end
      end
    end
    -- the two ops that split a row: true division on floats, floor division on integers
    assert.equal("f32 f64", keys(D.by_name.div.dtypes))
    assert.equal("i32 i64", keys(D.by_name.floor_divide.dtypes))
    assert.equal("bool", ds.lt(ds.ones(2), 1).dtype)
  end)
end)

describe("an entry that disagrees with its row fails at load time, naming the op", function()
  local source = H.read_file("lua/ds/ops/elementwise.lua")
  local MARK = "\n-- ---- the entries checked against the C rows"
  assert(source:find(MARK, 1, true), "ops/elementwise.lua has lost the line this spec patches before")
  -- loads ds with ops/elementwise.lua replaced by patched, in a fresh luajit; returns what the load said
  local function load_patched(patched)
    local path = os.tmpname()
    H.write_file(path, patched)
    local code = string.format("package.preload[%q] = assert(loadfile(%q)); local ok, e = pcall(require, %q); "
      .. "io.write(ok and \"LOADED\" or tostring(e))", "ds.ops.elementwise", path, "ds")
    local p = io.popen("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit -e '" .. code .. "' 2>&1")
    local out = p:read("*a")
    p:close()
    os.remove(path)
    return out
  end
  local at = source:find(MARK, 1, true)
  local function with_lines(lines) return source:sub(1, at) .. lines .. source:sub(at) end

  it("the unpatched file loads (the harness works)", function()
    assert.equal("LOADED", load_patched(source))
  end)
  local cases = {
    { "a row without an entry", (source:gsub("\nE%.log2 = %b{}", "")),
      "ops/elementwise.lua: log2: a row of src/elementwise.def with no entry here" },
    { "an entry without a row", with_lines('E.no_such_op = { doc = "x", promote = float }'),
      "ops/elementwise.lua: no_such_op: no row 'no_such_op' in src/elementwise.def" },
    { "an entry restating its dtypes", with_lines("E.exp.dtypes = C.FLOAT"),
      "ops/elementwise.lua: exp: the entry sets 'dtypes', which comes from its row of src/elementwise.def" },
    { "an entry restating its kind", with_lines('E.add.kind = "binary"'), "ops/elementwise.lua: add: the entry sets 'kind'" },
    { "only = a dtype its row lacks", with_lines('E.floor_divide.only = { "u8" }'),
      "ops/elementwise.lua: floor_divide: only = u8, which its row 'div' has no kernel for" },
    { "a param row without its two params", with_lines("E.clamp.attrs = nil"),
      "ops/elementwise.lua: clamp: a param row's two params" },
    { "an entry without a doc", with_lines("E.sin.doc = nil"), "ops/elementwise.lua: sin: the entry has no doc" },
    { "an entry without an ONNX form or reason", with_lines("E.sin.onnx = nil"),
      "ops/elementwise.lua: sin: the entry needs its ONNX form" },
    { "an entry with a form and a reason", with_lines('E.sin.no_onnx = "x"'),
      "ops/elementwise.lua: sin: the entry needs its ONNX form" },
    { "a one-node ONNX form on a where row", with_lines('E.where.onnx = "Where"'),
      'ops/elementwise.lua: where: onnx = "Where" on a where row' },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local out = load_patched(c[2])
      assert(out:find(c[3], 1, true), "expected '" .. c[3] .. "', got: " .. out)
    end)
  end
end)

-- the "Touch points: adding an elementwise op" section of docs/INTERNALS.md
local function touch_section()
  local doc = H.read_file("docs/INTERNALS.md")
  local section = doc:match("\n## Touch points: adding an elementwise op\n(.-)\n## ")
  assert(section, "docs/INTERNALS.md has no 'Touch points: adding an elementwise op' section")
  return section
end

describe("docs/INTERNALS.md's touch points for an elementwise op", function()
  it("names files that exist, make targets the Makefile has, generators that exist", function()
    local section, makefile = touch_section(), H.read_file("Makefile")
    local n = 0
    for path in section:gmatch("`([%w_%-/]+%.%a+)`") do
      if path:find("/") then
        n = n + 1
        assert(io.open(path, "r"), "INTERNALS names " .. path .. ", which does not exist"):close()
      end
    end
    assert.is_true(n >= 8)
    for target in section:gmatch("`make ([%w%-]+)`") do
      assert(makefile:find("\n" .. target:gsub("%-", "%%-") .. ":"), "INTERNALS names make " .. target .. ", not a target")
    end
    assert(section:find("`make api-doc`", 1, true))
  end)

  -- the files each unary row's op is named in (a word) or, for its math, el_<op>_<dtype> is in: the intersection over
  -- all unary rows is what adding one more touches, generated files included
  it("lists every file that every unary op of the C table is named in", function()
    local files = {}
    local p = io.popen("find src lua tests docs tools Makefile -type f ! -name '*.gz' ! -name '*.onnx' ! -name '*.pb'")
    for path in p:lines() do files[#files + 1] = path end
    p:close()
    local unary = {}
    for _, r in ipairs(source_rows()) do if r.kind == "unary" then unary[#unary + 1] = r.name end end
    assert.is_true(#unary > 30)
    local shared
    for _, path in ipairs(files) do
      local text = H.read_file(path)
      local words = {}
      for w in text:gmatch("[%w_]+") do words[w] = true end
      local all = true
      for _, op in ipairs(unary) do
        local named = words[op] or words["el_" .. op .. "_"] -- el_<op>_##S in a macro
        for dt in pairs(dtype.code) do named = named or words["el_" .. op .. "_" .. dt] end
        if not named then all = false; break end
      end
      if all then shared = shared or {}; shared[#shared + 1] = path end
    end
    table.sort(shared)
    local section, missing = touch_section(), {}
    for _, path in ipairs(shared) do
      if not section:find("`" .. path .. "`", 1, true) then missing[#missing + 1] = path end
    end
    assert.same({}, missing)
    -- the math, the row, the entry: the three places every unary op is declared are among them
    for _, path in ipairs { "src/elementwise_ops.h", "src/elementwise.def", "lua/ds/ops/elementwise.lua" } do
      assert(table.concat(shared, " "):find(path, 1, true), path)
    end
  end)

  it("every op of a C row has its fixture case, differential row, ONNX form or refusal and API doc row", function()
    local FORMS, NO_FORM = require("ds.onnx.export").FORMS, require("ds.onnx.export_ops").NO_FORM
    local fixture, diff_rows, api = {}, {}, H.read_file("docs/API.md")
    for _, c in ipairs(H.fixture("elementwise.json").cases) do fixture[c.op] = true end
    for ops in H.read_file("tests/diff_cases.txt"):gmatch("\n([%w_ ]+) |") do
      for op in ops:gmatch("[%w_]+") do diff_rows[op] = true end
    end
    -- contiguous is a copy with no math: its differential rows cover it (tests/elementwise_spec.lua alike)
    local NO_FIXTURE = { contiguous = true }
    local missing = {}
    for row, defs in pairs(ops_of_rows()) do
      for _, def in ipairs(defs) do
        local name = def.name
        if not fixture[name] and not NO_FIXTURE[name] then
          missing[#missing + 1] = name .. " (row " .. row .. "): no case in tests/gen_elementwise_fixtures.py"
        end
        if not diff_rows[name] then missing[#missing + 1] = name .. ": no row in tests/diff_cases.txt" end
        if not FORMS[name] and not NO_FORM[name] then
          missing[#missing + 1] = name .. ": no ONNX form (onnx =) or reason (no_onnx =) in its entry"
        end
        if not api:find("\n| `" .. name .. "` |", 1, true) then
          missing[#missing + 1] = name .. ": no row in docs/API.md (make api-doc)"
        end
      end
    end
    table.sort(missing)
    assert.same({}, missing)
  end)
end)

describe("tests/unary_cases.txt, the one fixture row of a unary float op", function()
  local cases = {}
  for line in H.read_file("tests/unary_cases.txt"):gmatch("[^\n]+") do
    if not line:find("^#") then cases[#cases + 1] = line:match("^([%w_]+) |") end
  end
  it("names unary ops of the C table computed in floats", function()
    assert.is_true(#cases >= 9)
    for _, name in ipairs(cases) do
      local def = D.by_name[name]
      assert(def and def.ew_kind == "unary", "tests/unary_cases.txt: " .. name .. " is not a unary row's op")
      assert.equal("f32 f64", keys(def.dtypes), name)
    end
  end)
  it("has its differential rows in tests/diff_cases.txt's generated block, in order (current)", function()
    local text = H.read_file("tests/diff_cases.txt")
    local at = text:find("\n# ---- generated from tests/unary_cases.txt", 1, true)
    assert(at, "tests/diff_cases.txt has no generated block (run /usr/bin/python3 tests/gen_diff_fixtures.py)")
    local rows = {}
    for op in text:sub(at + 1):gmatch("\n([%w_]+) | x=f64") do rows[#rows + 1] = op end
    assert.same(cases, rows)
  end)
end)
