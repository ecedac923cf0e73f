-- convert/source.lua: the source of a running function, proven by content: a candidate text (captured at load time
-- by ds.loadfile / ds.loadstring, the chunk's file, a loadstring chunk's own text) is compiled under the chunk's
-- name and must contain the function's own bytecode (string.dump: code, constants, lines, names), else no source.
local parser = require("ds.convert.parser")

local M = {}

local remembered = {} -- chunk name -> the texts loaded under it (newest last)
local compiled = {}   -- chunk name -> text -> {blocks =, functions =} or {why =}

-- record the text of a chunk loaded under chunkname (ds.loadfile, ds.loadstring, the prompt)
function M.remember(chunkname, text)
  local list = remembered[chunkname] or {}
  for _, t in ipairs(list) do if t == text then return end end
  list[#list + 1] = text
  remembered[chunkname] = list
end

-- the prototypes of a string.dump, in its order (children before parents): each a string of the prototype's bytes
local function blocks(dump)
  local pos = 5 -- after "\27LJ" and the version byte
  local function uleb()
    local v, shift = 0, 0
    while true do
      local b = dump:byte(pos)
      pos = pos + 1
      v = v + bit.lshift(bit.band(b, 127), shift)
      if b < 128 then return v end
      shift = shift + 7
    end
  end
  if dump:sub(1, 3) ~= "\27LJ" then error("convert/source.lua: string.dump gave no LuaJIT bytecode", 0) end
  if bit.band(uleb(), 2) == 0 then pos = pos + uleb() end -- the chunk name, unless stripped
  local out = {}
  while true do
    local len = uleb()
    if len == 0 then return out end
    out[#out + 1] = dump:sub(pos, pos + len - 1)
    pos = pos + len
  end
end

-- a prototype's first line and line count (its debug info), or nil when stripped
local function proto_lines(block)
  local pos = 5 -- after flags, numparams, framesize, numuv
  local function uleb()
    local v, shift = 0, 0
    repeat
      local b = block:byte(pos)
      pos = pos + 1
      v = v + bit.lshift(bit.band(b, 127), shift)
      shift = shift + 7
    until b < 128
    return v
  end
  uleb(); uleb(); uleb() -- sizekgc, sizekn, sizebc
  if uleb() == 0 then return nil end
  return uleb(), uleb()
end

-- the compiled form of text under chunkname: its prototypes and the parsed Function nodes in the same order
local function compile(chunkname, text, name)
  local by_text = compiled[chunkname] or {}
  compiled[chunkname] = by_text
  local c = by_text[text]
  if c then return c end
  local chunk = loadstring(text, chunkname)
  if not chunk then
    c = { blocks = {} }
  else
    c = { blocks = blocks(string.dump(chunk)) }
    local ok, root = pcall(parser.parse, text, name)
    if not ok then c.why = "its source does not parse: " .. tostring(root)
    else
      c.functions = parser.functions(root)
      if #c.functions ~= #c.blocks then
        c.why = string.format("convert/source.lua: %d functions parsed but %d compiled in %s", #c.functions,
          #c.blocks, name)
      end
    end
  end
  by_text[text] = c
  return c
end

-- the candidate texts of a chunk, newest first, and the name its sites use (nil, why when there is none)
local function candidates(info)
  local src, list = info.source, {}
  local saved = remembered[src] or {}
  for i = #saved, 1, -1 do list[#list + 1] = saved[i] end
  local first = src:sub(1, 1)
  if first == "@" then
    local f = io.open(src:sub(2), "rb")
    if f then
      list[#list + 1] = f:read("*a")
      f:close()
    elseif #list == 0 then
      return nil, "its source file " .. src:sub(2) .. " cannot be read (removed or moved after it was loaded?)"
    end
    return list, src:sub(2)
  elseif first == "=" then
    if #list == 0 then
      return nil, "it was loaded without its source text (chunk name " .. src .. "); load it with ds.loadfile or "
        .. "ds.loadstring, which keep the text"
    end
    return list, src:sub(2)
  end
  list[#list + 1] = src -- loadstring(text): the chunk name is the text itself
  return list, info.short_src
end

-- locate(fn) -> the Function nodes whose code is fn's (one, or several identical ones), the name for sites, the
-- debug info; or nil and why not
function M.locate(fn)
  local info = debug.getinfo(fn, "Su")
  if info.what == "C" then return nil, "it is a C function" end
  local texts, name = candidates(info)
  if not texts then return nil, name end
  local own = blocks(string.dump(fn))
  for _, text in ipairs(texts) do
    local c = compile(info.source, text, name)
    local found = {}
    for k = #own, #c.blocks do
      local same = true
      for j = 1, #own do
        if c.blocks[k - #own + j] ~= own[j] then same = false; break end
      end
      if same then found[#found + 1] = k end
    end
    if #found > 0 then
      if c.why then return nil, c.why end
      local nodes = {}
      for i, k in ipairs(found) do
        local node = c.functions[k]
        local first, count = proto_lines(c.blocks[k])
        if node.line > 0 and first and (first ~= node.line or count ~= node.endline - node.line) then
          return nil, string.format("convert/source.lua: function %d of %s is at lines %d-%d in the text but %d-%d in "
            .. "the bytecode", k, name, node.line, node.endline, first, first + count)
        end
        nodes[i] = node
      end
      return nodes, name, info
    end
  end
  return nil, "its source text does not compile to the code that runs (was the file edited or moved after it was "
    .. "loaded? load it with ds.loadfile, which keeps the text it loads)"
end

return M
