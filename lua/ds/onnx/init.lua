-- onnx/init.lua: ds.onnx: export(graph_or_compiled, path, opts) writes an ONNX model; load(path) reads one
-- into a ds.Graph (docs/ONNX.md).
local export = require("ds.onnx.export")
local import = require("ds.onnx.import")

local M = {}
M.export = export.export
M.load = import.load
M.OPSET = export.OPSET

function M.install(ds) ds.onnx = M end

return M
