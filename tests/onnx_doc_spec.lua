-- tests/onnx_doc_spec.lua: docs/ONNX.md's table of supported ops is the one tools/gen_onnx_doc.lua generates
-- from the handler table (run `make onnx-doc` after changing a handler).
package.path = "./tools/?.lua;" .. package.path
local gen = require("gen_onnx_doc")

describe("docs/ONNX.md", function()
  it("lists every op ds.onnx.load reads as the handler table says (make onnx-doc)", function()
    local f = assert(io.open(gen.DOC, "rb"))
    local doc = f:read("*a")
    f:close()
    assert.equal(gen.document(), doc, "docs/ONNX.md's op table is stale: run make onnx-doc")
  end)
end)
