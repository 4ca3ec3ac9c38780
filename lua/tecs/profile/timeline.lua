--- The time axis of a sampling session: frame marks and the slowest frames.
--
--    profile.frame()            -- once per frame, at its start
--    s:frames()                 -- { { index, startMs, ms, samples, gcSamples }, ... }
--    s:hitches(3)               -- the 3 slowest frames, with what ran in them
--    s:timeline("chrome-trace") -- the timeline as Chrome trace events (Perfetto)
--    s:write("run.trace.json")  -- the same, by extension
--    s:write("run.html")        -- the report page (tecs.profile.page)
--
-- The session keeps when each sample was taken (native, in a bounded ring:
-- the `timelineSamples` option); a frame runs from its mark to the next one,
-- the last to the end of the session. Inside LÖVE, a session marks frames by
-- itself (`tecs.profile.sample`, which also puts events on the timeline).
-- This module reads the timeline back; it loads when first used.
-- @module tecs.profile.timeline

local check = require("tecs.profile.check")
local funcmap = require("tecs.profile.funcmap")
local output = require("tecs.profile.output")

local M = {}

--- The hitches of a session as text: one line per frame, slowest first,
-- with the functions that ran in it (at most three, by self samples).
-- @tparam table hitches as `SampleSession:hitches` returns them
-- @tparam integer frames how many frames were marked in all
-- @treturn string
function M.hitches_text(hitches, frames)
  return require("tecs.profile.native").hitchesText(hitches, frames)
end

--- Where a frame's time went that was not its Lua code's own: the kinds
-- of wait a sample's function says, by its name as the views give it
-- (exact, or a prefix). On the wall clock (`clock = "wall"`) a frame's
-- samples fall in these functions while the thread waits in them; on the
-- CPU clock only their CPU time is sampled (`cpuMs` says the rest).
M.WAITS = {
  { kind = "present", names = { "love.graphics.present", "love.window.updateMode" } },
  { kind = "sleep", names = { "love.timer.sleep", "socket.sleep", "ngx.sleep", "vim.wait", "vim.uv.sleep",
    "vim.loop.sleep" } },
  { kind = "process", names = { "os.execute", "io.popen", "vim.fn.system", "vim.fn.systemlist" } },
  { kind = "I/O", prefixes = { "io.", "file:", "love.filesystem.", "socket.", "ngx.socket." } },
}

