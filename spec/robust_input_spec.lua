-- Bad input to every public function: a clear error naming the argument and
-- what was expected, raised at the caller's line, no crash, and no session
-- left half-started (a good session starts right after each case).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local sample = require("tecs.profile.sample")
local native = require("tecs.profile.native")

local KNOWN = (function()
  local names = native.options.sample.names
  assert(#names >= 6)
  return table.concat(names, ", ")
end)()

local THIS = "[^:]*robust_input_spec%.lua:%d+: "

local function good_session_starts()
  assert.is_nil(sample.active(), "no half-started session")
  local s = profile.sample()
  local text = s:stop()
  assert.is_string(text)
end

-- Calls f(...) from this file and returns the error message.
local function err_of(f, ...)
  local args = { n = select("#", ...), ... }
  -- (not a tail call: the error must point at this line)
  local ok, err = pcall(function() local r = f(unpack(args, 1, args.n)); return r end)
  assert.is_false(ok, "expected an error")
  assert.is_string(err)
  return err
end

describe("bad input", function()
  after_each(function()
    sessions.stop_all()
  end)

  describe("profile.sample options", function()
    local cases = {
      { { intervalMs = 0 }, "option 'intervalMs' must be a number of milliseconds from 0.1 to 60000 (got number 0)" },
      { { intervalMs = 0.05 }, "option 'intervalMs'" },
      { { intervalMs = 60001 }, "option 'intervalMs'" },
      { { intervalMs = math.huge }, "option 'intervalMs'" },
      { { intervalMs = -math.huge }, "option 'intervalMs'" },
      { { intervalMs = true }, "(got boolean)" },
      { { intervalMs = {} }, "(got table)" },
      { { intervalMs = print }, "(got function)" },
      { { zone = "///" }, "option 'zone' must be a non-empty zone path string" },
      { { zone = {} }, "option 'zone'" },
      { { zone = false }, "option 'zone'" },
      { { stackDepth = 1001 }, "option 'stackDepth' must be an integer from 1 to 1000 (got number 1001)" },
      { { stackDepth = -1 }, "option 'stackDepth'" },
      { { stackDepth = math.huge }, "option 'stackDepth'" },
      { { stackDepth = "8" }, "(got string \"8\")" },
      { { clock = "CPU" }, "option 'clock' must be \"cpu\" or \"wall\" (got string \"CPU\")" },
      { { clock = 1 }, "option 'clock'" },
      { { maxStacks = 0 }, "option 'maxStacks' must be an integer from 1 to 100000000 (got number 0)" },
      { { maxStacks = 1.5 }, "option 'maxStacks'" },
      { { maxStacks = 1e9 }, "option 'maxStacks'" },
      { { maxStacks = 0 / 0 }, "option 'maxStacks'" },
      { { resolveC = "yes" }, "option 'resolveC' must be a boolean (got string \"yes\")" },
      { { resolveC = 0 }, "option 'resolveC'" },
      { { intervalms = 1 }, "unknown option 'intervalms' (known options: " .. KNOWN .. ")" },
      { { [true] = 1 }, "unknown option boolean" },
      { { [2.5] = 1 }, "unknown option number 2.5" },
      { { 1, 2 }, "unknown option number 1" },
      { 42, "bad argument #1 'opts' (table or nil expected, got number 42)" },
      { true, "(table or nil expected, got boolean)" },
      { print, "(table or nil expected, got function)" },
      { ("x"):rep(100), "got string \"" .. ("x"):rep(37) .. "...\"" },
    }
    for i, case in ipairs(cases) do
      it("case " .. i .. ": " .. case[2]:sub(1, 50), function()
        local err = err_of(profile.sample, case[1])
        assert.matches("^" .. THIS .. "profile%.sample: ", err)
        assert.is_truthy(err:find(case[2], 1, true), err)
        good_session_starts()
      end)
    end

    it("a session already running in this state", function()
      local s = profile.sample()
      local err = err_of(profile.sample)
      assert.matches("^" .. THIS .. "profile%.sample: a sample session is already active", err)
      assert.is_true(s:isRunning())
      s:stop()
      good_session_starts()
    end)

    it("the native owner flag catches a start that bypasses the Lua shim", function()
      local s = profile.sample()
      local err = err_of(native.start, {})
      assert.matches("^" .. THIS .. "tecs%.profile%.native%.start: a sampling session is already running in this process", err)
      assert.is_true(s:isRunning())
      s:stop()
      good_session_starts()
    end)
  end)

  describe("SampleSession methods", function()
    local methods = { "stop", "pause", "resume", "collapsed", "write", "stats", "isRunning" }
    for _, m in ipairs(methods) do
      it(m .. " with a dot, on the wrong object, on the native handle", function()
        local s = profile.sample()
        local other = setmetatable({}, { __index = sample.SampleSession })
        for _, wrong in ipairs({ { nil, "nil" }, { {}, "table" }, { other, "table" }, { "s", "string \"s\"" },
                                  { 7, "number 7" }, { s._native, "userdata" } }) do
          local err = err_of(sample.SampleSession[m], wrong[1])
          assert.matches("^" .. THIS .. "SampleSession:" .. m .. ": called on ", err)
          assert.is_truthy(err:find("called on " .. wrong[2] .. "; use a colon, e.g. session:" .. m .. "()", 1, true), err)
        end
        assert.is_true(s:isRunning(), "the session survives misuse")
        s:stop()
        good_session_starts()
      end)
    end

    it("stop with a bad filename leaves the session running", function()
      local s = profile.sample()
      for _, bad in ipairs({ { 42, "number 42" }, { "", "string \"\"" }, { {}, "table" }, { true, "boolean" } }) do
        local err = err_of(s.stop, s, bad[1])
        assert.matches("^" .. THIS .. "SampleSession:stop: bad argument #1 'filename' %(non%-empty string or nil expected, got ", err)
        assert.is_truthy(err:find(bad[2], 1, true), err)
        assert.is_true(s:isRunning())
      end
      s:stop()
      good_session_starts()
    end)

    it("write needs a filename", function()
      local s = profile.sample()
      s:stop()
      for _, bad in ipairs({ nil, 1, "", {} }) do
        local err = err_of(s.write, s, bad)
        assert.matches("^" .. THIS .. "SampleSession:write: bad argument #1 'filename' %(non%-empty string expected", err)
      end
      good_session_starts()
    end)

    it("pause, resume and stop after stop", function()
      local s = profile.sample()
      s:stop()
      for _, m in ipairs({ "stop", "pause", "resume" }) do
        local err = err_of(s[m], s)
        assert.matches("^" .. THIS .. "SampleSession:" .. m .. ": session already stopped", err)
      end
      -- read-only methods keep working
      assert.is_string(s:collapsed())
      assert.is_false(s:stats().running)
      assert.is_false(s:isRunning())
      good_session_starts()
    end)
  end)

  describe("native module called directly", function()
    -- native.start takes profile.sample's options (declared once, natively)
    -- and, second, what the Lua layer adds (zones, ffnames, callSite, precise).
    local cases = {
      { { "x" }, "unknown option number 1" },
      { "x", "bad argument #1 'opts' (table or nil expected, got string \"x\")" },
      { { intervalMs = 0 }, "option 'intervalMs' must be a number of milliseconds from 0.1 to 60000 (got number 0)" },
      { { intervalMs = 1e12 }, "option 'intervalMs'" },
      { { intervalMs = 0 / 0 }, "option 'intervalMs'" },
      { { intervalMs = "1000" }, "(got string \"1000\")" },
      { { stackDepth = 0 }, "option 'stackDepth' must be an integer from 1 to 1000 (got number 0)" },
      { { stackDepth = 2.5 }, "option 'stackDepth'" },
      { { stackDepth = 2 ^ 63 }, "option 'stackDepth'" },
      { { zone = 5 }, "option 'zone' must be a non-empty zone path string" },
      { { clock = "gpu" }, "option 'clock' must be \"cpu\" or \"wall\" (got string \"gpu\")" },
      { { clock = {} }, "option 'clock'" },
      { { maxStacks = -1 }, "option 'maxStacks' must be an integer from 1 to 100000000" },
      { { maxStacks = 2 ^ 62 }, "option 'maxStacks'" },
      { { resolveC = 1 }, "option 'resolveC' must be a boolean" },
      { { format = "png" }, "option 'format' must be \"auto\" or \"collapsed\" or \"svg\" or \"speedscope\"" },
      { { bogus = 1 }, "unknown option 'bogus' (known options: " .. KNOWN .. ")" },
      { { [1] = 1 }, "unknown option number 1" },
    }
    local env_cases = {
      { { zones = "jit.zone" }, "bad argument #2 'env': field 'zones' must be a table" },
      { { ffnames = 3 }, "bad argument #2 'env': field 'ffnames' must be a table" },
      { { precise = "no" }, "bad argument #2 'env': field 'precise' must be a boolean" },
      { { callSite = 1 }, "bad argument #2 'env': field 'callSite' must be a function" },
      { { bogus = 1 }, "bad argument #2 'env': unknown field 'bogus'" },
      { 7, "bad argument #2 'env' (table or nil expected, got number 7)" },
    }
    for i, case in ipairs(env_cases) do
      it("start env case " .. i .. ": " .. case[2]:sub(1, 50), function()
        local err = err_of(native.start, {}, case[1])
        assert.matches("^" .. THIS .. "tecs%.profile%.native%.start: ", err)
        assert.is_truthy(err:find(case[2], 1, true), err)
        good_session_starts()
      end)
    end

    it("start returns the settings it runs with, defaults filled in", function()
      local h, settings = native.start({ zone = "a/b//", stackDepth = 8 })
      h:stop()
      assert.same({ intervalMs = 1, zone = "a/b", stackDepth = 8, clock = "cpu", precision = "auto",
        flushTraces = true, maxStacks = 100000, resolveC = true, nativeFrames = false, skipStartingThread = false,
        format = "auto",
        timelineSamples = 262144, loveZones = true, autosaveSeconds = 10 }, settings)
      good_session_starts()
    end)

    it("call returns errors as plain messages", function()
      local ok, err = native.call(native.raw.start, { bogus = 1 })
      assert.is_false(ok)
      assert.equal("unknown option 'bogus' (known options: " .. KNOWN .. ")", err)
      ok, err = native.call(native.raw.parseCollapsed, "a x\n")
      assert.is_false(ok)
      assert.matches("^line 1: ", err)
      assert.same({ true, 1 }, { native.call(function(x) return x end, 1) })
    end)

    for i, case in ipairs(cases) do
      it("start case " .. i .. ": " .. case[2]:sub(1, 50), function()
        local err = err_of(native.start, case[1])
        assert.matches("^" .. THIS .. "tecs%.profile%.native%.start: ", err)
        assert.is_truthy(err:find(case[2], 1, true), err)
        assert.is_nil(err:find("traceback", 1, true), "no traceback inside the message")
        good_session_starts()
      end)
    end

    it("start ignores non-string builtin names instead of failing", function()
      local h = native.start({}, { ffnames = { [0] = 5, [1] = "assert", x = {} } })
      h:stop()
      good_session_starts()
    end)

    it("parseCollapsed rejects non-strings and malformed text by line", function()
      assert.matches("^" .. THIS .. "tecs%.profile%.native%.parseCollapsed: bad argument #1 'text' %(string expected, got nil%)",
        err_of(native.parseCollapsed))
      assert.matches("got table", err_of(native.parseCollapsed, {}))
      assert.matches("line 2: count \"x\" is not a non%-negative integer", err_of(native.parseCollapsed, "a 1\nb x\n"))
      assert.matches("line 1: expected `frames count`", err_of(native.parseCollapsed, "nospace\n"))
      assert.same({ rows = 2, samples = 5 }, native.parseCollapsed("a;b_[N] 3\nc_[I] 2\n"))
    end)

    it("session handle methods on the wrong object fail without crashing", function()
      local h = native.start({})
      for _, m in ipairs({ "stop", "pause", "resume", "collapsed", "stats", "running" }) do
        for _, wrong in ipairs({ {}, 5, "x" }) do
          local ok, err = pcall(h[m], wrong)
          assert.is_false(ok)
          assert.matches("bad argument `self` to `NativeSession." .. m .. "`", tostring(err))
          assert.matches("expected userdata of type 'NativeSession'", tostring(err))
        end
        local ok, err = pcall(h[m])
        assert.is_false(ok)
        assert.matches("bad argument `self`", tostring(err))
      end
      assert.is_true(h:running())
      h:stop()
      h:stop() -- a second stop is harmless
      assert.is_false(h:running())
      good_session_starts()
    end)
  end)

  describe("native failures under a public name", function()
    local report = require("tecs.profile.report")
    local TEXT = "a;b 3\n"
    local cases = {
      { report.report, { TEXT, { mode = "m500" } }, "profile.report: option 'minPercent' must be a percentage" },
      { report.report, { TEXT, { by = "caller" } }, "profile.report: option 'by' must be \"function\" or" },
      { report.report, { "a 1\nb x\n" }, "profile.report: bad argument #1 'source': not collapsed-stack text (line 2: " },
      { report.hotAborts, { TEXT, { sites = { 5 } } }, "profile.hotAborts: bad argument #2 'trace': " },
      { report.flamegraph, { TEXT, { frames = "stack" } }, "profile.flamegraph: option 'frames' must be \"line\" or \"function\"" },
      { report.speedscope, { TEXT, { intervalMs = 0 } }, "profile.speedscope: option 'intervalMs' must be a positive number" },
    }
    for i, case in ipairs(cases) do
      it("case " .. i .. ": " .. case[3]:sub(1, 50), function()
        local err = err_of(case[1], unpack(case[2]))
        assert.matches("^" .. THIS, err)
        assert.is_truthy(err:find(case[3], 1, true), err)
        assert.is_nil(err:find("runtime error", 1, true), err)
        assert.is_nil(err:find("traceback", 1, true), err)
      end)
    end

    it("the native declarations list the option names and the formats", function()
      local names = native.options.sample.names
      local sorted = {}
      for i, name in ipairs(names) do sorted[i] = name end
      table.sort(sorted)
      assert.same(sorted, names)
      assert.same({ "auto", "collapsed", "svg", "speedscope", "pprof", "firefox", "speedscope-timeline", "chrome-trace",
        "html" },
        native.formats)
      assert.same({ "speedscope-timeline", "chrome-trace", "html" }, native.timelineFormats)
      assert.equal(16, native.options.sample.defaults.stackDepth)
    end)
  end)
end)
