-- tests/layering_spec.lua: every lua/ds module requires downward only: at the top of the file (never inside a
-- function), with a literal module name, only modules of its own layer or below, and without cycles.
-- LAYERS (low to high) is the one declaration of the layering; docs/INTERNALS.md draws it.
local LAYERS = {
  { name = "foundation", modules = { "ds.errors", "ds.dtype", "ds.state", "ds.ffi", "ds.clock", "ds.version" } },
  { name = "tensor", modules = { "ds.shape", "ds.options", "ds.args", "ds.tensor", "ds.tape" } },
  { name = "dispatch", modules = { "ds.dispatch" } },
  { name = "op helpers", modules = { "ds.ops.common", "ds.sym", "ds.autograd" } },
  { name = "op families", modules = { "ds.ops", "ds.ops.*", "ds.random", "ds.print", "ds.gradcheck", "ds.linalg" } },
  { name = "library", modules = { "ds.nn", "ds.nn.*", "ds.optim", "ds.optim.*", "ds.data", "ds.data.*",
                                  "ds.files", "ds.safetensors", "ds.state_file", "ds.progress", "ds.help",
                                  "ds.pretty", "ds.plot", "ds.graphviz", "ds.profile_view", "ds.distributed",
                                  "ds.distributions", "ds.autograd_function", "ds.autograd_functional" } },
  { name = "graph", modules = { "ds.graph", "ds.graph_dot", "ds.trace", "ds.control", "ds.ops.control" } },
  { name = "conversion", modules = { "ds.convert", "ds.convert.*" } },
  { name = "compiler", modules = { "ds.passes.*", "ds.compile", "ds.lazy", "ds.generate", "ds.generator" } },
  { name = "files", modules = { "ds.io", "ds.io.*", "ds.onnx", "ds.onnx.*", "ds.onnx.handlers.*" } },
  { name = "namespace", modules = { "ds" } },
  { name = "front ends", modules = { "ds.repl", "ds.serve", "ds.serve.*" } },
}

