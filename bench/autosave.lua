--- Cost of autosave (`autosavePath`, `autosaveSeconds`) to the profiled
-- thread: the same work with no session, with a session, and with a
-- session writing its collapsed profile every 0.1 s (a hundred times the
-- default rate), with few stacks and with 10k unique stacks in the table.
-- CPU time of the profiled thread (the writer is a thread of its own) and
-- wall time, medians over alternating rounds.
--
--   luajit bench/autosave.lua
local bench_dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = bench_dir .. "/?.lua;" .. package.path

local clock = require("clock")
local profile = require("tecs.profile")

local REPS = tonumber(os.getenv("BENCH_REPS") or "7")
local path = os.tmpname()

-- Work whose stacks are `stacks` distinct ones: the leaf function is one
-- of `stacks` closures, each its own chunk (its own file:line frame).
local function make_work(stacks)
  local leaves = {}
  for i = 1, stacks do
    leaves[i] = assert(loadstring("local x = ... for j = 1, 200 do x = (x * 31 + j) % 1000003 end return x",
      "=leaf" .. i))
  end
  return function(calls)
    local x = 1
    for i = 1, calls do x = leaves[i % stacks + 1](x) end
    return x
  end
end

local function measure(work, calls, opts)
  local s = opts and profile.sample(opts)
  local w0, c0 = clock.wall(), clock.cpu()
  work(calls)
  local wall, cpu = clock.wall() - w0, clock.cpu() - c0
  local stats = s and s:stats()
  if s then s:stop() end
  return wall, cpu, stats and stats.stacks or 0
end

local function median(t)
  table.sort(t)
  return t[math.floor((#t + 1) / 2)]
end

io.write("| stacks | configuration | thread CPU s | wall s | CPU vs session |\n|---|---|---|---|---|\n")
for _, stacks in ipairs({ 50, 10000 }) do
  local work = make_work(stacks)
  local calls = 400000
  local cases = {
    { "no session", nil },
    { "session (1 ms)", {} },
    { "session, autosave every 0.1 s", { autosavePath = path, autosaveSeconds = 0.1 } },
  }
  local cpu, wall, kept = {}, {}, {}
  for r = 1, REPS do
    for i, c in ipairs(cases) do
      local w, t, n = measure(work, calls, c[2])
      cpu[i] = cpu[i] or {}
      wall[i] = wall[i] or {}
      cpu[i][r], wall[i][r] = t, w
      kept[i] = math.max(kept[i] or 0, n)
    end
  end
  local base = median(cpu[2])
  for i, c in ipairs(cases) do
    local m = median(cpu[i])
    io.write(string.format("| %d (%d kept) | %s | %.3f | %.3f | %s |\n", stacks, kept[i], c[1], m, median(wall[i]),
      i > 1 and string.format("%+.1f%%", 100 * (m / base - 1)) or ""))
  end
end
os.remove(path)
