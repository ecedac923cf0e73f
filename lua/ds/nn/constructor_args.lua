-- nn/constructor_args.lua: a constructor's PyTorch-style positional arguments and trailing options table
-- merged into one options table, checked by ds.options (errors name the class); nn modules and optim use it.
local errors = require("ds.errors")
local options = require("ds.options")

local M = {}

-- an options table: a plain table that is not a list (a list, {2, 4} or {0.9, 0.999}, is a positional value)
local function is_options(v) return type(v) == "table" and getmetatable(v) == nil and v[1] == nil end

-- name: the module; params: PyTorch's parameter names in order after the ones the caller took; spec: the
-- options' kinds (ds.options); refused: { param = "why" } for parameters PyTorch has and ds does not take.
-- ...: the positional arguments, then optionally an options table. Returns the checked options table.
function M.merge(name, params, spec, refused, ...)
  local n = select("#", ...)
  local args = { ... }
  local opts = {}
  if n > 0 and is_options(args[n]) then
    for k, v in pairs(args[n]) do opts[k] = v end
    n = n - 1
  end
  if n > #params then
    if #params == 0 then errors.raise(string.format("%s: takes no positional arguments, got %d", name, n)) end
    errors.raise(string.format("%s: takes at most %d positional arguments (%s) before the options table, got %d",
      name, #params, table.concat(params, ", "), n))
  end
  for i = 1, n do
    local key, v = params[i], args[i]
    if v ~= nil then
      if is_options(v) then errors.raise(name .. ": the options table must be the last argument") end
      if refused[key] then
        errors.raise(string.format("%s: argument %d is PyTorch's %s; %s", name, i, key, refused[key]))
      end
      if opts[key] ~= nil then
        errors.raise(string.format("%s: %s given twice (argument %d and the options table)", name, key, i))
      end
      opts[key] = v
    end
  end
  return options.check(opts, name, spec)
end

-- PyTorch's inplace flag of activation modules: false is taken, true is an error (ds's modules compute out of place)
function M.no_inplace(name, opts)
  if opts.inplace then
    errors.raise(name .. ": inplace = true is not implemented (ds's modules compute out of place)")
  end
  return opts
end

return M
