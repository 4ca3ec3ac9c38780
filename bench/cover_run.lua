--- Runs one program under one coverage configuration, for bench/cover.lua:
--
--   luajit bench/cover_run.lua CONFIG program.lua args...
--
-- CONFIG: none (plain run), cover (profile.coverage, JIT on), hook (a Lua
-- line hook, debug.sethook(f, "l"), counting lines), hook-nojit (the same
-- hook after jit.off()). Prints the CPU
-- time of the program on stderr as `seconds=N`.
local config, path = arg[1], arg[2]
local args = {}
for i = 3, #arg do args[#args + 1] = arg[i] end
arg = { [0] = path, unpack(args) }

-- CPU time: on a shared machine it varies far less than wall time, and the
-- program is single-threaded.
local clock = os.clock

local session
local counts = {}
local t0 = clock()
if config == "cover" then
  -- The program and the modules it requires from the current directory.
  -- COVER_INCLUDE adds one more pattern (the libraries a program drives).
  session = require("tecs.profile").coverage({
    include = { "^" .. path:gsub("%p", "%%%0") .. "$", "^%./", os.getenv("COVER_INCLUDE") } })
elseif config == "hook" or config == "hook-nojit" then
  -- The least a hook-based counter can do: no debug.getinfo to tell files
  -- apart (luacov calls it on every line, which costs far more).
  if config == "hook-nojit" then jit.off() end
  debug.sethook(function(_, line)
    counts[line] = (counts[line] or 0) + 1
  end, "l")
elseif config ~= "none" then
  error("unknown configuration " .. tostring(config))
end
local f = assert(loadfile(path))
f(unpack(args))
debug.sethook()
local elapsed = clock() - t0
if session then
  session:stop()
  local st = session:stats()
  io.stderr:write(string.format("lines=%d hit=%d skipped=%d\n", st.lines, st.linesHit, #st.skipped))
end
io.stderr:write(string.format("seconds=%.4f\n", elapsed))
