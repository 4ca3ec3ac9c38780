-- A collapsed file written by a session carries the functions the session
-- named (x.collapsed.functions.json): a report of the file names them as
-- the session did, after the source is gone, from another directory, and
-- through the command line.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local run = require("spec.support.run")

-- The rows of a text view, without its header lines.
local function rows(text)
  return (text:gsub("#[^\n]*\n", ""))
end

describe("the functions file beside a collapsed profile", function()
  after_each(sessions.stop_all)

  it("names the functions of a report of the file as the session did", function()
    local dir = run.tmpdir()
    run.write(dir .. "/crunchlib.lua", "local M = {}\nfunction M.crunch(n)\n  local s = 0\n" ..
      "  for i = 1, n do s = (s + i * 7) % 1000003 end\n  return s\nend\nreturn M\n")
    local lib = assert(loadfile(dir .. "/crunchlib.lua"))()
    local s = profile.sample({ intervalMs = 0.5 })
    while s:stats().recordedSamples < 200 do lib.crunch(1e5) end
    s:stop(dir .. "/run.collapsed")
    local in_session = rows(profile.report(s, { minPercent = 0 }))
    assert.matches("M%.crunch %(", in_session)
    local side = assert(run.read(dir .. "/run.collapsed.functions.json"), "no functions file")
    assert.matches('"version":1', side, 1, true)
    -- The source is gone: only the functions file can name M.crunch.
    os.remove(dir .. "/crunchlib.lua")
    assert.equal(in_session, rows(profile.report(dir .. "/run.collapsed", { minPercent = 0 })))
    -- From another directory, through the command line.
    local rc, out = run.run("cd / && " .. run.luajit .. " " .. run.quote(run.root .. "/bin/tecs-profile") ..
      " report --min 0 " .. run.quote(dir .. "/run.collapsed"))
    assert.equal(0, rc, out)
    assert.equal(in_session, rows(out))
    -- A functions file that cannot be read leaves the frames as lines.
    run.write(dir .. "/run.collapsed.functions.json", "not json")
    local plain = profile.report(dir .. "/run.collapsed", { minPercent = 0 })
    assert.is_nil(plain:find("M.crunch", 1, true), plain)
    os.execute("rm -rf " .. run.quote(dir))
  end)
end)
