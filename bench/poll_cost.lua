--- Cost of the control channel to a program that listens and that nobody
-- drives: `profile.poll()` with no channel and with one open, and, under
-- LÖVE (when `love` and `xvfb-run` are installed), `love.timer.step`
-- plain and with the channel's per-frame poll in front of it. CPU time of
-- this thread, medians over alternating rounds, nanoseconds per call.
--
--   luajit bench/poll_cost.lua            (prints a Markdown table)
--   love DIR (main.lua: TECS_POLL_COST_LOVE=1, dofile this file)
local bench_dir = arg and arg[0] and arg[0]:match("^(.*)/[^/]*$")
  or os.getenv("TECS_POLL_COST_BENCH_DIR") or "."
package.path = bench_dir .. "/?.lua;" .. package.path

local clock = require("clock")
local profile = require("tecs.profile")

local REPS = tonumber(os.getenv("BENCH_REPS") or "7")
local CALLS = 200000

local function median(t)
  table.sort(t)
  return t[math.floor((#t + 1) / 2)]
end

-- Nanoseconds per call of `f`, medians of REPS rounds of each case, the
-- cases alternating so that a machine's drift falls on all of them.
local function measure(cases)
  local results = {}
  for _, c in ipairs(cases) do results[c] = {} end
  for _ = 1, REPS do
    for _, c in ipairs(cases) do
      if c.before then c.before() end
      local f = c.call
      local t0 = clock.cpu()
      for _ = 1, CALLS do f() end
      local t = clock.cpu() - t0
      if c.after then c.after() end
      table.insert(results[c], t / CALLS * 1e9)
    end
  end
  local rows = {}
  for _, c in ipairs(cases) do rows[#rows + 1] = string.format("| %s | %.0f |", c.label, median(results[c])) end
  return rows
end

local listening = {
  before = function() profile.listen() end,
  after = function() profile.close() end,
}

if os.getenv("TECS_POLL_COST_LOVE") then
  local rows
  function love.load()
    local step = function() love.timer.step() end
    rows = measure({
      { label = "LÖVE: `love.timer.step`, not listening", call = step },
      { label = "LÖVE: `love.timer.step`, listening, nobody connected", call = step,
        before = listening.before, after = listening.after },
    })
    io.stdout:write(table.concat(rows, "\n"), "\n")
    love.event.quit()
  end
  return
end

local rows = measure({
  { label = "`profile.poll()`, not listening", call = profile.poll },
  { label = "`profile.poll()`, listening, nobody connected", call = profile.poll,
    before = listening.before, after = listening.after },
})
print("| case | ns per call |")
print("|---|---:|")
print(table.concat(rows, "\n"))
local function have(cmd) return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == 0 end
if have("love") and have("xvfb-run") then
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'") == 0)
  local f = assert(io.open(dir .. "/main.lua", "w"))
  f:write("dofile(os.getenv('TECS_POLL_COST_BENCH_DIR') .. '/poll_cost.lua')\n")
  f:close()
  local p = assert(io.popen("TECS_POLL_COST_LOVE=1 TECS_POLL_COST_BENCH_DIR='" .. bench_dir
    .. "' xvfb-run -a love '" .. dir .. "' 2>/dev/null"))
  -- Only the table's rows: LÖVE's audio may say it found no device.
  for line in p:lines() do
    if line:sub(1, 1) == "|" then print(line) end
  end
  p:close()
  os.execute("rm -rf '" .. dir .. "'")
end
