-- The trace tracker's severities (blacklist, warn, info) and locations
-- (file:line, the Lua line calling a builtin, the zone path), on fixtures
-- run in a fresh LuaJIT and on code run in-process.
local profile = require("tecs.profile")
local zone = require("jit.zone")
local t = require("spec.support.trace")

local run_fixture, sites_of, find_site, fresh_nyi_loop = t.run_fixture, t.sites_of, t.find_site, t.fresh_nyi_loop

describe("profile.trace", function()
  after_each(t.stop_active)

  describe("severities", function()
    it("NYI bytecode is a warn named by opcode", function()
      local records, _, _, csv = run_fixture("nyi")
      local sites = sites_of(records)
      local fnew = find_site(sites, function(s) return s.reason == "NYI: bytecode FNEW" end)
      assert.is_table(fnew, csv)
      assert.is_true(fnew.count >= 2, csv)
      assert.same({ severity = "warn", count = fnew.count, reason = "NYI: bytecode FNEW",
                    location = "spec/fixtures/trace_nyi.lua:4", zone = "" }, fnew)
      -- Usually the only site. About one run in hundreds (not reproduced in
      -- isolation; LuaJIT's hot counters are slots shared by bytecode
      -- address, which varies between runs) the report has a second one:
      -- further sites are allowed, in the fixture and not blacklisted.
      for _, s in ipairs(sites) do
        assert.is_truthy(s.location:find("^spec/fixtures/trace_nyi%.lua:%d+$"), csv)
        assert.not_equal("blacklist", s.severity, csv)
      end
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

  describe("locations", function()
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
      -- (Other sites come from the test runner's own code, traced too.)
      local site = find_site(r.sites, function(x) return x.reason == "NYI: unsupported C function type" end)
      assert.is_table(site, "no abort for the C call in:\n" .. tostring(r))
      assert.is_true(site.count >= 1)
      assert.equal("in_builtin:3", site.location)
    end)

    it("records the zone path at abort time", function()
      local s = profile.trace()
      -- Three fresh loops each: whether one loop gets hot enough to be
      -- recorded depends on hot counters it shares with all other code.
      zone("update") zone("ai")
      for _ = 1, 3 do fresh_nyi_loop("=zoned", 3000)() end
      zone() zone()
      for _ = 1, 3 do fresh_nyi_loop("=unzoned", 3000)() end
      local r = s:stop()
      assert.equal("update/ai", find_site(r.sites, function(x) return x.location == "zoned:1" end).zone)
      assert.equal("", find_site(r.sites, function(x) return x.location == "unzoned:1" end).zone)
    end)
  end)
end)
