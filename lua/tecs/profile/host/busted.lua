--- Profile a whole busted run without touching the specs.
--
--    tecs-profile busted                                 -- busted in LuaJIT, with this helper
--    busted --helper=tecs.profile.busted                 -- writes busted.collapsed
--    TECS_PROFILE=run.collapsed busted --helper=tecs.profile.busted
--    busted --helper=tecs.profile.busted -Xhelper out=run.collapsed,intervalMs=5
--    busted --helper=tecs.profile.busted -Xhelper cover=coverage.info  -- coverage instead
--
-- One sampling session covers the run, from loading the helper to busted's
-- `exit` event, and is written as one collapsed-stack file. Samples taken
-- while a spec file runs carry a zone named after that file, so the profile
-- splits by file. LuaJIT has one profiler per process: specs that start
-- their own `profile.sample()` sessions cannot run under this helper.
-- Busted loads it as `tecs.profile.busted`, which returns this module.
-- @module tecs.profile.host.busted

local profile = require("tecs.profile")
local check = require("tecs.profile.check")
local busted_args = require("tecs.profile.host.busted_args")

-- Run by `tecs-profile busted`: the specs see the arguments of a plain
-- `luajit busted ...` once busted has parsed ours (the helper is loaded
-- after that, before any spec).
require("tecs.profile.cli.program").settle()

-- Helper arguments (`-Xhelper k=v,k=v`) arrive in the global `arg`.
local settings = busted_args.parse(arg)

-- `-Xhelper cover=coverage.info`: line coverage of the run instead of a
-- profile (the two would measure each other). With coverPreloaded=yes,
-- `tecs-profile busted` started the session before busted loaded anything.
if busted_args.covers(settings) then
  local coverage = require("tecs.profile.coverage")
  local early = coverage.current()
  if settings.coverPreloaded == "yes" and not early then
    error("tecs.profile.busted: coverPreloaded=yes needs tecs-profile busted (busted has loaded its modules"
      .. " before the helper runs; the command starts the coverage session before that)", 0)
  end
  return coverage.busted(require("busted"), settings.cover, busted_args.coverage_options(settings), early)
end
if settings.out == nil or settings.out == "" then settings.out = "busted.collapsed" end

-- Unset options keep profile.sample's defaults.
local function number_setting(name)
  local v = settings[name]
  if v == nil or v == "" then return nil end
  local n = tonumber(v)
  if not n then
    error(string.format("tecs.profile.busted: %s must be a number (got %s)", name, check.describe(v)), 0)
  end
  return n
end
local sample_opts = { intervalMs = number_setting("intervalMs"), stackDepth = number_setting("stackDepth") }

local busted = require("busted")
local zone = profile.zone()
local ok, session = pcall(profile.sample, sample_opts)
if not ok then error("tecs.profile.busted: " .. tostring(session):gsub("^.-: profile%.sample: ", "profile.sample: "), 0) end
local depth_at_file = {}

busted.subscribe({ "file", "start" }, function(file)
  depth_at_file[#depth_at_file + 1] = #zone
  zone(file.name)
  return nil, true
end)

busted.subscribe({ "file", "end" }, function()
  -- Pop our zone and anything a failing spec left pushed above it.
  local depth = table.remove(depth_at_file) or 0
  while #zone > depth do zone() end
  return nil, true
end)

busted.subscribe({ "exit" }, function()
  if session:isRunning() then
    local ok, err = pcall(session.stop, session, settings.out)
    local st = session:stats()
    if ok then
      io.stderr:write(string.format("tecs.profile.busted: %d samples written to %s\n", st.samples, settings.out))
    else
      -- The process is about to end: keep the profile in a temporary file
      -- rather than lose it.
      local base = os.tmpname()
      os.remove(base)
      local spare = base .. ".collapsed"
      local saved = pcall(session.write, session, spare)
      io.stderr:write("tecs.profile.busted: " .. tostring(err):gsub("%s*%(the session is stopped.*$", "") ..
        (saved and ("; the profile was saved to " .. spare) or "") .. "\n")
    end
  end
  return nil, true
end)

return { session = session, out = settings.out }
