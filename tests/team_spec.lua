-- tests/team_spec.lua: src/team.c's busy-host fallback, driven through its C entry points with made-up start
-- times: a lone starved region keeps the full team; a second one soon after goes to one thread for a hold, and
-- the full team comes back when the hold ends; ds.info() counts both.
local ds = require("ds")
local ffi = require("ffi")
local C = require("ds.ffi").C

ffi.cdef [[
int ds_team(void);
double ds_team_start(void);
void ds_team_arrive(double t0);
void ds_team_done(void);
]]

-- one parallel region whose thread arrives `late` seconds after the region started
local function region(late)
  local t0 = C.ds_team_start()
  C.ds_team_arrive(t0 - late)
  C.ds_team_done()
end

local function busy_wait(seconds)
  local t = ds.clock() + seconds
  while ds.clock() < t do end
end

describe("team: busy-host fallback", function()
  local threads
  before_each(function()
    threads = ds.get_num_threads()
    ds.set_num_threads(2)   -- also forgets any earlier starved region and hold
  end)
  after_each(function() ds.set_num_threads(threads) end)

  it("keeps the full team after one starved region", function()
    local s0, h0 = ds.info().starved_regions, ds.info().starved_holds
    region(0.01)
    assert.are.equal(s0 + 1, ds.info().starved_regions)
    assert.are.equal(h0, ds.info().starved_holds)
    assert.are.equal(2, C.ds_team())
    region(0)   -- on time: nothing counted
    assert.are.equal(s0 + 1, ds.info().starved_regions)
  end)

  it("holds one thread at the second starved region in a row, then restores the team", function()
    local h0 = ds.info().starved_holds
    region(0.01)
    region(0.01)
    assert.are.equal(h0 + 1, ds.info().starved_holds)
    assert.are.equal(1, C.ds_team())
    assert.are.equal(2, ds.get_num_threads())   -- the configured team, not the hold's
    busy_wait(0.06)                              -- the first hold is 50 ms
    assert.are.equal(2, C.ds_team())
  end)

  it("holds again at the first starved region right after a hold ends", function()
    local h0 = ds.info().starved_holds
    region(0.01)
    region(0.01)
    busy_wait(0.06)
    assert.are.equal(2, C.ds_team())
    region(0.01)
    assert.are.equal(h0 + 2, ds.info().starved_holds)
    assert.are.equal(1, C.ds_team())
  end)

  it("does not hold for starved regions far apart", function()
    local h0 = ds.info().starved_holds
    region(0.01)
    busy_wait(0.06)
    region(0.01)
    assert.are.equal(h0, ds.info().starved_holds)
    assert.are.equal(2, C.ds_team())
  end)
end)
