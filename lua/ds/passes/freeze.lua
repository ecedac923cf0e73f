-- passes/freeze.lua: parameters as constants, as torch.jit.freeze does. Every state tensor the graph neither
-- updates nor differentiates becomes a constant, so the fold pass after it computes what depends on
-- parameters alone once, at compile time: a weight used as W^T (a linear layer) is stored transposed,
-- contiguous (K, N), and the GEMM reads it in place instead of re-packing W on every call (the costly
-- part of a product with few rows). Same bits: every product element is the same FMA chain over k.
-- ds.load freezes the inference graphs it loads (their parameters belong to the loaded model);
-- ds.compile(fn, specs, {freeze = true}) snapshots the module's parameters (a copy), so training the
-- module afterwards does not change the compiled function. An optimizer's hyper-parameter tensors stay state:
-- they are rewritten before every run (ops/optim.lua's refresh).
local hyper = require("ds.ops.optim")

-- ir: the IR (rewritten in place); copy: snapshot the tensors (they belong to a live module).
-- Returns ir, the number of state tensors frozen.
return function(ir, copy)
  local keep = {}   -- old state index -> true when the graph writes it or its gradient
  for _, w in ipairs(ir.state_writes) do keep[w.state] = true end
  for _, w in ipairs(ir.grad_writes or {}) do keep[w.state] = true end
  local state, new_index, frozen = {}, {}, 0
  for i, s in ipairs(ir.state) do
    local v = ir.values[s.value]
    -- the generator's state is this process's, never a constant
    if keep[i] or s.name == "rng_state" or hyper.refresh[s.tensor] then
      state[#state + 1] = s
      new_index[i] = #state
      v.index = #state
    else
      v.kind = "const"
      ir.consts[#ir.consts + 1] = { name = s.name, tensor = copy and s.tensor:clone() or s.tensor, value = s.value }
      v.index = #ir.consts
      frozen = frozen + 1
    end
  end
  ir.state = state
  for _, w in ipairs(ir.state_writes) do w.state = new_index[w.state] end
  for _, w in ipairs(ir.grad_writes or {}) do w.state = new_index[w.state] end
  return ir, frozen
end
