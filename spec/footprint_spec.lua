-- What loading the profiler and running a session leave on the program's
-- Lua heap, which its collector marks on every cycle: a program with a
-- small live set that allocates fast pays for every kilobyte on every
-- cycle, and for every string of its string table. Each figure is measured
-- in a fresh process by spec/support/footprint.lua (live heap after full
-- collections, strings counted in the VM's own table: the same on every
-- run, whatever the machine's speed), against the budgets below, which
-- docs/api.md states. Loading is on use: `require` loads one module, a
-- session what it records with; the rest loads when first called, and
-- every function of the API still works after one `require` under either
-- name. Nothing else of ours goes into the program's VM: the probe that
-- proves the compiled-code reader runs in a VM of its own.
local proc = require("spec.support.run")

-- Live heap over the bare interpreter's, in KB.
local BUDGET_KB = {
  require = 32, -- require("tecs.profile")
  sample = 64, -- and a default sampling session running
  allocations = 64, -- and a default allocation session running
  trace = 96, -- and a trace session running, one trace completed
}

-- Modules that load on first use, never with `require` or a running
-- session: views, formats, file output, the trace tracker, the newProfiler
-- API, coverage, the timeline read back, the control channel and its
-- hosts' code, the command line, the MCP server, the pages.
local ON_USE = {
  "tecs.profile.report", "tecs.profile.output", "tecs.profile.funcmap", "tecs.profile.fs", "tecs.profile.csv",
  "tecs.profile.session.output", "tecs.profile.trace.report", "tecs.profile.new_profiler",
  "tecs.profile.coverage", "tecs.profile.timeline", "tecs.profile.listen", "tecs.profile.listen.snapshot", "tecs.profile.cli",
  "tecs.profile.mcp", "tecs.profile.page", "tecs.profile.cfuncs", "tecs.profile.callsite",
  "tecs.profile.host.love_zones", "tecs.profile.host.love", "tecs.profile.host.nginx", "tecs.profile.host.nvim",
  "tecs.profile.options_doc", "jit.vmdef",
}

-- What a sampling session needs only at its start and stop, not kept.
local NOT_KEPT_BY = {
  sample = { "tecs.profile.jitinfo", "tecs.profile.clock", "jit.util" },
}

-- Modules no session loads into the program's VM (the compiled-code probe
-- once loaded the FFI there, and its hundred-odd type names stayed in the
-- string table for good).
local NEVER = { "ffi" }

