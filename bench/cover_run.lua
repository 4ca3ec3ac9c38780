--- Runs one program under one coverage configuration, for bench/cover.lua:
--
--   luajit bench/cover_run.lua CONFIG program.lua args...
--
-- CONFIG: none (plain run), cover (profile.coverage, JIT on), hook (a line
-- hook counting lines, as hook-based coverage tools do), hook-nojit (the
-- same hook with jit.off(), how luacov runs by default). Prints the wall
-- time of the program on stderr as `seconds=N`.
local config, path = arg[1], arg[2]
local args = {}
for i = 3, #arg do args[#args + 1] = arg[i] end
arg = { [0] = path, unpack(args) }

local clock = os.clock
local ok_socket, socket = pcall(require, "socket")
if ok_socket and socket.gettime then clock = socket.gettime end

local session
local counts = {}
local t0 = clock()
if config == "cover" then
  -- The program and the modules it requires from the current directory.
  session = require("tecs.profile").coverage({ include = { "^" .. path:gsub("%p", "%%%0") .. "$", "^%./" } })
elseif config == "hook" or config == "hook-nojit" then
  if config == "hook-nojit" then jit.off() end
  debug.sethook(function(_, line)
    local src = debug.getinfo(2, "S").source
    local t = counts[src]
    if not t then t = {}; counts[src] = t end
    t[line] = (t[line] or 0) + 1
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
