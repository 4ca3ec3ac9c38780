-- A small LÖVE game profiled with tecs-profile.
--
--   love examples/love                  play; press P to save a profile and quit
--   love examples/love --seconds 3      save a profile after 3 s and quit
--   love examples/love --profiler jitp  the same with LuaJIT's jit.p, to compare
--   love examples/love --profiler alloc where the game allocates: an allocation
--                                       session, written as tecs-alloc.svg,
--                                       tecs-alloc.pb.gz and tecs-alloc.txt
--
-- The profile goes to the save directory (love.filesystem.getSaveDirectory())
-- as tecs.collapsed, with the function view as tecs-report.txt (jit.p's
-- report as jitp.txt), the timeline as tecs.trace.json (Perfetto) and the
-- report page as tecs-report.html. Paths, counters and the slowest frames
-- are printed on stdout.

-- Where the Lua package and the native module come from:
-- * run from this repository (`love examples/love`): lua/ and build/lib/
--   (`make build`) of the repository;
-- * a .love archive or a fused executable: the Lua files inside the archive
--   (LÖVE's require finds them there), the library either beside the
--   archive/executable (the entry added below) or in the save directory, where
--   LÖVE's own C loader looks for tecs/profile/native.so.
-- An installed rock needs none of this when LUA_PATH/LUA_CPATH point at it.
local function add_module_paths()
  local source = love.filesystem.getSource()
  if not love.filesystem.isFused() and source:find("examples/love/?$") then
    local root = source:gsub("/?examples/love/?$", "")
    if root == "" then root = "." end
    package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
    package.cpath = root .. "/build/lib/?.so;" .. package.cpath
  else
    package.cpath = love.filesystem.getSourceBaseDirectory() .. "/?.so;" .. package.cpath
  end
end
add_module_paths()

local game = require("game")
local profile = require("tecs.profile")
-- jit.zone, or a compatible zone stack when this LÖVE build ships without
-- LuaJIT's jit/*.lua (the profiler reads whichever this returns).
local zone = profile.zone()

local options = { seconds = nil, profiler = "tecs" }
local session, jitp, started, saved

local function save_path(name)
  return love.filesystem.getSaveDirectory() .. "/" .. name
end

local function save_and_quit()
  if saved then return end
  saved = true
  love.filesystem.createDirectory("") -- make sure the save directory exists
  if options.profiler == "jitp" then
    jitp.stop()
    print("jitp: " .. save_path("jitp.txt"))
  elseif options.profiler == "alloc" then
    local text = session:stop(save_path("tecs-alloc.svg"))
    love.filesystem.write("tecs-alloc.collapsed", text)
    session:write(save_path("tecs-alloc.pb.gz"))
    love.filesystem.write("tecs-alloc.txt", session:report({ by = "function", minPercent = 1 }))
    local st = session:stats()
    print(string.format("tecs-alloc: %s bytes=%d objects=%d samples=%d", save_path("tecs-alloc.svg"),
      st.allocatedBytes, st.allocatedObjects, st.samples))
  else
    local path = save_path("tecs.collapsed")
    local ok, err = pcall(session.stop, session, path)
    if not ok then
      -- The session keeps its text: print it rather than lose it.
      io.stderr:write(tostring(err), "\n")
      io.write(session:collapsed())
    end
    -- The game's functions are named even from a .love archive, whose
    -- sources no file path reaches: the session recorded them while sampling.
    love.filesystem.write("tecs-report.txt", profile.report(session, { minPercent = 1 }))
    local st = session:stats()
    print(string.format("tecs: %s samples=%d stacks=%d rate=%.0f/s clock=%s",
      path, st.samples, st.stacks, st.rate, st.clock))
    -- Frames are marked by the session itself (love.timer.step).
    session:write(save_path("tecs.trace.json"))
    session:write(save_path("tecs-report.html"))
    print("tecs: " .. save_path("tecs.trace.json") .. " " .. save_path("tecs-report.html"))
    io.write(require("tecs.profile.timeline").hitches_text(session:hitches(3), #session:frames()))
  end
  love.event.quit()
end

-- Unattended runs (--seconds) must not stop on LÖVE's error screen: print
-- the error and exit with status 1 instead.
local function unattended_errors()
  function love.errorhandler(msg)
    io.stderr:write("error: ", debug.traceback(tostring(msg), 2), "\n")
    return function() return 1 end
  end
end

function love.load(args)
  for i = 1, #args do
    if args[i] == "--seconds" then options.seconds = tonumber(args[i + 1]) end
    if args[i] == "--profiler" then options.profiler = args[i + 1] end
  end
  if options.seconds then unattended_errors() end
  game.load()
  love.filesystem.createDirectory("")
  if options.profiler == "jitp" then
    jitp = require("jit.p")
    jitp.start("fl", save_path("jitp.txt"))
  elseif options.profiler == "alloc" then
    -- The game allocates a few KiB a second: a sample every 256 bytes.
    session = profile.allocations({ bytesPerSample = 256 })
  else
    session = profile.sample({ intervalMs = 1 })
  end
  started = love.timer.getTime()
end

-- Each love.* callback is a zone of its own while a session runs
-- (`love.update`, `love.draw`); the game's zones nest inside.
function love.update(dt)
  zone("world")
  game.update(dt)
  zone()
  if options.seconds and love.timer.getTime() - started >= options.seconds then
    save_and_quit()
  end
end

function love.draw()
  game.draw()
end

function love.keypressed(key)
  if key == "p" then save_and_quit() end
  if key == "escape" then love.event.quit() end
end
