-- tests/api_doc_spec.lua: docs/API.md is what tools/gen_api.lua generates now (regenerate: make api-doc), it names
-- every public name of ds (ds.help's list, walked from the tables), and `?name` answers for each of them.
local H = require("helpers")
local D = require("ds.dispatch")
local ds = require("ds")
local help = require("ds.help")

describe("docs/API.md", function()
  package.path = "./tools/?.lua;" .. package.path
  local text = require("gen_api").render()
  it("is current", function()
    assert(H.read_file("docs/API.md") == text, "docs/API.md is out of date: run `make api-doc`")
  end)
  it("lists every op of the table", function()
    for _, def in ipairs(D.list) do
      if not def.internal then
        assert(text:find("| `" .. def.name .. "` |", 1, true), def.name .. " is not in docs/API.md")
      end
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
  it("names every public name: optimizers, schedulers, init, utils, compile, save, distributed, onnx, ...", function()
    local names = help.public_names(ds)
    local set = {}
    for _, n in ipairs(names) do set[n] = true end
    for _, n in ipairs { "compile", "trace", "spec", "save", "load", "save_state", "load_state", "no_grad", "convert",
      "optim.Adam", "optim.StepLR", "optim.lr_scheduler.OneCycleLR", "nn.init.trunc_normal_",
      "nn.utils.clip_grad_norm_", "distributed.all_reduce", "onnx.load", "onnx.export", "nn.Linear", "F.relu" } do
      assert(set[n], n .. " is not among help.public_names")
    end
    for _, n in ipairs(names) do
      if not n:match("^Tensor%.") then
        local short = n:match("[^.]*$")
        assert(text:find("ds." .. n, 1, true) or (D.by_name[n] and text:find("| `" .. n .. "` |", 1, true))
          or (n:match("^F%.") and text:find("ds.F." .. short, 1, true)), n .. " is not in docs/API.md")
      end
    end
  end)
end)

describe("?name", function()
  it("gives non-empty help for every public name (ds.help)", function()
    for _, n in ipairs(help.public_names(ds)) do
      local t = help.text(ds, n)
      assert(type(t) == "string" and t:match("%S"), "no help for " .. n)
    end
  end)
  it("answers at the prompt for every public name", function()
    local names = help.public_names(ds)
    local input = os.tmpname()
    local f = io.open(input, "w")
    for _, n in ipairs(names) do f:write("?", n, "\n") end
    f:close()
    -- (without the ASan run's preload, its instrumented libds cannot load: the prompt uses the plain build)
    local p = io.popen("env -u LD_PRELOAD -u DS_ALLOC -u DS_LIB bin/ds < " .. input .. " 2>&1; echo \"exit=$?\"")
    local out = p:read("*a")
    p:close()
    os.remove(input)
    assert.falsy(out:find("no help for", 1, true), out:match("no help for[^\n]*"))
    assert.falsy(out:find("error:", 1, true), out:match("error:[^\n]*"))
    assert.truthy(out:find("exit=0", 1, true))
    assert.truthy(out:find("ds.optim.lr_scheduler.OneCycleLR(optimizer, opts)", 1, true))
  end)
end)
