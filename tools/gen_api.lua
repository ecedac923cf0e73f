-- tools/gen_api.lua: docs/API.md generated from the op table, the exported functions, the nn registry and
-- docs/differences.md. Write it: `make api-doc`; tests/api_doc_spec.lua checks that it is current.
local ds = require("ds")
local D = require("ds.dispatch")
local C = require("ds.ops.common")
local files = require("ds.files")
local args = require("ds.args")
local help = require("ds.help")

local M = {}

local function cell(s) return (tostring(s):gsub("|", "\\|"):gsub("\n", " ")) end

-- a Lua value as written in a call
local function show(v)
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = show(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  elseif type(v) == "string" then return '"' .. v .. '"' end
  return tostring(v)
end


local function attrs_text(def)
  local parts = {}
  for _, a in ipairs(def.attrs) do
    local t = a[1] .. ": " .. (a[2] == "enum" and table.concat(a[4], "/") or a[2])
    if a[3] ~= nil then t = t .. " = " .. show(a[3]) end
    parts[#parts + 1] = t
  end
  return #parts > 0 and table.concat(parts, "; ") or ""
end

local function dtypes_text(def)
  local list = {}
  for dt in pairs(def.dtypes or {}) do list[#list + 1] = dt end
  table.sort(list)
  return #list > 0 and table.concat(list, " ") or "any"
end

-- name(params) of a Lua function from its parameter names
local function fn_signature(name, f)
  f = args.original[f] or f -- a function behind its argument check (lua/ds/args.lua): as written
  local params, info = {}, debug.getinfo(f, "u")
  for i = 1, info.nparams or 0 do params[i] = debug.getlocal(f, i) end
  if info.isvararg then params[#params + 1] = "..." end
  return name .. "(" .. table.concat(params, ", ") .. ")"
end

-- the comment block right above the line where f is defined (its source's description), as one line;
-- "" when there is none. Source files are read once.
local source_lines = {}
local function lines_of(path)
  if not source_lines[path] then
    local t = {}
    local f = io.open(path, "rb")
    if f then for line in f:lines() do t[#t + 1] = line end; f:close() end
    source_lines[path] = t
  end
  return source_lines[path]
end
local function comment_above(lines, line)
  local parts, i = {}, line - 1
  while i >= 1 and lines[i]:match("^%s*%-%-") do
    if not lines[i]:match("%-%-%-%-%s*$") then -- not a "---- section ----"
      table.insert(parts, 1, (lines[i]:gsub("^%s*%-%-+%s?", "")))
    end
    i = i - 1
  end
  return table.concat(parts, " ")
end
local function description(f)
  f = args.original[f] or f
  local info = debug.getinfo(f, "S")
  if not info.source:match("^@") or info.linedefined < 1 then return "" end
  return comment_above(lines_of(info.source:sub(2)), info.linedefined)
end
-- a module class: its _doc (classes made in a loop), the comment above its Module:extend("Name") line,
-- else above its init
local function class_description(name, cls)
  if rawget(cls, "_doc") then return cls._doc end
  local info = debug.getinfo(cls.init, "S")
  if info.source:match("^@") then
    local lines = lines_of(info.source:sub(2))
    for i, line in ipairs(lines) do
      if line:find('extend("' .. name .. '"', 1, true) then
        local d = comment_above(lines, i)
        if d ~= "" then return d end
      end
    end
  end
  return description(cls.init)
end
local function entry(sig, f, d)
  d = d or description(f)
  return "- `" .. sig .. "`" .. (d ~= "" and ": " .. d or "")
end

local function sorted_keys(t, keep)
  local out = {}
  for k, v in pairs(t) do if keep(k, v) then out[#out + 1] = k end end
  table.sort(out)
  return out
end

local function read(path) return files.read_string(path, nil, error) end

-- the reasons rows of the differential harness give for ops not compared with PyTorch
local function harness_skips()
  local out = {}
  for line in read("tests/diff_cases.txt"):gmatch("[^\n]+") do
    local op, reason = line:match("^(%S+).-| skip: (.*)$")
    if op and not line:match("^#") then out[#out + 1] = "- `" .. op .. "`: " .. reason end
  end
  return out
end

-- a class's constructor: new (optimizers, schedulers) or its metatable's __call
local function constructor(v)
  if type(v.new) == "function" then return v.new end
  local mt = getmetatable(v)
  return type(mt) == "table" and type(rawget(mt, "__call")) == "function" and rawget(mt, "__call") or nil
end

-- the public names (help.public_names) the sections above do not list: one entry each, under its library's heading
local function rest_of_ds(fns, mods, fs)
  local listed = {}
  for _, def in ipairs(D.list) do listed[def.name] = true end
  for _, n in ipairs(fns) do listed[n] = true end
  for _, n in ipairs(mods) do listed["nn." .. n] = true end
  for _, n in ipairs(fs) do listed["F." .. n] = true end
  local names = help.public_names(ds)
  local function lib_of(name) return name:match("^(.*)%.[^.]*$") or "" end
  table.sort(names, function(a, b)
    local la, lb = lib_of(a), lib_of(b)
    if la ~= lb then return la < lb end
    return a < b
  end)
  local out, heading = {}, nil
  for _, name in ipairs(names) do
    local v = help.resolve(ds, name)
    local lib = lib_of(name)
    if not listed[name] and lib ~= "Tensor" and lib ~= "F" and not help.is_namespace(v) then -- (a library: its heading)
      if lib ~= heading then
        heading = lib
        out[#out + 1] = ""
        out[#out + 1] = lib == "" and "### ds" or "### ds." .. lib
        out[#out + 1] = ""
      end
      local full = "ds." .. name
      if type(v) == "function" then out[#out + 1] = entry(fn_signature(full, v), v)
      elseif type(v) == "table" and v._is_module and type(v.init) == "function" then
        out[#out + 1] = entry((fn_signature(full, v.init):gsub("%(self,? ?", "(")), v.init)
      elseif type(v) == "table" and rawget(v, "defaults") and rawget(v, "positional") then -- an optimizer
        local keys, d = {}, {}
        for k in pairs(v.defaults) do keys[#keys + 1] = k end
        table.sort(keys)
        for i, k in ipairs(keys) do d[i] = k .. " = " .. show(v.defaults[k]) end
        out[#out + 1] = entry(full .. "(params, " .. table.concat(v.positional, ", ") .. ", {options})", nil,
          "options and defaults: " .. table.concat(d, ", "))
      elseif type(v) == "table" and constructor(v) then
        out[#out + 1] = entry((fn_signature(full, constructor(v)):gsub("%([%w_]+,? ?", "(", 1)), constructor(v))
      elseif type(v) == "table" then
        local n = 0
        for _ in pairs(v) do n = n + 1 end
        out[#out + 1] = "- `" .. full .. "`: a table of " .. n .. " entries"
      else
        out[#out + 1] = "- `" .. full .. " = " .. show(v) .. "`"
      end
    end
  end
  return out
end

-- objects ds returns, made here once, whose methods are listed: (heading, variable, make)
local OBJECTS = {
  { "a compiled function (`cg = ds.compile(fn, specs)`)", "cg", function()
    return ds.compile(ds.loadstring("return function(x) return x * 2 end", "=api")(), { ds.spec({ 2 }) })
  end },
  { "a data loader (`dl = ds.data.DataLoader(dataset, opts)`)", "dl", function()
    return ds.data.DataLoader(ds.data.TensorDataset(ds.ones(4)), { batch_size = 2 })
  end },
  { "a distributed sampler (`s = ds.data.DistributedSampler(dataset, opts)`)", "s", function()
    return ds.data.DistributedSampler(ds.data.TensorDataset(ds.ones(4)), { rank = 1, world_size = 2 })
  end },
}

-- the methods an object's metatable chain offers, sorted: name -> function
local function methods_of(obj)
  local out, seen = {}, {}
  local mt = getmetatable(obj)
  while type(mt) == "table" and type(mt.__index) == "table" and not seen[mt] do
    seen[mt] = true
    for k, v in pairs(mt.__index) do
      if type(k) == "string" and k:match("^%a") and type(v) == "function" and not out[k] then out[k] = v end
    end
    mt = getmetatable(mt.__index)
  end
  return out
end

function M.render()
  local L = {}
  local function add(s) L[#L + 1] = s end
  add("# ds API reference")
  add("")
  add("Generated by `tools/gen_api.lua` (`make api-doc`) from the op table (`lua/ds/ops/*.lua`), the exported")
  add("functions, the `ds.nn` registry and `docs/differences.md`; `tests/api_doc_spec.lua` checks it is current.")
  add("Dims and indices are 1-based (negative from the end). Positional attributes follow the inputs; any")
  add("attribute may also be given in a trailing options table. Every op here traces and compiles unless its")
  add("description says otherwise. Elementwise ops broadcast their inputs, and a Lua number operand becomes a")
  add("constant.")
  add("")
  add("## Ops of the table")
  add("")
  add("| op | call | attributes (defaults) | dtypes | grad | description |")
  add("|---|---|---|---|---|---|")
  local defs = {}
  for _, def in ipairs(D.list) do if not def.internal then defs[#defs + 1] = def end end
  table.sort(defs, function(a, b) return a.name < b.name end)
  for _, def in ipairs(defs) do
      add(string.format("| `%s` | `%s` | %s | %s | %s | %s |", def.name, cell(help.op_call(ds, def)),
        cell(attrs_text(def)),
        dtypes_text(def), def.backward and "yes" or "no", cell(def.doc)))
  end
  add("")
  add("## Functions built from the ops")
  add("")
  add("These compose ops of the table (so they differentiate, trace and compile through them), or run eagerly")
  add("only where the README says so. Methods: `x:name(...)` is `ds.name(x, ...)`.")
  add("")
  local fns = sorted_keys(C.functions, function(k, v) return not D.by_name[k] and type(v) == "function" end)
  for _, name in ipairs(fns) do add(entry(fn_signature("ds." .. name, C.functions[name]), C.functions[name])) end
  add("")
  add("## nn modules (`ds.nn`)")
  add("")
  local mods = sorted_keys(ds.nn, function(name, v)
    return type(v) == "table" and v._is_module == true and v ~= ds.nn.Module end)
  for _, name in ipairs(mods) do
    local sig = fn_signature("ds.nn." .. name, ds.nn[name].init):gsub("%(self,? ?", "(")
    add(entry(sig, nil, class_description(name, ds.nn[name])))
  end
  add("")
  add("Methods every module has (`ds.nn.Module`; a new layer is `ds.nn.Module:extend(\"Name\")`):")
  add("")
  local unchecked = ds.nn.Module._unchecked -- the methods as written (Module's are wrapped by a self check)
  local methods = sorted_keys(ds.nn.Module, function(k, v)
    return type(v) == "function" and not k:match("^_") and debug.getlocal(unchecked[k] or v, 1) == "self" end)
  for _, name in ipairs(methods) do
    local f = unchecked[name] or ds.nn.Module[name]
    add(entry(fn_signature("m:" .. name, f):gsub("%(self,? ?", "("), f))
  end
  add("")
  for _, o in ipairs(OBJECTS) do
    add("Methods of " .. o[1] .. ":")
    add("")
    local ms = methods_of(o[3]())
    for _, name in ipairs(sorted_keys(ms, function() return true end)) do
      add(entry((fn_signature(o[2] .. ":" .. name, ms[name]):gsub("%(self,? ?", "(")), ms[name]))
    end
    add("")
  end
  add("## nn.functional (`ds.F`)")
  add("")
  local fs = sorted_keys(ds.F, function(_, v) return type(v) == "function" end)
  for _, name in ipairs(fs) do add(entry(fn_signature("ds.F." .. name, ds.F[name]), ds.F[name])) end
  add("")
  add("## The rest of ds: compile, trace, save, autograd, optimizers, schedulers, init, data, distributed, onnx, ...")
  add("")
  add("Every other public name (`ds.help`'s list: `?name` at the prompt answers each), by library. Tensor methods")
  add("(`ds.Tensor`) are the ops and functions above (`x:sum(2)` is `ds.sum(x, 2)`) and `?Tensor.name` describes")
  add("each; `ds.nn.functional` is `ds.F`.")
  for _, line in ipairs(rest_of_ds(fns, mods, fs)) do add(line) end
  add("")
  add(read("docs/differences.md"):gsub("%s+$", ""))
  add("")
  add("### Ops the differential harness does not compare with PyTorch (from tests/diff_cases.txt)")
  add("")
  for _, s in ipairs(harness_skips()) do add(s) end
  add("")
  return table.concat(L, "\n")
end

if arg and arg[0] and arg[0]:match("gen_api%.lua$") then
  local f = assert(io.open("docs/API.md", "wb"))
  f:write(M.render())
  f:close()
  print("docs/API.md written")
end

return M
