-- state.lua: process-wide mode flags shared by dispatch, autograd and trace.
return {
  grad_enabled = true,   -- ds.no_grad turns it off
  trace = nil,           -- the active tracer while ds.trace runs, else nil
}
