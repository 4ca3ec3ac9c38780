-- autosavePath / autosaveSeconds: a running session's collapsed profile,
-- written from a thread of the profiler's, so that a program killed while
-- it hangs (even in a compiled loop, where LuaJIT never calls the
-- profiler's callback) leaves its profile. Work runs until the file shows
-- enough samples, never for a fixed time.
local profile = require("tecs.profile")
local native = require("tecs.profile.native")
local run = require("spec.support.run")

local function samples_in(path)
  local text = run.read(path)
  if not text then return nil end
  local ok, parsed = pcall(native.parseCollapsed, text)
  return ok and parsed.samples or nil, text
end

-- Spins (CPU time) until `done()` or `max_cpu` seconds of CPU time.
local function spin_until(done, max_cpu)
  local t0 = os.clock()
  local x = 0
  while not done() and os.clock() - t0 < max_cpu do
    for i = 1, 1e5 do x = x + i % 7 end
  end
  return x
end

describe("autosave", function()
  local dir
  before_each(function() dir = run.tmpdir() end)
  after_each(function() os.execute("rm -rf " .. run.quote(dir)) end)

  it("writes at the start, while the session runs, and every sample at the stop", function()
    local path = dir .. "/auto.collapsed"
    local s = profile.sample({ autosavePath = path, autosaveSeconds = 0.1 })
    local first = samples_in(path)
    assert.is_not_nil(first, "written at the start")
    -- A later write holds more samples than the first.
    spin_until(function()
      local n = samples_in(path)
      return n and n > first + 20
    end, 30)
    assert.is_true(samples_in(path) > first + 20, "written again while running")
    local text = s:stop()
    local at_stop = native.parseCollapsed(text).samples
    assert.equal(at_stop, samples_in(path), "the last write holds every sample of the session")
  end)

  it("refuses a path it cannot write, naming the option, and leaves no session running", function()
    local ok, err = pcall(profile.sample, { autosavePath = dir .. "/no/such/dir/x.collapsed" })
    assert.is_false(ok)
    assert.matches("profile.sample: option 'autosavePath': cannot write '.*no/such/dir/x.collapsed'", err)
    profile.sample():stop()
    ok, err = pcall(profile.sample, { autosaveSeconds = 1 })
    assert.is_false(ok)
    assert.matches("option 'autosaveSeconds' goes with option 'autosavePath'", err, 1, true)
    ok, err = pcall(profile.sample, { autosavePath = dir .. "/x", autosaveSeconds = 0 })
    assert.is_false(ok)
    assert.matches("option 'autosaveSeconds' must be a number of seconds from 0.1 to 86400 (got number 0)", err, 1,
      true)
  end)

  it("leaves the profile of a process killed while it spins in a compiled loop", function()
    local script, path = dir .. "/hang.lua", dir .. "/hang.collapsed"
    run.write(script, [[
local profile = require("tecs.profile")
profile.sample({ autosavePath = arg[1], autosaveSeconds = 0.2 })
local function spin()
  local x = 0
  while true do x = x + 1 end -- SPIN: compiled, never at a safe point
end
spin()
]])
    -- The child is killed once the file shows the loop with 200 samples
    -- (60 s at most, a failure guard: the loop takes samples as fast as
    -- the machine gives it CPU time).
    local check = string.format([[luajit -e 'local f = io.open(%q); local t = f and f:read("*a") or ""; ]] ..
      [[local n = tonumber(t:match("hang.lua:5_%%[N%%] (%%d+)") or 0); os.exit(n >= 200 and 0 or 1)']], path)
    local rc, out = run.run(string.format(
      "%s %s %s & p=$!; i=0; while [ $i -lt 600 ]; do if %s; then break; fi; sleep 0.1; i=$((i+1)); done; " ..
      "kill -9 $p; wait $p; echo waited $i", run.luajit, run.quote(script), run.quote(path), check))
    assert.matches("waited %d+", out)
    local n, text = samples_in(path)
    assert.is_not_nil(n, "the file is whole collapsed text: " .. tostring(text))
    local loop = tonumber(text:match("hang%.lua:7;[^;]*hang%.lua:5_%[N%] (%d+)"))
    assert.is_not_nil(loop, text)
    assert.is_true(loop >= 200, text)
    -- The loop is where the time went: the heaviest line.
    assert.matches("^[^\n]*hang.lua:5_%[N%]", text)
  end)

  it("writes a second after the start, long before its period: a hang killed early leaves its samples", function()
    local script, path = dir .. "/early.lua", dir .. "/early.collapsed"
    -- A period of an hour: only the early first write can show the loop
    -- before the child is killed.
    run.write(script, [[
local profile = require("tecs.profile")
profile.sample({ autosavePath = arg[1], autosaveSeconds = 3600 })
local function spin()
  local x = 0
  while true do x = x + 1 end -- SPIN
end
spin()
]])
    -- The child is killed once the file shows the loop (60 s at most, a
    -- failure guard; the write comes a second after the start, and the
    -- loop takes samples as fast as the machine gives it CPU time).
    local check = string.format([[luajit -e 'local f = io.open(%q); local t = f and f:read("*a") or ""; ]] ..
      [[local n = tonumber(t:match("early.lua:5_%%[N%%] (%%d+)") or 0); os.exit(n >= 1 and 0 or 1)']], path)
    local rc, out = run.run(string.format(
      "%s %s %s & p=$!; i=0; while [ $i -lt 600 ]; do if %s; then break; fi; sleep 0.1; i=$((i+1)); done; " ..
      "kill -9 $p; wait $p; echo waited $i", run.luajit, run.quote(script), run.quote(path), check))
    local waited = tonumber(out:match("waited (%d+)"))
    assert.is_number(waited, out)
    assert.is_true(waited < 600, "no write showed the loop within 60 s:\n" .. tostring(run.read(path)))
    local n, text = samples_in(path)
    assert.is_not_nil(n, "the file is whole collapsed text: " .. tostring(text))
    assert.matches("early%.lua:7;[^;]*early%.lua:5_%[N%] %d+", text)
  end)
end)
