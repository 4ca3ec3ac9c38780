--- What a profiler changes in what LuaJIT compiles, in counts that do not
-- depend on the machine's speed: traces started, aborted (with their
-- reasons) and flushes of the whole trace cache, from `jit.attach`'s
-- "trace" event. The workload is Jumper's four finders run in turn (A*,
-- JPS, Dijkstra, BFS on one grid; github.com/Yonaba/Jumper, from a checkout
-- JUMPER_DIR names, not part of this repository). Each run is a fresh VM:
-- rounds until no trace has started for 15 rounds in a row (at most 800;
-- "no" when the program never settles), then the mode, then ROUNDS more
-- rounds counted.
--
--   JUMPER_DIR=... luajit bench/jit_decisions.lua [runs] [mode ...]
--
-- Modes: `none`, `flush` (a bare `jit.flush()`), `jp:<mode>` (LuaJIT's
-- profiler with that mode string and a callback that does nothing),
-- `attach:<event>` (a handler that does nothing attached to that VM event),
-- `ours` (a default session), `ours:keep` (`flushTraces = false`),
-- `ours:function`, `ours:line`. ROUNDS: the rounds counted (default 100),
-- under the mode and again after its stop (the flushes are those under
-- the mode; the traces started after the stop have a column).
local ROUNDS = tonumber(os.getenv("ROUNDS") or "") or 100
local SETTLED_AFTER, MAX_SETTLE = 15, 800

--- One run of `mode` in this VM: prints one line of counts.
local function one(mode)
  local round = assert(dofile("bench/jumper.lua").rounds({ "ASTAR", "JPS", "DIJKSTRA", "BFS" }))

  local vmdef = require("jit.vmdef")
  local n = { start = 0, side = 0, abort = 0, flush = 0 }
  local reasons = {}
  jit.attach(function(what, _, _, _, a, b)
    if what == "start" then
      n.start = n.start + 1
      if a and a > 0 then n.side = n.side + 1 end
    elseif what == "abort" then
      n.abort = n.abort + 1
      local why = vmdef.traceerr[a] or tostring(a)
      if b and why:find("%d", 1, true) then why = why:gsub("%%d", tostring(b)) end
      reasons[why] = (reasons[why] or 0) + 1
    elseif what == "flush" then
      n.flush = n.flush + 1
    end
  end, "trace")

  local quiet, rounds, last = 0, 0, 0
  while quiet < SETTLED_AFTER and rounds < MAX_SETTLE do
    round()
    rounds = rounds + 1
    quiet = (n.start == last) and quiet + 1 or 0
    last = n.start
  end
  local settled = quiet >= SETTLED_AFTER and tostring(rounds) or "no"
  n = { start = 0, side = 0, abort = 0, flush = 0 }
  reasons = {}

  local kind, rest = mode:match("^(%a+):?(.*)$")
  local session
  if kind == "flush" then
    jit.flush()
  elseif kind == "jp" then
    require("jit.profile").start(rest, function() end)
  elseif kind == "attach" then
    jit.attach(function() end, rest)
  elseif kind == "ours" then
    local keep = rest == "keep"
    session = require("tecs.profile").sample({ precision = (rest ~= "" and not keep) and rest or nil,
      flushTraces = not keep })
  end
  local by_start = n.start
  for _ = 1, ROUNDS do round() end
  local before_stop = n.start
  if kind == "jp" then require("jit.profile").stop() end
  if session then session:stop() end
  local by_stop = n.start - before_stop
  -- What the stop changes: the traces started in as many rounds after it
  -- (the other counts are those under the mode, its stop included).
  local during = { start = n.start, side = n.side, abort = n.abort, flush = n.flush }
  local reasons_during = {}
  for r, c in pairs(reasons) do reasons_during[r] = c end
  for _ = 1, ROUNDS do round() end
  local after = n.start - during.start
  n, reasons = during, reasons_during

  local why = {}
  for r, c in pairs(reasons) do why[#why + 1] = c .. " " .. r end
  table.sort(why, function(a, b) return tonumber(a:match("^%d+")) > tonumber(b:match("^%d+")) end)
  print(string.format("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %s |", mode, settled, n.start, by_start, by_stop,
    n.side, n.abort,
    n.flush, after, table.concat(why, "; ", 1, math.min(3, #why))))
end

if arg[1] == "--one" then
  one(arg[2])
  return
end

local runs = tonumber(arg[1] or "") or 2
local modes = {}
for i = 2, #arg do modes[#modes + 1] = arg[i] end
if #modes == 0 then
  modes = { "none", "flush", "jp:i1", "jp:fi1", "ours", "ours:keep", "ours:function", "ours:line" }
end
-- The interpreter: arg's lowest index (a wrapper may add `-e` options).
local first = 0
while arg[first - 1] do first = first - 1 end
local luajit = first < 0 and arg[first] or "luajit"
print("| mode | settled after | traces started | by the start | by the stop | side | aborts | flushes | started after the stop | main aborts |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for _ = 1, runs do
  for _, mode in ipairs(modes) do
    local p = assert(io.popen(string.format("%q %q --one %q", luajit, arg[0], mode)))
    io.write(p:read("*a"))
    p:close()
  end
end