-- the layer index of a module: its own entry, else its directory's ("ds.ops.*"), else nil
local function layer_of(mod)
  local by_dir
  for i, layer in ipairs(LAYERS) do
    for _, pat in ipairs(layer.modules) do
      if pat == mod then return i end
      local dir = pat:match("^(.*)%.%*$")
      if dir and mod:sub(1, #dir + 1) == dir .. "." and not mod:find(".", #dir + 2, true) then by_dir = i end
    end
  end
  return by_dir
end

-- ---- a small Lua lexer: names, strings (with their value), punctuation; comments dropped ----
local function long_bracket(src, i) -- at "[": level of "[==[" or nil
  local eqs = src:match("^%[(=*)%[", i)
  return eqs and #eqs or nil
end

local function tokens(src)
  local out, i, line, n = {}, 1, 1, #src
  local function add(kind, value) out[#out + 1] = { kind = kind, value = value, line = line } end
  while i <= n do
    local c = src:sub(i, i)
    if c == "\n" then line = line + 1; i = i + 1
    elseif c:match("%s") then i = i + 1
    elseif src:sub(i, i + 1) == "--" then
      local lvl = src:sub(i + 2, i + 2) == "[" and long_bracket(src, i + 2)
      local stop
      if lvl then stop = select(2, src:find("]" .. ("="):rep(lvl) .. "]", i, true))
      else stop = (src:find("\n", i, true) or n + 1) - 1 end
      stop = stop or n
      local _, nl = src:sub(i, stop):gsub("\n", "")
      line = line + nl
      i = stop + 1
    elseif c == "[" and long_bracket(src, i) then
      local lvl = long_bracket(src, i)
      local open_end = i + lvl + 1
      local close = src:find("]" .. ("="):rep(lvl) .. "]", open_end + 1, true) or n
      local body = src:sub(open_end + 1, close - 1)
      add("string", body)
      local _, nl = body:gsub("\n", "")
      line = line + nl
      i = close + lvl + 2
    elseif c == '"' or c == "'" then
      local j, buf = i + 1, {}
      while j <= n and src:sub(j, j) ~= c do
        if src:sub(j, j) == "\\" then j = j + 1 end
        buf[#buf + 1] = src:sub(j, j)
        j = j + 1
      end
      add("string", table.concat(buf))
      i = j + 1
    elseif c:match("[%a_]") then
      local word = src:match("^[%w_]+", i)
      add("name", word)
      i = i + #word
    elseif c:match("%d") then
      local num = src:match("^[%w_%.]+", i)
      add("number", num)
      i = i + #num
    else
      add("punct", c)
      i = i + 1
    end
  end
  return out
end

-- every `require` of a file: {module = name or nil (not a literal), line, in_function}
local OPENERS = { ["function"] = true, ["if"] = true, ["do"] = true, ["repeat"] = true }
local function requires_of(src)
  local toks, found, stack = tokens(src), {}, {}
  local depth_fn = 0
  for k, t in ipairs(toks) do
    local prev = toks[k - 1]
    local before = toks[k - 2]
    local is_field = prev and prev.kind == "punct" and (prev.value == ":" or prev.value == "."
      and not (before and before.kind == "punct" and before.value == ".")) -- a.b, a:b; not "s" .. name
    if t.kind == "name" and not is_field then
      if OPENERS[t.value] then
        stack[#stack + 1] = t.value
        if t.value == "function" then depth_fn = depth_fn + 1 end
      elseif t.value == "end" or t.value == "until" then
        if stack[#stack] == "function" then depth_fn = depth_fn - 1 end
        stack[#stack] = nil
      elseif t.value == "require" then
        local nxt = toks[k + 1]
        if nxt and nxt.kind == "punct" and nxt.value == "(" then nxt = toks[k + 2] end
        found[#found + 1] = { module = nxt and nxt.kind == "string" and nxt.value or nil, line = t.line,
                              in_function = depth_fn > 0 }
      end
    end
  end
  return found
end

-- ---- the modules under lua/ds ----
local function module_files()
  local p = io.popen("cd lua && find ds -name '*.lua' | sort")
  local list = {}
  for path in p:lines() do
    local mod = path:gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
    list[#list + 1] = { path = "lua/" .. path, module = mod }
  end
  p:close()
  return list
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- ---- every dependency a require: writes into other modules' tables, ops found by a literal name ----
-- a module writes only into its own tables: at the top of a file, a field assignment into a table another module
-- returned (`require("ds.x").f = v`; `local X = require("ds.x")` then `X.f = v` or `function X.f() end`) is
-- refused, except into these targets (or "writer>target" pairs), each with its reason
local FOREIGN_WRITES_OK = {
  ["ds.tape"] = "autograd.lua installs the in-place rules that the tape (below dispatch) calls",
  ["ds>ds.autograd"] = "the namespace hangs autograd.Function and autograd.functional (higher layers) on ds.autograd",
}
-- `D.by_name.<op>` / `D.by_name["<op>"]` with a literal name, where the op's defining module is not reachable
-- through the file's requires: allowed in these modules only (a dynamic name from IR data is not checked)
local BY_NAME_OK = {
  ["ds.dispatch"] = "the dispatcher sits below the op families: its casts, 0-d constants and contiguous copies find "
    .. "astype / full / contiguous when called",
  ["ds.autograd"] = "below the op families: its index gradient finds arange when called",
  ["ds.control"] = "ds.ops.control defines cond / while_loop / print over ds.control (requiring it back is a cycle)",
}

-- the foreign-table writes and literal by-name lookups at the top of a file: {kind = "write"|"by_name", target, line}
local function references_of(src)
  local toks, out, aliases, stack, depth = tokens(src), {}, {}, {}, 0
  local function v(k) return toks[k] and toks[k].value end
  for k, t in ipairs(toks) do
    local prev = toks[k - 1]
    local field = prev and prev.kind == "punct" and (prev.value == "." or prev.value == ":")
    if t.kind == "name" and not field then
      if OPENERS[t.value] then
        stack[#stack + 1] = t.value
        if t.value == "function" then depth = depth + 1 end
      elseif t.value == "end" or t.value == "until" then
        if stack[#stack] == "function" then depth = depth - 1 end
        stack[#stack] = nil
      end
    end
    if t.kind == "name" and t.value == "by_name" and field then
      local op = (v(k + 1) == "." and toks[k + 2] and toks[k + 2].kind == "name" and v(k + 2))
        or (v(k + 1) == "[" and toks[k + 2] and toks[k + 2].kind == "string" and v(k + 3) == "]" and v(k + 2))
      if op then out[#out + 1] = { kind = "by_name", target = op, line = t.line } end
    end
    if t.kind == "name" and t.value == "local" and v(k + 2) == "=" and v(k + 3) == "require" then
      local n = v(k + 4) == "(" and toks[k + 5] or toks[k + 4]
      if n and n.kind == "string" then aliases[v(k + 1)] = n.value end
    end
    local starts = not (prev and (prev.kind == "punct" and prev.value:match("[=(,{%[<>~%+%-%*/%%%^#%.]")
      or prev.kind == "name" and (prev.value == "return" or prev.value == "local" or prev.value == "and"
        or prev.value == "or" or prev.value == "not" or prev.value == "in")))
    if depth == 0 and t.kind == "name" and not field and starts and (aliases[t.value] or t.value == "require") then
      local j, target = k + 1, aliases[t.value]
      if t.value == "require" then
        local n = v(j) == "(" and toks[j + 1] or toks[j]
        target = n and n.kind == "string" and n.value
        j = v(j) == "(" and j + 3 or j + 1
      end
      local fields = 0
      while v(j) == "." and toks[j + 1] and toks[j + 1].kind == "name" do j = j + 2; fields = fields + 1 end
      if target and fields > 0 and v(j) == "=" and v(j + 1) ~= "=" then
        out[#out + 1] = { kind = "write", target = target, line = t.line }
      end
    end
    if depth == 1 and t.kind == "name" and t.value == "function" and not field and toks[k + 1]
      and aliases[v(k + 1)] and (v(k + 2) == "." or v(k + 2) == ":") then
      out[#out + 1] = { kind = "write", target = aliases[v(k + 1)], line = t.line }
    end
  end
  return out
end

-- op name -> the module whose code defined it (D.define wrapped while a fresh luajit loads ds)
local function op_definers()
  local code = [[
    local D = require("ds.dispatch")
    local define = D.define
    D.define = function(def)
      for lvl = 2, 30 do
        local info = debug.getinfo(lvl, "S")
        if not info then break end
        local src = info.source:match("^@%.?/?lua/(ds/.+)%.lua$")
        if src and src ~= "ds/dispatch" then
          io.write(def.name, " ", (src:gsub("/init$", ""):gsub("/", ".")), "\n")
          break
        end
      end
      return define(def)
    end
    require("ds")]]
  local p = io.popen("LUA_PATH='./lua/?.lua;./lua/?/init.lua;;' luajit -e '" .. code .. "' 2>&1")
  local out = {}
  for line in p:lines() do
    local op, mod = line:match("^(%S+) (ds[%w_.]*)$")
    assert(op, "loading ds to find the ops' modules: " .. line)
    out[op] = mod
  end
  p:close()
  return out
end

describe("layering of lua/ds", function()
  local files = module_files()
  local graph, problems = {}, {}
  local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  for _, f in ipairs(files) do
    local mine = layer_of(f.module)
    if not mine then problem("%s: no layer declared for %s (add it to LAYERS in tests/layering_spec.lua)", f.path, f.module) end
    graph[f.module] = {}
    for _, r in ipairs(requires_of(read(f.path))) do
      local where = f.path .. ":" .. r.line
      if not r.module then
        problem("%s: require of a computed name (name the module literally)", where)
      elseif r.module == "ds" or r.module:sub(1, 3) == "ds." then
        graph[f.module][#graph[f.module] + 1] = r.module
        local theirs = layer_of(r.module)
        if r.in_function then problem("%s: require(%q) inside a function (require at the top of the file)", where, r.module) end
        if mine and theirs and theirs > mine then
          problem("%s: %s (layer %s) requires %s from the higher layer %s", where, f.module, LAYERS[mine].name,
            r.module, LAYERS[theirs].name)
        end
      end
    end
  end

  it("finds the modules and their requires", function()
    assert.is_true(#files > 40)
    assert.is_true(layer_of("ds.ops.elementwise") == layer_of("ds.ops"))
    assert.same({ "ds.errors" }, graph["ds.shape"])
    local sample = requires_of("local a = require('ds.x')\nlocal function f() return require \"ds.y\" end\n"
      .. "--[[ require('ds.z') ]]\nlocal s = [[require('ds.w')]]\npcall(require, 'ds.v')\n"
      .. "for i = 1, 2 do local g = function() return 'a' .. require('ds.u').x end end")
    assert.same({ { module = "ds.x", line = 1, in_function = false }, { module = "ds.y", line = 2, in_function = true },
                  { module = nil, line = 5, in_function = false }, { module = "ds.u", line = 6, in_function = true } },
                sample)
  end)

  it("requires at the top, literally, downward only", function()
    assert.same({}, problems)
  end)

  it("is drawn in docs/INTERNALS.md: every layer, top down, naming each of its modules", function()
    local doc = read("docs/INTERNALS.md")
    local block = assert(doc:match("## The layers of lua/ds.-```\n(.-)```"), "no layer diagram in docs/INTERNALS.md")
    local drawn, order = {}, {} -- layer name -> the words of its line and its continuation lines
    local current
    for line in block:gmatch("[^\n]+") do
      local name = line:match("^(%S.-)%s%s+")
      if name then
        current = {}
        drawn[name], order[#order + 1] = current, name
      end
      for word in line:gmatch("[^%s,()]+") do if current then current[word] = true end end
    end
    local want, missing = {}, {}
    for i = #LAYERS, 1, -1 do
      local layer = LAYERS[i]
      want[#want + 1] = layer.name
      for _, mod in ipairs(layer.modules) do
        local short = mod == "ds" and "ds" or mod:gsub("^ds%.", ""):gsub("%.", "/")
        if drawn[layer.name] and not drawn[layer.name][short] then missing[#missing + 1] = layer.name .. ": " .. short end
      end
    end
    assert.same(want, order)
    assert.same({}, missing)
  end)

  it("has no require cycles", function()
    local state, cycles = {}, {}
    local function visit(m, path)
      if state[m] == "done" then return end
      if state[m] == "open" then
        local from = 1
        for i, x in ipairs(path) do if x == m then from = i end end
        cycles[#cycles + 1] = table.concat(path, " -> ", from) .. " -> " .. m
        return
      end
      state[m] = "open"
      path[#path + 1] = m
      for _, d in ipairs(graph[m] or {}) do visit(d, path) end
      path[#path] = nil
      state[m] = "done"
    end
    local names = {}
    for m in pairs(graph) do names[#names + 1] = m end
    table.sort(names)
    for _, m in ipairs(names) do visit(m, {}) end
    assert.same({}, cycles)
  end)
  it("writes only into its own tables, and requires the module of every op it names", function()
    local definers, bad = op_definers(), {}
    local function reachable(from)
      local seen, todo = { [from] = true }, { from }
      while #todo > 0 do
        for _, d in ipairs(graph[table.remove(todo)] or {}) do
          if not seen[d] then seen[d] = true; todo[#todo + 1] = d end
        end
      end
      return seen
    end
    for _, f in ipairs(files) do
      local reach = reachable(f.module)
      for _, r in ipairs(references_of(read(f.path))) do
        local where = f.path .. ":" .. r.line
        if r.kind == "write" and not FOREIGN_WRITES_OK[r.target] and not FOREIGN_WRITES_OK[f.module .. ">" .. r.target]
          and r.target ~= f.module then
          bad[#bad + 1] = string.format("%s: assigns into %s's table (return the value for the caller to use)", where,
            r.target)
        elseif r.kind == "by_name" and not BY_NAME_OK[f.module] then
          local def = definers[r.target]
          if not def then
            bad[#bad + 1] = string.format("%s: D.by_name.%s names no op", where, r.target)
          elseif not reach[def] then
            bad[#bad + 1] = string.format("%s: D.by_name.%s: %s, which defines it, is not required (require it and "
              .. "use the defs it returns)", where, r.target, def)
          end
        end
      end
    end
    assert.same({}, bad)
  end)

  it("finds foreign writes and by-name lookups", function()
    local refs = references_of('local X = require("ds.x")\nX.f = 1\nrequire("ds.y").g.h = 2\nlocal a = X.f\n'
      .. 'function X.m() X.k = 3 end\nlocal d = D.by_name.add; local e = D.by_name["sub"]; local g = D.by_name[n]\n'
      .. 'if X.f == 1 then end\n')
    assert.same({ { kind = "write", target = "ds.x", line = 2 }, { kind = "write", target = "ds.y", line = 3 },
                  { kind = "write", target = "ds.x", line = 5 }, { kind = "by_name", target = "add", line = 6 },
                  { kind = "by_name", target = "sub", line = 6 } }, refs)
  end)
end)
