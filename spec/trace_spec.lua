local profile = require("tecs.profile")
local trace = require("tecs.profile.trace")
local traceerr = require("tecs.profile.trace.reasons")
local csv4180 = require("spec.support.csv4180")
local jv = require("spec.support.jv")
local vmdef = require("jit.vmdef")
local zone = require("jit.zone")

local LUAJIT = os.getenv("LUAJIT_BIN") or "luajit"
local RUNNER = "spec/support/trace_runner.lua"
local RECERR = "error thrown or hook called during recording"
-- Command-line option that leaves LuaJIT's own jit/ directory (jit.vmdef,
-- jit.zone) off package.path. Set from the command line rather than through
-- LUA_PATH, so that it also works for a launcher that puts jit/ on the path
-- itself (scripts/luajit2.sh) or a binary with the directory compiled in.
local HIDE_JIT_DIR = [[-e "package.path = 'lua/?.lua'"]]

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

local function basename_location(loc)
  return (loc:gsub("^.*/", ""))
end

-- Run a fixture under a trace session in a fresh LuaJIT. With `with_jv`, the
-- same process also runs -jv (which the session chains to). Returns the
-- parsed CSV records, the summary fields and the -jv text (or nil).
local function run_fixture(name, opts)
  opts = opts or {}
  local fixture = "spec/fixtures/trace_" .. name .. ".lua"
  local out = os.tmpname()
  local args = string.format("%s %s %s %s", RUNNER, fixture, out, opts.benign and "benign" or "")
  local jv_text
  if opts.with_jv then
    local ok
    jv_text, ok = jv.run(LUAJIT, args)
    assert(ok, "runner failed for " .. fixture)
  else
    local hide = opts.hide_vmdef and (HIDE_JIT_DIR .. " ") or ""
    local rc = os.execute(LUAJIT .. " " .. hide .. args)
    assert(rc == 0 or rc == true, "runner failed for " .. fixture)
  end
  local csv_text = read(out .. ".csv")
  local summary = {}
  for k, v in read(out .. ".summary"):gmatch("([%w_]+)=([^\n]*)") do
    summary[k] = tonumber(v) or v
  end
  os.remove(out); os.remove(out .. ".csv"); os.remove(out .. ".summary")
  local records = csv4180.parse(csv_text)
  return records, summary, jv_text, csv_text
end

