-- nn/fold.lua: Unfold and Fold (PyTorch's constructors) over ds.F.unfold / ds.F.fold.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local errors = require("ds.errors")
local constructor_args = require("ds.nn.constructor_args")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

local FOLD_SPEC = { dilation = "any", padding = "any", stride = "any" }
local FOLD_PARAMS = { "dilation", "padding", "stride" }
-- Unfold(kernel_size, dilation = 1, padding = 0, stride = 1), positionally or as options
local Unfold = Module:extend("Unfold")
Unfold._doc = "ds.F.unfold as a module: Unfold(kernel_size, dilation, padding, stride)"
function Unfold:init(kernel_size, ...)
  if kernel_size == nil then raise("Unfold: expects Unfold(kernel_size, [dilation, padding, stride])") end
  self.kernel_size, self.opts = kernel_size, constructor_args.merge("Unfold", FOLD_PARAMS, FOLD_SPEC, {}, ...)
end
function Unfold:forward(x) return F.unfold(x, self.kernel_size, self.opts) end
M.Unfold = Unfold

-- Fold(output_size, kernel_size, dilation = 1, padding = 0, stride = 1), positionally or as options
local Fold = Module:extend("Fold")
Fold._doc = "ds.F.fold as a module: Fold(output_size, kernel_size, dilation, padding, stride)"
function Fold:init(output_size, kernel_size, ...)
  if output_size == nil or kernel_size == nil then
    raise("Fold: expects Fold(output_size, kernel_size, [dilation, padding, stride])")
  end
  self.output_size, self.kernel_size = output_size, kernel_size
  self.opts = constructor_args.merge("Fold", FOLD_PARAMS, FOLD_SPEC, {}, ...)
end
function Fold:forward(x) return F.fold(x, self.output_size, self.kernel_size, self.opts) end
M.Fold = Fold

return M
