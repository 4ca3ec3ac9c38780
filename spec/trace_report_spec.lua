-- The trace tracker's report: its fields and counts, its order, and its CSV
-- (written, read back, round-tripped through an independent RFC 4180 parser).
-- These tests run in-process: see spec/support/trace.lua on the test runner's
-- own traces.
local profile = require("tecs.profile")
local trace = require("tecs.profile.trace")
local zone = require("jit.zone")
local csv4180 = require("spec.support.csv4180")
local t = require("spec.support.trace")
local run = require("spec.support.run")

local find_site, fresh_nyi_loop = t.find_site, t.fresh_nyi_loop

describe("profile.trace", function()
  after_each(t.stop_active)

  describe("report", function()
    it("has the contract's fields and counts trace attempts", function()
      local s = profile.trace()
      fresh_nyi_loop("=report_fields")()
      -- At least 50 ms on the session's own monotonic clock. (os.clock is the
      -- whole process's CPU time: other threads of the test process can make
      -- it run faster than the wall clock.)
      local now = require("tecs.profile.clock").now
      local t0 = now()
      while now() - t0 < 0.05 do end
      local r = s:stop()
      assert.is_number(r.durationSec)
      assert.is_true(r.durationSec >= 0.05 and r.durationSec < 60, "durationSec " .. r.durationSec)
      -- The test runner's own code may start and abort traces while the
      -- session runs: its sites are left out, and the counts are checked
      -- with relations that hold whatever it adds.
      local own = t.own_sites(r.sites, "report_fields")
      assert.equal(1, #own, tostring(r))
      assert.is_true(own[1].count >= 2, "aborts: " .. own[1].count)
      assert.same({ severity = "warn", count = own[1].count, reason = "NYI: bytecode FNEW",
                    location = "report_fields:1", zone = "" }, own[1])
      assert.equal(t.total(r.sites), r.totalAborts)
      local blacklisted = 0
      for _, x in ipairs(r.sites) do if x.severity == "blacklist" then blacklisted = blacklisted + x.count end end
      assert.equal(blacklisted, r.blacklisted)
      assert.equal(r.tracesStarted, r.tracesCompleted + r.tracesAborted)
      assert.is_true(r.tracesAborted >= r.totalAborts, r.tracesAborted .. " < " .. r.totalAborts)
      assert.is_true(r.tracesAborted >= r.benignAborts)
      assert.is_false(r.includeBenign)
    end)

    it("leaves a trace whose end is not seen yet out of tracesStarted", function()
      -- In a process of its own (spec/fixtures/trace_unseen_end.lua), under
      -- a time limit: OpenResty's luajit2 was seen to hang, rarely (about 1
      -- run in 200), while Lua code runs inside its trace events; such a
      -- hang is reported and the run tried once more, not left to stall the
      -- suite.
      local cmd = "timeout 60 " .. run.quote(run.luajit) .. " spec/fixtures/trace_unseen_end.lua"
      local rc, out = run.run(cmd)
      if rc == 124 then
        io.stderr:write("trace_unseen_end.lua hung (", run.luajit, "); running it again\n")
        rc, out = run.run(cmd)
      end
      assert.equal(0, rc, out)
      local stops, aborts, uneven, started, completed, aborted =
        out:match("stops=(%d+) aborts=(%d+) uneven=(%S*) started=(%d+) completed=(%d+) aborted=(%d+)")
      assert.is_string(stops, out)
      started, completed, aborted = tonumber(started), tonumber(completed), tonumber(aborted)
      assert.is_true(aborted >= 1 and completed >= 1, out)
      -- Reports were taken in the middle of both kinds of ending.
      assert.is_true(tonumber(stops) >= 1 and tonumber(aborts) >= 1, out)
      assert.equal("", uneven, out)
      assert.equal(started, completed + aborted)
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
      -- Read back as `tecs-profile report --aborts` reads it.
      local back = assert(require("tecs.profile.trace.report").read_csv(text))
      for i, site in ipairs(r.sites) do
        assert.same({ severity = site.severity, count = site.count, reason = site.reason, location = site.location,
                      zone = site.zone }, back.sites[i])
      end
      assert.equal(#r.sites, #back.sites)
    end)

    it("reads CSV as an RFC 4180 parser does, and bare LF or CR line ends too (csv reader)", function()
      local csv = require("tecs.profile.csv")
      for _, text in ipairs({ "", "a", "a,b\r\n", "a,b\r\nc,d", 'x,"q""uo,te"\r\n,\r\n', "a,\r\n",
                              '"a\r\nb",c\r\n', "a,", ",", '""\r\n', '"",""\r\n"x\ny",\r\n' }) do
        assert.same(csv4180.parse(text), csv.parse(text), text)
      end
      assert.same({ { "a" }, { "b" }, { "c", "d" } }, csv.parse("a\nb\rc,d\r\n"))
      local records, err = csv.parse('a,"open\r\n')
      assert.is_nil(records)
      assert.equal("unterminated quoted field in record 1", err)
      local report = require("tecs.profile.trace.report")
      local none, why = report.read_csv("a,b\r\n")
      assert.is_nil(none)
      assert.equal("not a trace report CSV (no 'severity,...' header)", why)
      local sites = assert(report.read_csv("severity,count,reason,location,zone\n\nwarn,3,r,a.lua:1,z\n")).sites
      assert.same({ { severity = "warn", count = 3, reason = "r", location = "a.lua:1", zone = "z" } }, sites)
    end)

    it("quotes reasons with commas, quotes, CR and LF (csv writer)", function()
      local csv = require("tecs.profile.csv")
      local rows = {
        { "warn", 1, 'NYI: a "quoted", reason', "a.lua:1", "" },
        { "info", 2, "down-recursion, restarting", "b.lua:2", "x\r\ny" },
        { "warn", 3, "line\nbreak", "c.lua:3", 'z"' },
        { "warn", 4, "plain", "d.lua:4", "cr\ronly" },
      }
      local text = csv.document(require("tecs.profile.trace.report").COLUMNS, rows)
      local records = csv4180.parse(text)
      assert.same(records, csv.parse(text)) -- and our reader reads it back
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
      t.reset_hot_counters()
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

end)