-- Sites from parsed CSV records (header checked).
local function sites_of(records)
  assert.same({ "severity", "count", "reason", "location", "zone" }, records[1])
  local sites = {}
  for i = 2, #records do
    local r = records[i]
    sites[#sites + 1] = { severity = r[1], count = tonumber(r[2]), reason = r[3], location = r[4], zone = r[5] }
  end
  return sites
end

-- Where -jv names a builtin as the place of an abort ("... at
-- ffi.meta.__call", as OpenResty's luajit2 does for an abort inside a
-- builtin) the report names the Lua line that called the builtin, which is
-- what other VMs' -jv prints. Such aborts are compared by reason under this
-- key; the lines the report gives for them are checked exactly in
-- "severities".
local IN_BUILTIN = "(Lua line calling a builtin)"

local function is_file_line(location)
  return location:find(":%d+$") ~= nil
end

-- -jv's aborts counted by "reason @ location" (IN_BUILTIN for a builtin),
-- and the set of reasons -jv placed in a builtin.
local function count_jv(aborts)
  local counts, in_builtin = {}, {}
  for _, a in ipairs(aborts) do
    local location = a.location
    if not is_file_line(location) then
      in_builtin[a.reason] = true
      location = IN_BUILTIN
    end
    local key = a.reason .. " @ " .. location
    counts[key] = (counts[key] or 0) + 1
  end
  return counts, in_builtin
end

-- Count sites by "reason @ base name:line", across severities, as -jv shows
-- them (reasons -jv placed in a builtin under IN_BUILTIN).
local function count_like_jv(sites, in_builtin)
  local counts = {}
  for _, s in ipairs(sites) do
    local location = basename_location(s.location)
    if in_builtin and in_builtin[s.reason] then location = IN_BUILTIN end
    local key = s.reason .. " @ " .. location
    counts[key] = (counts[key] or 0) + s.count
  end
  return counts
end

local function find_site(sites, pred)
  for _, s in ipairs(sites) do if pred(s) then return s end end
end

-- Run `fn` once per iteration, making it hot with a fresh chunk every time
-- (a new prototype, so earlier penalties and blacklists do not carry over).
-- How many aborts a given number of iterations gives depends on the hot
-- counters' state (shared with all other code of the process) and on
-- LuaJIT's randomised penalties, so in-process tests check relations.
local function fresh_nyi_loop(chunkname)
  local src = "local s = 0 for i = 1, 1000 do local f = function() return i end s = s + f() end return s"
  return assert(loadstring(src, chunkname))
end

describe("profile.trace", function()
  after_each(function()
    local s = trace.active()
    if s then s:stop() end
  end)

  it("is the tracker's start function, reachable under both module names", function()
    assert.equal(trace.start, profile.trace)
    assert.equal(trace.start, require("tecs.utils.profile").trace)
  end)

  it("loading the package attaches nothing", function()
    local script = [[
      local reg = debug.getregistry()
      local function snapshot()
        local t, n = reg._VMEVENTS, 0
        if t then for _ in pairs(t) do n = n + 1 end end
        return n
      end
      local function mine() end
      jit.attach(mine, "trace")
      local before = snapshot()
      require("tecs.profile"); require("tecs.utils.profile")
      local n = 0
      for _, v in pairs(reg._VMEVENTS) do if v == mine then n = n + 1 end end
      io.write(before == snapshot() and n == 1 and "clean" or "attached")
    ]]
    local path = os.tmpname()
    local f = assert(io.open(path, "w")); f:write(script); f:close()
    local p = io.popen(LUAJIT .. " " .. path)
    local out = p:read("*a")
    p:close()
    os.remove(path)
    assert.equal("clean", out)
  end)

  it("leaves the FFI names clock_gettime and struct timespec to user code", function()
    local script = [[
      require("tecs.profile").trace():stop()
      local ffi = require("ffi")
      ffi.cdef("struct timespec { long s, ns; }; int clock_gettime(int, struct timespec *);")
      io.write(ffi.C.clock_gettime(1, ffi.new("struct timespec")) == 0 and "ok" or "failed")
    ]]
    local path = os.tmpname()
    local f = assert(io.open(path, "w")); f:write(script); f:close()
    local p = io.popen(LUAJIT .. " " .. path .. " 2>&1")
    local out = p:read("*a")
    p:close()
    os.remove(path)
    assert.equal("ok", out)
  end)

  describe("matches luajit -jv on programs with known aborts", function()
    local fixtures = { "nyi", "leave", "recursion", "blacklist", "cfunc" }
    for _, name in ipairs(fixtures) do
      it("trace_" .. name .. ".lua: same reasons and counts per site, in one run with -jv", function()
        local records, summary, jv_text = run_fixture(name, { with_jv = true, benign = true })
        local jv_counts, in_builtin = count_jv(jv.aborts(jv_text))
        local sites = sites_of(records)
        assert.is_true(next(jv_counts) ~= nil, "-jv printed no aborts for " .. name)
        assert.same(jv_counts, count_like_jv(sites, in_builtin))
        -- Locations name the whole chunk, not just the base name.
        for _, s in ipairs(sites) do
          assert.matches("^spec/fixtures/trace_" .. name .. "%.lua:%d+$", s.location)
          assert.equal("", s.zone)
        end
        -- Extra fields agree with -jv's lines for the fixture's traces.
        local jv_completed = select(2, jv_text:gsub("%[TRACE +%d+ [^%]]*trace_" .. name .. "%.lua", ""))
        assert.equal(jv_completed, summary.tracesCompleted)
        assert.equal(#jv.aborts(jv_text), summary.tracesAborted)
        assert.equal(summary.tracesCompleted + summary.tracesAborted, summary.tracesStarted)
        assert.equal(summary.totalAborts, summary.tracesAborted) -- includeBenign
      end)
    end

    -- Without -jv attached, the tracker's own run gives what a separate
    -- `luajit -jv=<file> fixture.lua` prints. (The fixtures are built so that
    -- their aborts are the same in every run: LuaJIT randomises its retry
    -- penalties, and any Lua trace handler, -jv's too, moves the shared hot
    -- counters, so e.g. deep recursion like fib() differs from run to run.)
    for _, name in ipairs(fixtures) do
      it("trace_" .. name .. ".lua: same as a separate luajit -jv run", function()
        local jv_text = jv.run(LUAJIT, "spec/fixtures/trace_" .. name .. ".lua")
        local jv_counts, in_builtin = count_jv(jv.aborts(jv_text))
        assert.is_true(next(jv_counts) ~= nil, "-jv printed no aborts for " .. name)
        local records = run_fixture(name, { benign = true })
        assert.same(jv_counts, count_like_jv(sites_of(records), in_builtin))
      end)
    end

  end)

  describe("severities", function()
    it("NYI bytecode is a warn named by opcode", function()
      local sites = sites_of((run_fixture("nyi")))
      assert.equal(1, #sites)
      assert.is_true(sites[1].count >= 2)
      assert.same({ severity = "warn", count = sites[1].count, reason = "NYI: bytecode FNEW",
                    location = "spec/fixtures/trace_nyi.lua:4", zone = "" }, sites[1])
    end)

    it("C functions and FastFunc variants the JIT cannot compile are warn", function()
      local sites = sites_of((run_fixture("cfunc")))
      local cfun = find_site(sites, function(s) return s.reason == "NYI: unsupported C function type" end)
      local ffun = find_site(sites, function(s)
        return s.reason == "NYI: unsupported variant of FastFunc ffi.typeof"
      end)
      assert.is_table(cfun); assert.is_table(ffun)
      assert.equal("warn", cfun.severity); assert.equal("warn", ffun.severity)
      assert.equal("spec/fixtures/trace_cfunc.lua:11", cfun.location)
      assert.equal("spec/fixtures/trace_cfunc.lua:15", ffun.location)
    end)

    it("the loop LuaJIT blacklists is a blacklist site and blacklisted >= 1", function()
      local records, summary = run_fixture("blacklist")
      local sites = sites_of(records)
      assert.is_true(summary.blacklisted >= 1)
      -- The abort after which the closure loop was blacklisted ...
      local hit = find_site(sites, function(s)
        return s.severity == "blacklist" and s.reason == "NYI: bytecode FNEW"
      end)
      assert.is_table(hit, "no blacklist row for the closure loop")
      assert.equal(1, hit.count)
      assert.equal("spec/fixtures/trace_blacklist.lua:7", hit.location)
      -- ... after a run of plain aborts at the same place,
      local before = find_site(sites, function(s) return s.severity == "warn" and s.reason == "NYI: bytecode FNEW" end)
      assert.is_true(before.count >= 5, "aborts before blacklisting: " .. before.count)
      -- and LuaJIT really did turn the loop into its interpreter-only form.
      assert.matches(" IFORL ", summary.opcodes)
      assert.not_matches(" FORL ", summary.opcodes)
      -- Recording that runs into the blacklisted loop: reason "blacklisted".
      local into = find_site(sites, function(s) return s.reason == "blacklisted" end)
      assert.is_table(into)
      assert.equal("blacklist", into.severity)
      assert.equal("spec/fixtures/trace_blacklist.lua:5", into.location)
      -- Sorted: blacklist rows first, then count descending.
      assert.equal("blacklist", sites[1].severity)
      local total = 0
      for _, s in ipairs(sites) do if s.severity == "blacklist" then total = total + s.count end end
      assert.equal(total, summary.blacklisted)
      assert.is_true(summary.blacklistings >= 2, "loops blacklisted: " .. summary.blacklistings)
    end)

    it("benign events appear only with includeBenign, as info", function()
      local plain_records, plain = run_fixture("leave")
      local benign_records, benign = run_fixture("leave", { benign = true })
      local LEAVE = "leaving loop in root trace"
      assert.is_true(plain.benignAborts >= 5, "benign events in the fixture: " .. plain.benignAborts)
      local plain_sites, sites = sites_of(plain_records), sites_of(benign_records)
      assert.is_nil(find_site(plain_sites, function(s) return s.severity == "info" end))
      local info = find_site(sites, function(s) return s.severity == "info" end)
      assert.is_table(info, "no info rows with includeBenign")
      assert.equal(LEAVE, info.reason)
      assert.equal("spec/fixtures/trace_leave.lua:14", info.location)
      -- The last of those events got the loop blacklisted: that one is
      -- reported either way, as blacklist.
      for _, list in ipairs({ plain_sites, sites }) do
        local bl = find_site(list, function(s) return s.reason == LEAVE and s.severity == "blacklist" end)
        assert.is_table(bl)
        assert.equal(1, bl.count)
      end
      assert.equal(benign.benignAborts, info.count + 1)
      assert.equal(plain.totalAborts + info.count, benign.totalAborts)
      assert.equal(plain.blacklisted, benign.blacklisted)
    end)

    it("down-recursion is info", function()
      local records, summary = run_fixture("recursion", { benign = true })
      local sites = sites_of(records)
      local down = find_site(sites, function(s) return s.reason == "down-recursion, restarting" end)
      assert.is_table(down)
      assert.equal("info", down.severity)
      assert.equal("spec/fixtures/trace_recursion.lua:14", down.location)
      local plain = sites_of((run_fixture("recursion")))
      assert.is_nil(find_site(plain, function(s) return s.reason == "down-recursion, restarting" end))
      assert.is_true(summary.tracesCompleted > 0)
    end)
  end)

  describe("report", function()
    it("has the contract's fields and counts trace attempts", function()
      local s = profile.trace()
      fresh_nyi_loop("=report_fields")()
      local t0 = os.clock()
      while os.clock() - t0 < 0.05 do end -- wall time >= this thread's CPU time
      local r = s:stop()
      assert.is_number(r.durationSec)
      assert.is_true(r.durationSec >= 0.05 and r.durationSec < 60, "durationSec " .. r.durationSec)
      assert.is_true(r.totalAborts >= 2, "aborts: " .. r.totalAborts)
      assert.equal(0, r.blacklisted)
      assert.equal(1, #r.sites)
      assert.same({ severity = "warn", count = r.totalAborts, reason = "NYI: bytecode FNEW",
                    location = "report_fields:1", zone = "" }, r.sites[1])
      assert.equal(r.tracesStarted, r.tracesCompleted + r.tracesAborted)
      -- Other code of the process (the test runner's) may start and abort a
      -- trace while the session runs; every abort at this site is counted.
      assert.is_true(r.tracesAborted >= r.totalAborts, r.tracesAborted .. " < " .. r.totalAborts)
    end)

    it("leaves a trace whose end is not seen yet out of tracesStarted", function()
      -- A handler attached before the session gets every event first, so a
      -- report it takes on "stop" or "abort" comes when the tracker has seen
      -- that trace start but not end: the situation of a report taken while
      -- the code taking it is being recorded.
      local s
      local taken, uneven = { stop = 0, abort = 0 }, {}
      local function mine(what)
        if s and (what == "stop" or what == "abort") then
          local r = s:report()
          taken[what] = taken[what] + 1
          if r.tracesStarted ~= r.tracesCompleted + r.tracesAborted then
            uneven[#uneven + 1] = r.tracesStarted .. " ~= " .. r.tracesCompleted .. " + " .. r.tracesAborted
          end
        end
      end
      jit.attach(mine, "trace")
      s = profile.trace()
      fresh_nyi_loop("=unseen_end")()
      assert(loadstring("local s = 0 for i = 1, 1000 do s = s + i end return s", "=compiles"))()
      local r = s:stop()
      jit.attach(mine)
      assert.is_true(r.tracesAborted >= 1 and r.tracesCompleted >= 1, tostring(r))
      -- Reports were taken in the middle of both kinds of ending. (Not every
      -- counted ending: a trace of the runner's own code may start and end
      -- inside profile.trace(), before `s` is set.)
      assert.is_true(taken.stop >= 1 and taken.abort >= 1, taken.stop .. " stops, " .. taken.abort .. " aborts")
      assert.same({}, uneven)
      assert.equal(r.tracesStarted, r.tracesCompleted + r.tracesAborted)
    end)

    it("places an abort inside a builtin at the Lua line calling it", function()
      -- A C function returning a struct by value, which no LuaJIT compiles,
      -- called from line 3 (through the FFI's __call metamethod).
      local ffi = require("ffi")
      ffi.cdef [[
        typedef struct { int quot, rem; } tecs_trace_spec_div_t;
        tecs_trace_spec_div_t tecs_trace_spec_div(int, int) __asm__("div");
      ]]
      local src = "local C = ...\nlocal n = 0\nfor i = 1, 1000 do n = n + C.tecs_trace_spec_div(i, 7).rem end\nreturn n"
      local s = profile.trace()
      assert(loadstring(src, "=in_builtin"))(ffi.C)
      local r = s:stop()
      local site = find_site(r.sites, function(x) return x.reason == "NYI: unsupported C function type" end)
      assert.is_table(site, "no abort for the C call in:\n" .. tostring(r))
      assert.is_true(site.count >= 1)
      assert.equal("in_builtin:3", site.location)
    end)

    it("records the zone path at abort time", function()
      local s = profile.trace()
      zone("update") zone("ai")
      fresh_nyi_loop("=zoned")()
      zone() zone()
      fresh_nyi_loop("=unzoned")()
      local r = s:stop()
      assert.equal("update/ai", find_site(r.sites, function(x) return x.location == "zoned:1" end).zone)
      assert.equal("", find_site(r.sites, function(x) return x.location == "unzoned:1" end).zone)
    end)

    it("prints as RFC 4180 CSV that round-trips, commas and quotes included", function()
      local s = profile.trace({ includeBenign = true })
      zone('render, "hud"')
      fresh_nyi_loop('@src/odd, "quoted".lua')()
      zone()
      fresh_nyi_loop()() -- a string chunk: Lua's [string "..."] name, with quotes
      local r = s:stop()
      local text = tostring(r)
      assert.equal("severity,count,reason,location,zone\r\n", text:sub(1, 37))
      assert.equal("\r\n", text:sub(-2))
      local records = csv4180.parse(text)
      assert.equal(#r.sites + 1, #records)
      assert.is_true(#r.sites >= 2)
      for i, site in ipairs(r.sites) do
        assert.same({ site.severity, tostring(site.count), site.reason, site.location, site.zone }, records[i + 1])
      end
      local odd = find_site(r.sites, function(x) return x.location == 'src/odd, "quoted".lua:1' end)
      assert.is_table(odd)
      assert.equal('render, "hud"', odd.zone)
      assert.is_table(find_site(r.sites, function(x) return x.location:find('^%[string "') end))
      assert.equal(text, r:csv())
    end)

    it("quotes reasons with commas, quotes, CR and LF (csv writer)", function()
      local csv = require("tecs.profile.csv")
      local rows = {
        { "warn", 1, 'NYI: a "quoted", reason', "a.lua:1", "" },
        { "info", 2, "down-recursion, restarting", "b.lua:2", "x\r\ny" },
        { "warn", 3, "line\nbreak", "c.lua:3", 'z"' },
        { "warn", 4, "plain", "d.lua:4", "cr\ronly" },
      }
      local text = csv.document(trace.COLUMNS, rows)
      local records = csv4180.parse(text)
      for i, row in ipairs(rows) do
        local want = {}
        for j, v in ipairs(row) do want[j] = tostring(v) end
        assert.same(want, records[i + 1])
      end
      assert.matches('"NYI: a ""quoted"", reason"', text, 1, true)
      assert.matches("plain,d.lua:4,", text, 1, true) -- plain fields unquoted
    end)

    it("sorts by severity, then count descending, then reason and location", function()
      local s = profile.trace()
      fresh_nyi_loop("=b")()
      fresh_nyi_loop("=a")()
      local many = assert(loadstring(
        "local s = 0 for i = 1, 2000 do local f = function() return i end s = s + f() end return s", "=c"))
      many()
      local r = s:stop()
      local rank = { blacklist = 1, warn = 2, info = 3 }
      for i = 2, #r.sites do
        local x, y = r.sites[i - 1], r.sites[i]
        assert.is_true(rank[x.severity] < rank[y.severity] or (rank[x.severity] == rank[y.severity] and
          (x.count > y.count or (x.count == y.count and (x.reason < y.reason or
          (x.reason == y.reason and x.location <= y.location))))), "rows " .. i - 1 .. " and " .. i)
      end
      assert.is_true(#r.sites >= 3)
    end)
  end)

  describe("session", function()
    it("does not count while paused; pause and resume are idempotent", function()
      local s = profile.trace()
      s:pause(); s:pause()
      assert.is_true(s:isPaused())
      fresh_nyi_loop("=paused")()
      s:resume(); s:resume()
      assert.is_false(s:isPaused())
      fresh_nyi_loop("=resumed")()
      local r = s:stop()
      assert.is_nil(find_site(r.sites, function(x) return x.location == "paused:1" end))
      assert.is_true(find_site(r.sites, function(x) return x.location == "resumed:1" end).count >= 1)
    end)

    it("writes the report to the file given to stop", function()
      local path = os.tmpname()
      local s = profile.trace()
      fresh_nyi_loop("=written")()
      local r = s:stop(path)
      assert.equal(tostring(r), read(path))
      os.remove(path)
    end)

    it("keeps the report when the file cannot be written", function()
      local s = profile.trace()
      fresh_nyi_loop("=kept")()
      local bad = "/nonexistent-dir/aborts.csv"
      local ok, err = pcall(s.stop, s, bad)
      assert.is_false(ok)
      assert.matches("TraceSession:stop: cannot write '/nonexistent-dir/aborts.csv': No such file", err, 1, true)
      assert.is_false(s:isRunning())
      assert.is_nil(trace.active())
      local r = s:report()
      assert.is_true(r.totalAborts >= 1)
      assert.equal("kept:1", r.sites[1].location)
      local path = os.tmpname()
      assert.equal(tostring(r), r:write(path))
      assert.equal(tostring(r), read(path))
      os.remove(path)
      local wok, werr = pcall(r.write, r, bad)
      assert.is_false(wok)
      assert.matches("TraceReport:write: cannot write '/nonexistent-dir/aborts.csv'", werr, 1, true)
    end)

    it("gives a snapshot report while running", function()
      local s = profile.trace()
      fresh_nyi_loop("=snap1")()
      local mid = s:report()
      fresh_nyi_loop("=snap2")()
      local r = s:stop()
      local function snap1(x) return x.location == "snap1:1" end
      assert.is_true(mid.totalAborts >= 1)
      assert.is_true(r.totalAborts > mid.totalAborts)
      -- snap1 stopped running before the snapshot: its count is final there.
      -- (Other sites may abort meanwhile: the runner's own code is traced too.)
      assert.equal(find_site(mid.sites, snap1).count, find_site(r.sites, snap1).count)
      assert.is_nil(find_site(mid.sites, function(x) return x.location == "snap2:1" end))
    end)

    it("chains to a trace handler attached before and restores it at stop", function()
      local seen = {}
      local function mine(what) seen[#seen + 1] = what end
      jit.attach(mine, "trace")
      local s = profile.trace()
      fresh_nyi_loop("=chained1")()
      local during = #seen
      local r = s:stop()
      fresh_nyi_loop("=chained2")()
      jit.attach(mine)
      assert.is_true(r.totalAborts >= 1)
      assert.is_true(during >= 2 * r.totalAborts, "events seen by the earlier handler during the session: " .. during)
      assert.is_true(#seen >= during + 2, "the earlier handler was not restored")
    end)

    it("keeps -jv printing during and after the session", function()
      local out = os.tmpname()
      local v = require("jit.v")
      v.on(out)
      local s = profile.trace()
      fresh_nyi_loop("=withjv1")()
      local r = s:stop()
      fresh_nyi_loop("=withjv2")()
      v.off()
      local text = read(out)
      os.remove(out)
      local during = select(2, text:gsub("withjv1:1 %-%- NYI: bytecode", ""))
      local after = select(2, text:gsub("withjv2:1 %-%- NYI: bytecode", ""))
      assert.is_true(r.totalAborts >= 1)
      assert.equal(r.totalAborts, during)
      assert.is_true(after >= 1)
    end)

    it("leaves a handler attached during the session in place at stop", function()
      local s = profile.trace()
      local seen = 0
      local function later() seen = seen + 1 end
      jit.attach(later, "trace")
      s:stop()
      fresh_nyi_loop("=later")()
      jit.attach(later)
      assert.is_true(seen >= 2)
    end)
  end)

  describe("errors", function()
    it("starting while a session is active", function()
      local s = profile.trace()
      local ok, err = pcall(profile.trace)
      assert.is_false(ok)
      assert.matches("profile.trace: a trace session is already active", err, 1, true)
      s:stop()
      profile.trace():stop() -- and another can start after stop
    end)

    it("stop twice, pause/resume after stop", function()
      local s = profile.trace()
      s:stop()
      for _, m in ipairs({ "stop", "pause", "resume" }) do
        local ok, err = pcall(s[m], s)
        assert.is_false(ok)
        assert.matches("TraceSession:" .. m .. ": session already stopped", err, 1, true)
      end
    end)

    local bad = {
      { { includeBenign = 1 }, "option 'includeBenign' must be a boolean (got number 1)" },
      { { includeBenign = "yes" }, "option 'includeBenign' must be a boolean" },
      { { includebenign = true }, "unknown option 'includebenign' (known options: includeBenign)" },
      { { true }, "unknown option" },
      { "benign", "bad argument #1 'opts' (table or nil expected, got string \"benign\")" },
    }
    for _, case in ipairs(bad) do
      it("rejects " .. (type(case[1]) == "table" and tostring(next(case[1])) or tostring(case[1])), function()
        local line = debug.getinfo(1, "l").currentline + 1
        local ok, err = pcall(function() local s = profile.trace(case[1]); return s end)
        assert.is_false(ok)
        assert.matches("trace_spec.lua:" .. line .. ": profile.trace: ", err, 1, true)
        assert.matches(case[2], err, 1, true)
        assert.is_nil(trace.active(), "no half-started session")
      end)
    end

    it("method called with a dot", function()
      local s = profile.trace()
      for _, m in ipairs({ "stop", "pause", "resume", "report" }) do
        local ok, err = pcall(s[m])
        assert.is_false(ok)
        assert.matches("TraceSession:" .. m .. ": called on nil; use a colon", err, 1, true)
      end
      local r = s:stop()
      local ok, err = pcall(r.write, "x.csv")
      assert.is_false(ok)
      assert.matches('TraceReport:write: called on string "x.csv"; use a colon, e.g. report:write()', err, 1, true)
    end)

    it("bad filename leaves the session running", function()
      local s = profile.trace()
      local ok, err = pcall(s.stop, s, 42)
      assert.is_false(ok)
      assert.matches("TraceSession:stop: bad argument #1 'filename'", err, 1, true)
      assert.is_true(s:isRunning())
      s:stop()
    end)
  end)

  describe("reasons", function()
    local fmt = traceerr.new(vmdef)

    it("fill in opcode names, builtin names, numbers and pass error values through", function()
      local code = {}
      for i = 0, #vmdef.traceerr do code[vmdef.traceerr[i]:gsub("%%[ds]$", "")] = i end
      local fnew = (vmdef.bcnames:find("FNEW ", 1, true) - 1) / 6
      assert.equal("NYI: bytecode FNEW", fmt:reason(code["NYI: bytecode "], fnew))
      assert.equal("NYI: unsupported variant of FastFunc string.rep",
        fmt:reason(code["NYI: unsupported variant of FastFunc "], string.rep))
      assert.equal("NYI: unsupported variant of FastFunc string.format",
        fmt:reason(code["NYI: unsupported variant of FastFunc "], string.format))
      assert.equal("NYI: cannot assemble IR instruction " .. vmdef.irnames:sub(1, 6):gsub("%s+$", ""),
        fmt:reason(code["NYI: cannot assemble IR instruction "], 0))
      assert.equal('a "string", error', fmt:reason('a "string", error'))
      assert.equal("blacklisted", fmt:reason(code["blacklisted"]))
      assert.is_true(fmt:is_blacklisted_reason(code["blacklisted"]))
      assert.is_true(fmt:is_benign(code["leaving loop in root trace"]))
      assert.is_true(fmt:is_benign(code["inner loop in root trace"]))
      assert.is_true(fmt:is_benign(code["down-recursion, restarting"]))
      assert.is_false(fmt:is_benign(code["trace too long"]))
      assert.is_false(fmt:is_benign("leaving loop in root trace")) -- only codes
    end)

    it("built-in tables agree with this VM's jit.vmdef", function()
      local fallback = traceerr.new(nil)
      for i = 0, #vmdef.traceerr do
        local function template(t) return (t:gsub("%%[dsp]", "%%?")) end
        assert.equal(template(vmdef.traceerr[i]), template(fallback.messages[i]))
      end
      assert.is_true(fallback:knows_opcodes(), "no built-in opcode list matched this VM")
      assert.is_string(fallback.opcode_list)
      for op = 0, #vmdef.bcnames / 6 - 1 do
        assert.equal(fmt:opname(op), fallback:opname(op))
      end
      assert.equal("NYI: bytecode FNEW" .. traceerr.FALLBACK_NOTE,
        fallback:reason(7, (vmdef.bcnames:find("FNEW ", 1, true) - 1) / 6))
    end)

    it("work without jit.vmdef and say so", function()
      -- The hiding works on this VM: jit.vmdef and jit.zone cannot be
      -- loaded, while the package can.
      local probe = io.popen(LUAJIT .. " " .. HIDE_JIT_DIR .. [[ -e "print(pcall(require, 'jit.vmdef'),]] ..
        [[ pcall(require, 'jit.zone'), pcall(require, 'tecs.profile.trace.reasons'))"]])
      local out = probe:read("*a")
      probe:close()
      assert.matches("^false\tfalse\ttrue\t", out)
      for _, name in ipairs({ "nyi", "cfunc" }) do
        local with = sites_of((run_fixture(name)))
        local without = sites_of((run_fixture(name, { hide_vmdef = true })))
        assert.is_true(#with > 0, "no aborts in trace_" .. name .. ".lua")
        assert.equal(#with, #without)
        for i, s in ipairs(without) do
          assert.equal(with[i].reason .. traceerr.FALLBACK_NOTE, s.reason)
          assert.equal(with[i].count, s.count)
          assert.equal(with[i].location, s.location)
        end
      end
    end)
  end)

  describe("with the native sampler", function()
    local native_ok = pcall(require, "tecs.profile.native")

    -- Thousands of distinct hot loops: the JIT spends most of the time
    -- recording and compiling.
    local function recording_heavy(first, count)
      local sum = 0
      for k = first, first + count - 1 do
        local src = string.format([[
          local t, s = {}, %d
          for i = 1, 300 do
            local a = i * %d + s
            local b = (a %% 7) + (i %% 3) * 2
            t[(i %% 16) + 1] = a - b
            s = s + t[(i %% 16) + 1] * 0.5 + b - (a / 3)
            if s > 1e9 then s = s - 1e9 end
          end
          return s]], k, k % 13 + 1)
        sum = sum + assert(loadstring(src, "=hot" .. k))()
      end
      return sum
    end

    local function recerr_count(report)
      local n = 0
      for _, s in ipairs(report.sites) do if s.reason == RECERR then n = n + s.count end end
      return n
    end

    it("causes no aborts, while a Lua-callback sampler does", function()
      assert.is_true(native_ok, "native module not built")
      -- Native sampler: samples land while the JIT records and compiles
      -- (VM state J), yet no trace is aborted by them.
      local t = profile.trace()
      local s = profile.sample({ intervalMs = 0.1 })
      recording_heavy(1, 4000)
      local text = s:stop()
      local r = t:stop()
      local in_jit = 0
      for line in text:gmatch("[^\n]+") do
        if line:find("_%[J%] %d+$") then in_jit = in_jit + tonumber(line:match("(%d+)$")) end
      end
      assert.is_true(r.tracesStarted >= 4000, "traces started: " .. r.tracesStarted)
      assert.is_true(in_jit >= 100, "samples taken inside the JIT compiler: " .. in_jit)
      assert.equal(0, recerr_count(r))

      -- Contrast: jit.profile with a Lua callback aborts traces being
      -- recorded whenever a sample lands during recording.
      local jprofile = require("jit.profile")
      local lua_samples, hook_aborts, rounds = 0, 0, 0
      local t0 = os.clock()
      repeat
        rounds = rounds + 1
        local t2 = profile.trace()
        jprofile.start("li1", function(_, n) lua_samples = lua_samples + n end)
        recording_heavy(rounds * 10000, 2000)
        jprofile.stop()
        hook_aborts = hook_aborts + recerr_count(t2:stop())
      until hook_aborts >= 3 or os.clock() - t0 > 10
      assert.is_true(lua_samples > 0)
      assert.is_true(hook_aborts > 0, string.format(
        "no '%s' aborts from the Lua callback in %d samples", RECERR, lua_samples))
    end)
  end)
end)