-- Strings interned over the VM before, counted after full collections: by
-- `require` (its module's names and constants), and by a first session and
-- its stop (the constants of the modules it records with, the session
-- class's method names). A second session adds none.
local STRINGS = { require = 24, first = 120 }

-- Registry keys by name a first session adds (docs/api.md, "What loading it
-- costs a program"), besides `LOADLIB: <the native module's path>` and
-- LuaJIT's `_VMEVENTS`; the others are mlua's (light userdata at the native
-- module's own statics, `luaL_ref` slots).
local REGISTRY_NAMED = { ["tecs.profile.function_paths"] = true }

local function measure(kind)
  local rc, out = proc.run(string.format("%s spec/support/footprint.lua %s", proc.luajit, kind))
  assert.equal(0, rc, out)
  local kb = tonumber(out:match("kb=([%d.]+)"))
  assert(kb, out)
  local loaded = {}
  for name in (out:match("loaded=([^\n]*)") or ""):gmatch("%S+") do loaded[name] = true end
  return kb, loaded, out
end

describe("the profiler's footprint on the Lua heap", function()
  it("require('tecs.profile') loads that module alone, within its budget", function()
    local kb, loaded, out = measure("require")
    assert.same({ ["tecs.profile"] = true }, loaded)
    assert.is_true(kb <= BUDGET_KB.require, out)
  end)

  for _, kind in ipairs({ "sample", "allocations", "trace" }) do
    it("a running " .. kind .. " session stays within its budget and loads nothing on use", function()
      local kb, loaded, out = measure(kind)
      assert.is_true(kb <= BUDGET_KB[kind], string.format("%.1f KB over the budget of %d KB:\n%s", kb,
        BUDGET_KB[kind], out))
      for _, name in ipairs(ON_USE) do
        assert.is_nil(loaded[name], name .. " loaded by a running " .. kind .. " session")
      end
      for _, name in ipairs(NOT_KEPT_BY[kind] or {}) do
        assert.is_nil(loaded[name], name .. " kept by a running " .. kind .. " session")
      end
      for _, name in ipairs(NEVER) do
        assert.is_nil(loaded[name], name .. " loaded by a running " .. kind .. " session")
      end
    end)
  end

  -- `footprint.lua cycle [function]`, run once per precision.
  local cycles = {}
  local function cycle(precision)
    if not cycles[precision] then
      local rc, out = proc.run(string.format("%s spec/support/footprint.lua cycle %s", proc.luajit,
        precision == "function" and "function" or ""))
      assert.equal(0, rc, out)
      local c = { out = out }
      for k, v in out:gmatch("([%w_]+)=([^\n]*)") do c[k] = tonumber(v) or v end
      cycles[precision] = c
    end
    return cycles[precision]
  end

  local function named_keys(list)
    local keys = {}
    for k in (list .. "|"):gmatch("([^|]*)|") do
      if k ~= "" and not k:find("^%[") then keys[k] = true end
    end
    return keys
  end

  it("require interns its own names only, within a budget, and adds no registry entry", function()
    local c = cycle("default")
    assert.is_true(c.strings_require <= STRINGS.require, c.out)
    assert.equal("", c.registry_require, c.out)
  end)

  it("a session leaves the documented registry entries, and a second session nothing more", function()
    local c = cycle("default")
    local native = package.searchpath("tecs.profile.native", package.cpath)
    local expected = { ["LOADLIB: " .. native] = true }
    for k in pairs(REGISTRY_NAMED) do expected[k] = true end
    local named = named_keys(c.registry_first)
    named._VMEVENTS = nil -- LuaJIT's, made by the first jit.attach (some builds have it already)
    assert.same(expected, named, c.out)
    assert.equal(0, c.userdata_outside, c.out)
    assert.is_true(c.strings_first <= STRINGS.first, c.out)
    assert.equal(0, c.strings_again, c.out)
    assert.equal(c.registry_census_first, c.registry_census_again, c.out)
  end)

  it("the compiled-code probe leaves nothing in the program's VM: a default session interns what one "
    .. "that reads no compiled code does", function()
    local exact, plain = cycle("default"), cycle("function")
    assert.truthy(exact.out:find("compiled=read", 1, true), exact.out)
    assert.truthy(plain.out:find("compiled=off", 1, true), plain.out)
    -- A default session attaches the trace map's VM event handlers: LuaJIT
    -- keeps them in its registry table `_VMEVENTS`, whose name it interns
    -- where no `jit.attach` made it before.
    local vmevents = (named_keys(exact.registry_first)._VMEVENTS and 1 or 0)
      - (named_keys(plain.registry_first)._VMEVENTS and 1 or 0)
    assert.equal(plain.strings_first + vmevents, exact.strings_first, exact.out .. "\n" .. plain.out)
    assert.equal(plain.strings_require, exact.strings_require)
    assert.equal(0, exact.strings_again, exact.out)
  end)

  it("a session's stop compiles none of the profiler's own code into the program's trace cache", function()
    if not (jit and jit.status()) then
      pending("the JIT compiler is off")
      return
    end
    -- The stop names the functions the samples met (the C functions of
    -- the loaded modules, walked with `next` over `package.loaded` and the
    -- globals): loops the JIT would compile, were they the program's. In a
    -- process of its own, where no test framework's code is on the path.
    local rc, out = proc.run(proc.luajit .. " spec/fixtures/stop_traces.lua")
    assert.equal(0, rc, out)
    assert.equal("0", out:match("started (%d+)"), out)
  end)

  it("profile.frame() and profile.poll() allocate nothing, with or without a session", function()
    local rc, out = proc.run(proc.luajit .. " spec/support/footprint.lua frame")
    assert.equal(0, rc, out)
    -- Over 10000 calls of each: no collection in between, so any allocation
    -- per call would show as hundreds of KB. Without a session they read
    -- `package.loaded` and return; a running session's mark is native (what
    -- its samples allocate meanwhile, now and then, stays well under 1 KB).
    assert.equal(0, tonumber(out:match("kb=([%d.]+)")), out)
    assert.is_true(tonumber(out:match("kb_running=([%d.]+)")) < 1, out)
  end)

  it("every function of the API works after one require, under both names, loading its module then", function()
    local rc, out = proc.run(proc.luajit .. " " .. proc.quote([[-e
      local profile = require("tecs.utils.profile")
      assert(require("tecs.profile") == profile)
      local function loaded(name) return package.loaded[name] ~= nil end
      assert(not loaded("tecs.profile.sample") and not loaded("tecs.profile.native"))
      local s = profile.sample({ intervalMs = 1 })
      assert(loaded("tecs.profile.sample") and not loaded("tecs.profile.report"))
      profile.frame()
      local x = 0
      local t0 = os.clock()
      while s:stats().samples < 5 and os.clock() - t0 < 60 do for i = 1, 1e5 do x = (x + i) % 7 end end
      profile.frame()
      assert(#s:frames() == 2 and not loaded("tecs.profile.report"))
      local text = s:stop()
      assert(text:find("_%[[NICGJ]%] %d+"), text)
      assert(not loaded("tecs.profile.report"))
      assert(profile.report(text):find("samples", 1, true) and loaded("tecs.profile.report"))
      assert(profile.flamegraph(text):find("<svg", 1, true))
      assert(profile.speedscope(text):find("speedscope", 1, true))
      assert(#profile.pprof(text) > 0)
      assert(profile.render(text, "firefox"):find("{", 1, true))
      local t = profile.trace()
      assert(loaded("tecs.profile.trace"))
      local report = t:stop()
      assert(report.totalAborts == 0 and tostring(report):find("^severity,count,reason,location,zone"))
      assert(type(profile.hotAborts(text, report)) == "string")
      local a = profile.allocations()
      for i = 1, 1e4 do x = { i } end
      a:stop()
      assert(loaded("tecs.profile.allocations"))
      local p = assert(profile.newProfiler("call"))
      assert(loaded("tecs.profile.new_profiler"))
      p:start() p:stop()
      assert(p:report():find("Total", 1, true) or #p:report() > 0)
      local c = profile.coverage()
      c:stop()
      assert(loaded("tecs.profile.coverage"))
      assert(profile.poll() == 0 and not loaded("tecs.profile.listen"))
      profile.close()
      assert(type(profile.zone()) == "table" and type(profile.listen) == "function")
      io.write("OK")
    ]]))
    assert.equal(0, rc, out)
    assert.equal("OK", out)
  end)
end)