-- The wait kind of a function named `name`, or nil.
local function wait_kind(name)
  for _, w in ipairs(M.WAITS) do
    for _, n in ipairs(w.names or {}) do
      if name == n then return w.kind end
    end
    for _, p in ipairs(w.prefixes or {}) do
      if name:sub(1, #p) == p then return w.kind end
    end
  end
end

-- The waits of a frame whose samples ran in `top` (shares by function),
-- `gc` of its `samples` in the collector: `{ { kind, share }, ... }`,
-- largest first.
local function waits_of(top, samples, gc)
  local by_kind = {}
  for _, t in ipairs(top) do
    local kind = wait_kind(t.name)
    if kind then by_kind[kind] = (by_kind[kind] or 0) + t.share end
  end
  if samples > 0 and gc > 0 then by_kind.collector = gc / samples end
  local list = {}
  for kind, share in pairs(by_kind) do list[#list + 1] = { kind = kind, share = share } end
  table.sort(list, function(a, b)
    if a.share ~= b.share then return a.share > b.share end
    return a.kind < b.kind
  end)
  return list
end

--- The `n` slowest of `frames` (records as `SampleSession:frames` gives
-- them), slowest first, as `SampleSession:hitches` returns them.
-- @tparam table frames
-- @tparam integer n
-- @tparam function functions_of what ran in the slowest frames: given
--   their records, `{ [index] = { { name, samples }, ... } }`, ranked
-- @treturn table
function M.slowest(frames, n, functions_of)
  local sorted = {}
  for i, f in ipairs(frames) do sorted[i] = f end
  table.sort(sorted, function(a, b)
    if a.ms ~= b.ms then return a.ms > b.ms end
    return a.index < b.index
  end)
  local slow = {}
  for i = 1, math.min(n, #sorted) do slow[i] = sorted[i] end
  local ranked = functions_of(slow)
  local out = {}
  for i, f in ipairs(slow) do
    local functions = ranked[f.index] or {}
    local total = 0
    for _, r in ipairs(functions) do total = total + r.samples end
    local top = {}
    for j, r in ipairs(functions) do
      top[j] = { name = r.name, share = r.samples / total }
    end
    out[i] = { index = f.index, ms = f.ms, startMs = f.startMs, samples = f.samples, gcSamples = f.gcSamples,
      cpuMs = f.cpuMs, allocatedBytes = f.allocatedBytes, top = top,
      waits = waits_of(top, f.samples or 0, f.gcSamples or 0) }
  end
  return out
end

--- The function map of a session's sources (as the by-function views
-- take it): what names the functions of its hitches, in the session and
-- in the timeline files it writes.
-- @param session a `SampleSession`
-- @treturn table
function M.function_map(session)
  return funcmap.build(session._native:profile():files())
end

--- A timeline written as Chrome trace events (`SampleSession:write("x.trace.json")`,
-- `tecs-profile run --timeline`), read back: `{ name, intervalMs, frames }`,
-- `frames` as `SampleSession:frames` gives them, each with `collapsed`: what
-- ran in it as collapsed stacks of the samples taken in it.
-- @tparam string text the file's contents
-- @return the timeline, or nil and a message saying why not
function M.read_trace(text)
  local ok, native = pcall(require, "tecs.profile.native")
  if not ok then return nil, "cannot load the native module tecs.profile.native: " .. tostring(native) end
  local rok, t = native.call(native.raw.readChromeTrace, text)
  if not rok then return nil, t end
  return t
end

--- The `n` slowest frames of a timeline `read_trace` read, as
-- `SampleSession:hitches` returns them: the same as the session's, the file
-- holding each frame's samples by stack and the function each stack ran in
-- as the session named it. Files written before they named functions are
-- named from the sources this process reads.
-- @tparam table trace
-- @tparam integer n
-- @treturn table
function M.trace_hitches(trace, n)
  local native = require("tecs.profile.native")
  return M.slowest(trace.frames, n, function(slow)
    local ranked, maps = {}, {} -- maps: file -> function ranges, built once per file
    for _, f in ipairs(slow) do
      local functions = f.functions
      if not functions then
        local prof = native.parseProfile(f.collapsed)
        local map = {}
        for _, file in ipairs(prof:files()) do
          if maps[file] == nil then maps[file] = funcmap.for_file(file) or false end
          map[file] = maps[file] or nil
        end
        functions = prof:selfByFunction(map)
      end
      ranked[f.index] = functions
    end
    return ranked
  end)
end

--- The frames of a timeline `read_trace` read, summed up as text.
-- @tparam table trace
-- @treturn string
function M.frames_text(trace)
  return require("tecs.profile.native").framesText(trace.frames)
end

--- The native handle of the allocation session attached to sampling
-- session `session` (see `profile.allocations`), or nil.
function M.allocations_of(session)
  local a = rawget(session, "_allocations")
  return a and a._native or nil
end

-- The methods below are `SampleSession`'s: the class (`tecs.profile.sample`)
-- checks `self` and calls them here, loading this module when first used.

--- `SampleSession:frames()`: one record per frame marked (see
-- `profile.frame`), in order: `index` (from 1; frames past the oldest kept
-- mark are dropped, the others keep their index), `startMs` (from the
-- session's start), `ms` (its duration: to the next mark, or to the end of
-- the session), `samples` and `gcSamples` (taken in it, of those the timeline
-- holds).
-- @param session a `SampleSession`
-- @treturn table
function M.frames(session)
  return session._native:frames(M.allocations_of(session))
end

--- `SampleSession:timeline(format)`: the timeline rendered in a timeline
-- format: "chrome-trace" (the Chrome trace event JSON that Perfetto,
-- chrome://tracing and speedscope read: consecutive samples merged into
-- nested ranges, frames on a track of their own, runs of GC samples as
-- instant events) or "speedscope-timeline" (a speedscope file whose
-- samples are in the order they were taken, for its "Time Order" view), or
-- "html" (the report page of `tecs.profile.page`: flamegraph, top
-- functions, zones, the frame-time chart, the slowest frames and the trace
-- aborts). Holds the samples the timeline holds (see `timelineSamples`);
-- the aggregate outputs hold them all.
-- @param session a `SampleSession`
-- @tparam string format
-- @treturn string
function M.timeline(session, format)
  if not output.is_timeline_format(format) then
    local names = {}
    for i, f in ipairs(output.timeline_formats) do names[i] = '"' .. f .. '"' end
    check.fail(2, "SampleSession:timeline: bad argument #1 'format' (%s expected, got %s)",
      table.concat(names, " or "), check.describe(format))
  end
  -- A format the native module does not write names the Lua module that
  -- makes it (the report page: `tecs.profile.page`).
  local lua_writer = output.declaration(format).luaWriter
  if lua_writer then return require(lua_writer).render(session) end
  -- The frames are named by function as `hitches` and the by-function
  -- views name them, so that hitches read back from a Chrome trace are
  -- the session's.
  local functions = output.declaration(format).readsSources and M.function_map(session) or nil
  return session._native:timeline(format, "tecs-profile", M.allocations_of(session), functions)
end

--- `SampleSession:hitches(n)`: the `n` slowest frames, slowest first:
-- `index`, `ms`, `startMs`, `samples`, `gcSamples` as in `frames`, and
-- `top`, a list of `{ name = function, share = fraction of the frame's
-- samples }` ranked by self samples, functions named as the by-function
-- report names them.
-- @param session a `SampleSession`
-- @tparam integer n how many frames (fewer when fewer were marked)
-- @treturn table
function M.hitches(session, n)
  if type(n) ~= "number" or n < 1 or n ~= math.floor(n) or n == math.huge then
    check.fail(2, "SampleSession:hitches: bad argument #1 'n' (positive integer expected, got %s)",
      check.describe(n))
  end
  return M.slowest(session._native:frames(M.allocations_of(session)), n, function(slow)
    local indices = {}
    for i, f in ipairs(slow) do indices[i] = f.index end
    return session._native:functionsInFrames(indices, M.function_map(session))
  end)
end

return M
