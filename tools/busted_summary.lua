-- tools/busted_summary.lua: busted's plain output plus a last line "N passed, N failed" for CI.
return function(options)
  local busted = require("busted")
  local handler = require("busted.outputHandlers.plainTerminal")(options)
  busted.subscribe({ "suite", "end" }, function()
    io.write(string.format("\n%d passed, %d failed\n", handler.successesCount,
      handler.failuresCount + handler.errorsCount))
    io.flush()
    return nil, true
  end)
  return handler
end
