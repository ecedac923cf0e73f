-- tests/api_doc_spec.lua: docs/API.md is what tools/gen_api.lua generates now (regenerate: make api-doc).
local H = require("helpers")
local D = require("ds.dispatch")

describe("docs/API.md", function()
  package.path = "./tools/?.lua;" .. package.path
  local text = require("gen_api").render()
  it("is current", function()
    assert(H.read_file("docs/API.md") == text, "docs/API.md is out of date: run `make api-doc`")
  end)
  it("lists every op of the table", function()
    for _, def in ipairs(D.list) do
      if not def.internal then assert(text:find("| `" .. def.name .. "` |", 1, true), def.name .. " is not in docs/API.md") end
    end
  end)
  it("has a one-line description (the op's doc field) for every op of the table", function()
    for _, def in ipairs(D.list) do
      if not def.internal then
        assert(type(def.doc) == "string" and def.doc:match("%S") and not def.doc:find("\n"),
          def.name .. " has no one-line doc in the op table (lua/ds/ops/)")
      end
    end
  end)
end)
