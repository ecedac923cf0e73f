-- clock.lua: wall-clock seconds from a monotonic clock (os.clock is CPU time, summed over threads).
local ffi = require("ffi")

ffi.cdef [[ struct ds_timespec { long tv_sec; long tv_nsec; };
            int clock_gettime(int clk, struct ds_timespec *ts); ]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("struct ds_timespec")

return function()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
