-- distributed.lua: ds.distributed -- processes started by Open MPI's mpirun, reached through LuaJIT's FFI; the
-- collectives (src/collective.c) reduce in rank order, so every rank and every run gets the same bits.
-- Ranks are 1-based as everywhere in ds (MPI's rank r is ds's rank r + 1); rank 1 is the "first" rank.
local ffi = require("ffi")
local dsffi = require("ds.ffi")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")
local ops = require("ds.ops")
local state_file = require("ds.state_file")

local C = dsffi.C
local M = {}

ffi.cdef [[
int MPI_Init(int *argc, char ***argv);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Finalize(void);
int MPI_Abort(void *comm, int code);
int MPI_Comm_rank(void *comm, int *rank);
int MPI_Comm_size(void *comm, int *size);
int MPI_Comm_set_errhandler(void *comm, void *handler);
int MPI_Isend(const void *buf, int count, void *type, int dest, int tag, void *comm, void **req);
int MPI_Irecv(void *buf, int count, void *type, int source, int tag, void *comm, void **req);
int MPI_Test(void **req, int *flag, void *status);
double MPI_Wtime(void);
char ompi_mpi_comm_world[1];
char ompi_mpi_byte[1];
char ompi_mpi_errors_return[1];
]]

local PACKAGES = "install the Debian packages openmpi-bin and libopenmpi-dev (make deps does)"
local DEFAULT_TIMEOUT = 300   -- seconds a collective waits for a silent rank (DS_DIST_TIMEOUT, init{timeout =})

local mpi          -- the loaded libmpi (nil: not initialized, or a world of one process without MPI)
local comm         -- ds_comm registered with libds
local keep = {}    -- cdata the registered pointers refer to

