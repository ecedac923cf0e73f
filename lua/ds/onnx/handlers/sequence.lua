-- onnx/handlers/sequence.lua: (in progress)
local common = require("ds.onnx.handlers.common")
local OPS = common.family()
return OPS
