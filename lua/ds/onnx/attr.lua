-- onnx/attr.lua: typed ONNX attribute values (a Lua number alone cannot say int or float): AttributeProto tables.
local M = {}
function M.int(v) return { type = 2, i = v } end
function M.float(v) return { type = 1, f = v } end
function M.string(v) return { type = 3, s = v } end
function M.ints(v) return { type = 7, ints = v } end
function M.floats(v) return { type = 6, floats = v } end
function M.tensor(v) return { type = 4, t = v } end
function M.graph(v) return { type = 5, g = v } end
return M