local function load_mpi()
  local tried = {}
  for _, name in ipairs { "libmpi.so.40", "mpi" } do
    local ok, lib = pcall(ffi.load, name, true)   -- global: Open MPI's plugins resolve libmpi's symbols
    if ok then return lib end
    tried[#tried + 1] = name
  end
  errors.raise("ds.distributed.init: cannot load Open MPI's library (tried " .. table.concat(tried, ", ") ..
    "); " .. PACKAGES)
end

local function mpi_check(rc, what)
  if rc ~= 0 then errors.raise("ds.distributed." .. what .. ": MPI error " .. rc) end
end

-- init([opts]): joins the processes mpirun started. opts.timeout: seconds a collective waits for a silent rank
-- before failing with an error naming it (default DS_DIST_TIMEOUT or 300); opts.world_size = 1: one process,
-- no MPI (the same script runs without mpirun). A second call returns at once.
function M.init(opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "timeout" and k ~= "world_size" then
      errors.raise("ds.distributed.init: unknown option " .. tostring(k) .. " (timeout, world_size)")
    end
  end
  if comm then return M end
  local timeout = opts.timeout or tonumber(os.getenv("DS_DIST_TIMEOUT") or "") or DEFAULT_TIMEOUT
  if type(timeout) ~= "number" or not (timeout > 0) then
    errors.raise("ds.distributed.init: timeout must be a positive number of seconds")
  end
  local c = ffi.new("ds_comm")
  c.timeout = timeout
  if opts.world_size ~= nil then
    if opts.world_size ~= 1 then
      errors.raise("ds.distributed.init: world_size can only be 1 (more processes come from mpirun -np N)")
    end
    c.size, c.rank = 1, 0
  else
    if not os.getenv("OMPI_COMM_WORLD_SIZE") then
      errors.raise("ds.distributed.init: not started by Open MPI's mpirun (OMPI_COMM_WORLD_SIZE is unset); run " ..
        "`mpirun -np 2 luajit script.lua` (as root add --allow-run-as-root, on fewer cores --oversubscribe), " ..
        "or pass {world_size = 1} to run alone")
    end
    mpi = load_mpi()
    local flag = ffi.new("int[1]")
    mpi_check(mpi.MPI_Initialized(flag), "init")
    if flag[0] == 0 then mpi_check(mpi.MPI_Init(nil, nil), "init") end
    local world = ffi.cast("void *", mpi.ompi_mpi_comm_world)
    mpi_check(mpi.MPI_Comm_set_errhandler(world, ffi.cast("void *", mpi.ompi_mpi_errors_return)), "init")
    local v = ffi.new("int[1]")
    mpi_check(mpi.MPI_Comm_rank(world, v), "init"); c.rank = v[0]
    mpi_check(mpi.MPI_Comm_size(world, v), "init"); c.size = v[0]
    c.comm, c.byte = world, ffi.cast("void *", mpi.ompi_mpi_byte)
    c.isend = ffi.cast(ffi.typeof(c.isend), mpi.MPI_Isend)
    c.irecv = ffi.cast(ffi.typeof(c.irecv), mpi.MPI_Irecv)
    c.test = ffi.cast(ffi.typeof(c.test), mpi.MPI_Test)
    c.wtime = ffi.cast(ffi.typeof(c.wtime), mpi.MPI_Wtime)
    keep.mpi = mpi
    -- MPI_Finalize when the Lua state closes (a normal end of the script)
    keep.finalizer = newproxy(true)
    getmetatable(keep.finalizer).__gc = function() M.finalize() end
  end
  dsffi.check(C.ds_comm_set(c), "ds.distributed.init")
  comm = c
  return M
end

local function need(what)
  if not comm then errors.raise("ds.distributed." .. what .. ": call ds.distributed.init() first") end
end

function M.is_initialized() return comm ~= nil end
-- rank(): this process's rank, 1 .. world_size (MPI's rank + 1)
function M.rank() need("rank"); return comm.rank + 1 end
function M.world_size() need("world_size"); return comm.size end

-- abort(code): ends every rank of the job at once (MPI_Abort)
function M.abort(code)
  if mpi then mpi.MPI_Abort(ffi.cast("void *", mpi.ompi_mpi_comm_world), code or 1) end
  os.exit(code or 1)
end

-- finalize(): leaves MPI (after it no collective runs); called by itself when the script ends, also after an
-- uncaught error. Every rank first agrees that the job ends (src/collective.c waits for all of them): a rank that
-- ends while another is in a collective (or after a failed collective) ends the whole job with MPI_Abort instead,
-- naming the ranks, so an error outside run() cannot leave the others waiting.
function M.finalize()
  if not comm then return end
  local ok = C.ds_comm_finalize() == 0
  local msg = not ok and ffi.string(C.ds_last_error())
  local rank, size = comm.rank + 1, comm.size
  C.ds_comm_set(nil)
  comm = nil
  if not mpi then return end
  if not ok then
    io.stderr:write(string.format("ds.distributed: rank %d of %d ends the job (MPI_Abort): %s\n", rank, size, msg))
    io.stderr:flush()
    M.abort(1)
  end
  local flag = ffi.new("int[1]")
  mpi.MPI_Finalized(flag)
  if flag[0] == 0 then mpi.MPI_Finalize() end
end

-- run(fn, ...): fn(...) with init() done; an error on any rank is printed with the rank's number and ends the
-- whole job at once (instead of the other ranks waiting for it until their timeout). Returns fn's results.
function M.run(fn, ...)
  M.init()
  local res = { xpcall(fn, debug.traceback, ...) }
  if not res[1] then
    io.stderr:write(string.format("ds.distributed: rank %d of %d failed: %s\n", M.rank(), M.world_size(),
      tostring(res[2])))
    io.stderr:flush()
    M.abort(1)
  end
  M.finalize()
  return unpack(res, 2, table.maxn(res))
end

local function contiguous_tensor(t, what)
  if not Tensor.is_tensor(t) then errors.raise("ds.distributed." .. what .. ": expects a tensor, got " .. type(t)) end
  if not rawget(t, "_c") then
    errors.raise("ds.distributed." .. what .. ": needs a concrete tensor (inside a trace use ds.all_reduce)")
  end
  return t:contiguous()
end

-- call(c) runs a collective on t's values (a contiguous copy when t is strided, written back)
local function in_place(t, what, call)
  local c = contiguous_tensor(t, what)
  dsffi.check(call(c._c), what)
  if c ~= t then t:copy_(c) end
  return t
end

local REDUCTIONS = { sum = C.DS_REDUCE_SUM, mean = C.DS_REDUCE_MEAN, max = C.DS_REDUCE_MAX }
local function reduction(opts, what)
  opts = opts or {}
  for k in pairs(opts) do if k ~= "op" then errors.raise("ds.distributed." .. what .. ": unknown option " ..
    tostring(k) .. " (op)") end end
  local op = opts.op or "sum"
  if not REDUCTIONS[op] then
    errors.raise("ds.distributed." .. what .. ": op must be \"sum\", \"mean\" or \"max\", got " .. tostring(op))
  end
  return op
end

-- barrier(): returns when every rank has called it
function M.barrier() need("barrier"); dsffi.check(C.ds_comm_barrier(), "barrier") end

-- broadcast(t, root = 1): t's values on every rank become rank root's (in place; returns t)
function M.broadcast(t, root)
  need("broadcast")
  root = root or 1
  if type(root) ~= "number" or root ~= math.floor(root) or root < 1 or root > comm.size then
    errors.raise("ds.distributed.broadcast: root must be a rank in 1.." .. comm.size .. ", got " .. tostring(root))
  end
  return in_place(t, "broadcast", function(c) return C.ds_comm_broadcast(c, root - 1) end)
end

-- all_reduce(t, {op = "sum" | "mean" | "max"}): t on every rank becomes the reduction over the ranks, computed in
-- rank order (in place; returns t). A differentiable, traceable form is ds.all_reduce(x, op) (a new tensor).
function M.all_reduce(t, opts)
  need("all_reduce")
  local op = reduction(opts, "all_reduce")
  return in_place(t, "all_reduce", function(c) return C.ds_comm_all_reduce(c, c, REDUCTIONS[op]) end)
end

-- all_gather(t): x (d1, ...) -> (world_size * d1, ...): every rank's t along dim 1, in rank order
function M.all_gather(t)
  need("all_gather")
  local c = contiguous_tensor(t, "all_gather")
  local shape = t.shape
  if #shape == 0 then shape = { comm.size } else shape[1] = shape[1] * comm.size end
  local out = ops.empty(shape, { dtype = t.dtype })
  dsffi.check(C.ds_comm_all_gather(out._c, c._c), "all_gather")
  return out
end

-- reduce_scatter(t, {op}): x (world_size * m, ...) -> (m, ...): slice `rank` of the reduction over the ranks
function M.reduce_scatter(t, opts)
  need("reduce_scatter")
  local op = reduction(opts, "reduce_scatter")
  local c = contiguous_tensor(t, "reduce_scatter")
  local shape = t.shape
  if #shape == 0 or shape[1] % comm.size ~= 0 then
    errors.raise(string.format("ds.distributed.reduce_scatter: dim 1 of a %s tensor does not split into %d slices",
      table.concat(shape, "x"), comm.size))
  end
  shape[1] = shape[1] / comm.size
  local out = ops.empty(shape, { dtype = t.dtype })
  dsffi.check(C.ds_comm_reduce_scatter(out._c, c._c, REDUCTIONS[op]), "reduce_scatter")
  return out
end

-- save_state(state, path): rank 1 writes the checkpoint (ds.save_state), then every rank waits for it; every rank
-- may then ds.load_state(path) to resume
function M.save_state(state, path)
  need("save_state")
  if comm.rank == 0 then state_file.write(path, state) end
  M.barrier()
end

return M
