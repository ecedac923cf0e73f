-- bench/run.lua: `make bench`: small eager ops and GEMM, ds vs PyTorch (and OpenBLAS direct), one table + bench/RESULTS.md.
-- usage (from the repo root): luajit bench/run.lua [threads]; `make bench` sets OPENBLAS_CORETYPE and thread counts.
package.path = "./bench/?.lua;" .. package.path
local ds = require("ds")
local stats = require("stats")

local threads = tonumber(arg[1]) or 2
local SIZES = { 256, 512, 1024, 2048 }
local PYTHON = "/usr/bin/python3"

ds.set_num_threads(threads)
local info = ds.info()

local SMALL_CASES = { "add_1", "add_10x10", "add_inplace_10x10", "relu_10x10", "chain10_10x10" }
io.stderr:write(string.format("bench: %d threads, OpenBLAS core %s; ds small ops...\n", threads, info.blas_core))
local small = {}
for _, case in ipairs(SMALL_CASES) do   -- one process per case (see small_ops.lua)
  local res = stats.json_of("luajit bench/small_ops.lua " .. case)
  if not res or not res[case] then error("bench/small_ops.lua " .. case .. " failed", 0) end
  small[case] = res[case]
end
-- fp32 peak of this machine on `threads` cores, measured by bench/peak_flops.c (built by `make bench`)
io.stderr:write("bench: FMA peak...\n")
local peak_probe = os.getenv("PEAK_FLOPS") or "build/peak_flops"
local peak_res = stats.json_of(peak_probe .. " " .. threads)
if not peak_res or type(peak_res.peak) ~= "number" then
  error("bench: " .. peak_probe .. " gave no peak (run through `make bench`, which builds it)", 0)
end
io.stderr:write("bench: ds GEMM...\n")
local gemm = require("gemm")({ sizes = SIZES })

-- PyTorch twins, one process each, same threads and OpenBLAS core type (inherited environment)
local function torch_run(script, extra)
  local cmd = string.format("%s bench/torch/%s --threads %d %s 2>/dev/null", PYTHON, script, threads, extra or "")
  return stats.json_of(cmd)
end
io.stderr:write("bench: PyTorch small ops and GEMM...\n")
local tsmall = torch_run("small_ops.py")
local sizes_arg = {}
for i, n in ipairs(SIZES) do sizes_arg[i] = tostring(n) end
local tgemm = torch_run("gemm.py", "--sizes " .. table.concat(sizes_arg, ","))

-- ---- the table ----
local lines = {}
local function out(fmt, ...) lines[#lines + 1] = string.format(fmt, ...) end
local function num(v, fmt) return v and string.format(fmt, v) or "n/a" end
local function ratio(a, b) return (a and b) and string.format("%.2f", a / b) or "n/a" end

local cpu = stats.output("grep -m1 'model name' /proc/cpuinfo"):match(":%s*(.-)%s*$") or "?"
out("ds %s vs PyTorch %s | %s | %d threads | OpenBLAS core %s (OPENBLAS_CORETYPE=%s)", ds.version,
  tsmall and tsmall.version or "n/a", cpu, threads, info.blas_core, os.getenv("OPENBLAS_CORETYPE") or "unset")
out("")
out("%-34s %10s %10s %10s", "small eager op, no grad (us, median)", "ds", "torch", "ds/torch")
local small_rows = {
  { "add_1", "a + b, 1 element" }, { "add_10x10", "a + b, 10x10" }, { "add_inplace_10x10", "a:add_(b), 10x10" },
  { "relu_10x10", "relu, 10x10" }, { "chain10_10x10", "10-op chain, 10x10 (whole chain)" },
}
for _, r in ipairs(small_rows) do
  local d, t = small[r[1]], tsmall and tsmall[r[1]]
  out("%-34s %10s %10s %10s", r[2], num(d, "%.3f"), num(t, "%.3f"), ratio(d, t))
end
out("")
local peak = peak_res.peak
out("%-34s %10s %10s %10s %10s %10s", string.format("GEMM f32 n x n (GFLOP/s, median)"), "ds", "OpenBLAS", "torch",
  "ds/BLAS", "ds/peak")
for _, n in ipairs(SIZES) do
  local g, t = gemm[n], tgemm and tgemm[tostring(n)]
  out("%-34s %10.1f %10.1f %10s %10s %10s", "n = " .. n, g.ds, g.blas, num(t, "%.1f"), ratio(g.ds, g.blas), ratio(g.ds, peak))
end
out("")
local add_ratio = tsmall and small.add_10x10 / tsmall.add_10x10
local top = gemm[SIZES[#SIZES]]
out("target: 10x10 add <= 1/3 of PyTorch's time: %s (ds/torch = %s)",
  add_ratio and (add_ratio <= 1 / 3 and "met" or "MISSED") or "n/a (no PyTorch)", add_ratio and string.format("%.2f", add_ratio) or "n/a")
out("target: GEMM n=2048 >= 95%% of OpenBLAS direct: %s (%.1f%%)", top.ds >= 0.95 * top.blas and "met" or "MISSED",
  100 * top.ds / top.blas)
out("target: GEMM n=2048 >= 80%% of the measured fp32 peak (%.0f GFLOP/s on %d threads; AVX2 %.0f, AVX-512 %s): %s (%.1f%%)",
  peak, threads, peak_res.avx2, type(peak_res.avx512) == "number" and string.format("%.0f", peak_res.avx512) or "n/a",
  top.ds >= 0.8 * peak and "met" or "MISSED", 100 * top.ds / peak)

local text = table.concat(lines, "\n")
print(text)

-- ---- bench/RESULTS.md ----
local command = string.format("OPENBLAS_CORETYPE=%s make bench BENCH_THREADS=%d", os.getenv("OPENBLAS_CORETYPE") or "", threads)
-- keep the hand-written sections (other benchmarks' results) that follow the generated table
local old = io.open("bench/RESULTS.md", "rb")
local kept = old and old:read("*a"):match("\n(## .*)$") or ""
if old then old:close() end
local f = assert(io.open("bench/RESULTS.md", "w"))
f:write("# Benchmark results\n\n",
  "Written by `bench/run.lua` on ", os.date("!%Y-%m-%d %H:%M UTC"), ". Command (from the repository root):\n\n",
  "```\n", command, "\n```\n\n",
  "ds and PyTorch run one after the other in the same invocation, with the same thread count and OpenBLAS core type\n",
  "(PyTorch 1.13 from Debian calls OpenBLAS through libblas.so.3, ds links the OpenMP build of OpenBLAS directly).\n",
  "Small ops: median over 15 samples of 20000 calls, outputs allocated per call, no grad, each ds case in its\n",
  "own process (LuaJIT traces are per process). GEMM: square f32 ",
  "matrices, median over 7 samples (ds and OpenBLAS samples alternate), timed after 256 MiB of outputs so the\n",
  "allocators are in steady state; \"OpenBLAS\" is `cblas_sgemm` called through the FFI on a preallocated output,\n",
  "ds and torch allocate their output per call. ds runs f32 products with K <= 1024 and N*K <= 2^22 on its own GEMM\n",
  "(src/sgemm.c), larger ones on OpenBLAS. Peak = the fp32 FMA throughput of all threads measured by\n",
  "bench/peak_flops.c on this machine (independent FMA chains, AVX2 and AVX-512, the larger).\n\n",
  "```\n", text, "\n```\n", kept ~= "" and "\n" or "", kept)
f:close()
io.stderr:write("bench: wrote bench/RESULTS.md\n")
