--- What line coverage costs: each program runs plain, under
-- profile.coverage (counters rewritten into the source, JIT on) and under a
-- Lua line hook (debug.sethook(f, "l"), with the JIT on and off), in fresh
-- processes, alternating configurations run by run. Prints median CPU
-- times (os.clock in the program's process) and the ratio to the plain run.
--
--   luajit bench/cover.lua [program-name ...]
--
-- Environment: BENCH_REPS (default 5; the hook configurations run once, they
-- are tens of times slower), LUAJIT, LUAJIT_BENCH_DIR (a checkout of
-- LuaJIT's bench/ folder: its programs join the list; they are not part of
-- this repository).
local REPS = tonumber(os.getenv("BENCH_REPS") or "5")
local LUAJIT = os.getenv("LUAJIT") or "luajit"
local LJ_DIR = os.getenv("LUAJIT_BENCH_DIR")
local HERE = (arg[0]:match("^(.*)/[^/]*$") or ".")

local function sh(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- LuaJIT's programs, with arguments for runs of a fraction of a second.
local LUAJIT_PROGRAMS = {
  { "scimark-lu", "1000" }, { "nbody", "1000000" }, { "spectral-norm", "1000" }, { "fannkuch", "10" },
  { "md5", "5000" }, { "ray", "5" }, { "series", "3000" }, { "binary-trees", "14" }, { "mandelbrot", "2000" },
}

local programs = {
  { name = "dkjson encode/decode", dir = ".", path = HERE .. "/programs/json_api.lua", args = "",
    include = "/dkjson%.lua$" },
  { name = "penlight text+tables", dir = ".", path = HERE .. "/programs/penlight_text.lua", args = "",
    include = "/pl/" },
}
if LJ_DIR then
  for _, p in ipairs(LUAJIT_PROGRAMS) do
    programs[#programs + 1] = { name = p[1], dir = LJ_DIR, path = p[1] .. ".lua", args = p[2] }
  end
end
local wanted = {}
for _, a in ipairs(arg) do wanted[a] = true end

local runner = (HERE:sub(1, 1) == "/" and HERE or (os.getenv("PWD") .. "/" .. HERE)) .. "/cover_run.lua"
local env = string.format("LUA_PATH=%s LUA_CPATH=%s", sh(os.getenv("PWD") .. "/lua/?.lua;" .. (os.getenv("LUA_PATH") or ";")),
  sh(os.getenv("PWD") .. "/build/lib/?.so;" .. (os.getenv("LUA_CPATH") or ";")))

local function run_once(p, config)
  local cmd = string.format("cd %s && %s COVER_INCLUDE=%s %s %s %s %s %s 2>&1 >/dev/null", sh(p.dir), env,
    sh(p.include or "^$"), LUAJIT, sh(runner), config, sh(p.path), p.args)
  local out = io.popen(cmd):read("*a")
  local s = tonumber(out:match("seconds=([%d.]+)"))
  if not s then error("run failed: " .. cmd .. "\n" .. out) end
  return s
end

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end

print(string.format("%-22s %9s %9s %7s %9s %7s %9s %7s", "program", "plain s", "cover s", "x", "hook s", "x",
  "hook-off", "x"))
for _, p in ipairs(programs) do
  if next(wanted) == nil or wanted[p.name] then
    local times = { none = {}, cover = {} }
    for _ = 1, REPS do
      for _, c in ipairs({ "none", "cover" }) do table.insert(times[c], run_once(p, c)) end
    end
    local plain, cover = median(times.none), median(times.cover)
    local hook, hook_off = run_once(p, "hook"), run_once(p, "hook-nojit")
    print(string.format("%-22s %9.3f %9.3f %7.2f %9.3f %7.1f %9.3f %7.1f", p.name, plain, cover, cover / plain,
      hook, hook / plain, hook_off, hook_off / plain))
  end
end
