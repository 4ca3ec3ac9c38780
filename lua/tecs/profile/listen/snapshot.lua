--- What a sampling session has recorded so far, taken without stopping
-- it and bounded in size: the control channel's `snapshot` command, which
-- `tecs-profile live` asks for once a second to draw its page.
--
--    local answer = snapshot.take(session, { frames = 600, hitches = 20, stacks = 2000 })
--
-- It runs on the program's thread (where the program polls), so it does
-- what the page needs and no more: the last frames, the slowest frames
-- with their functions, the heaviest stacks with frames named by function
-- (the others summed into one line) and the heaviest functions. The
-- flamegraph is drawn by the client, from the stacks.
-- @module tecs.profile.listen.snapshot

local funcmap = require("tecs.profile.funcmap")
local timeline = require("tecs.profile.timeline")

local M = {}

--- What a request may ask for, and how much when it does not say. The
-- bounds are the protocol's (`control::FIELDS` in the native module),
-- which the program checks each request against as it reads it.
M.DEFAULTS = { frames = 600, hitches = 20, stacks = 2000 }

--- The heaviest functions listed, and the last trace-abort events kept.
M.TOP = 30
M.EVENTS = 200

--- The name of the line that sums the stacks left out.
M.OTHER_STACKS = "(other stacks)"

-- The `n` heaviest lines of collapsed text `text`, heaviest first, then
-- one line summing the others; and how many were left out.
local function heaviest(text, n)
  local rows = {}
  for line in text:gmatch("[^\n]+") do
    local count = tonumber(line:match(" (%d+)$"))
    if count then rows[#rows + 1] = { line = line, count = count } end
  end
  table.sort(rows, function(a, b)
    if a.count ~= b.count then return a.count > b.count end
    return a.line < b.line
  end)
  local out, rest = {}, 0
  for i, r in ipairs(rows) do
    if i <= n then out[i] = r.line else rest = rest + r.count end
  end
  if rest > 0 then out[#out + 1] = M.OTHER_STACKS .. " " .. rest end
  return table.concat(out, "\n") .. (#out > 0 and "\n" or ""), math.max(0, #rows - n)
end

-- The function map of `files` for `session`: each file read and compiled
-- once per session, not once a second (the native side checks the map
-- against the functions the session recorded, so a file changed since is
-- caught there as it is in a fresh map).
local maps = setmetatable({}, { __mode = "k" })
local function function_map(session, files)
  local cache = maps[session]
  if not cache then
    cache = {}
    maps[session] = cache
  end
  local map = {}
  for _, file in ipairs(files) do
    -- A file that cannot be read or compiled (LÖVE's own chunks, C
    -- frames' libraries) is remembered as such, not tried again a second
    -- later.
    if cache[file] == nil then cache[file] = funcmap.build({ file })[file] or false end
    map[file] = cache[file] or nil
  end
  return map
end

--- Checks the fields of a request; returns the counts to take, or nil and
-- the message naming the field.
-- @tparam table request `frames`, `hitches`, `stacks` (each optional)
function M.counts(request)
  local bounds = require("tecs.profile.native").raw.controlFields.snapshot
  local counts = {}
  for name, default in pairs(M.DEFAULTS) do
    local v, b = request[name], bounds[name]
    if v == nil then
      counts[name] = default
    elseif type(v) ~= "number" or not (v >= b.minimum and v <= b.maximum) or v ~= math.floor(v) then
      return nil, string.format("bad field '%s' (%s: %s expected, got %s)", name, b.what, b.expected, tostring(v))
    else
      counts[name] = v
    end
  end
  return counts
end

--- The snapshot of `session` (running or stopped), as the `snapshot`
-- command answers it: `samples`, `frames` (the last ones: `index`,
-- `startMs`, `ms`, `samples`, `gcSamples`), `framesKept`, `hitches` (as
-- `SampleSession:hitches` gives them), `stacks` (collapsed text, frames
-- named by function), `stacksLeftOut`, `top` (`name`, `samples`, `share`)
-- and `events` (the last trace aborts: `tMs`, `name`, `details`).
-- @param session a `SampleSession`
-- @tparam table counts from `counts`
-- @treturn table
function M.take(session, counts)
  local native = session._native
  local prof = native:profile()
  -- One function map for the stacks, the frames and the top functions.
  local map = function_map(session, prof:files())
  -- The frames the answer holds, not a table per frame kept: a long
  -- session keeps up to 100000.
  local last, slowest, kept = native:framesWindow(counts.frames, counts.hitches)
  local hitches = timeline.slowest(slowest, counts.hitches, function(slow)
    local indices = {}
    for i, f in ipairs(slow) do indices[i] = f.index end
    return native:functionsInFrames(indices, map)
  end)
  local total = prof:samples()
  local top = {}
  for i, r in ipairs(prof:selfByFunction(map)) do
    if i > M.TOP then break end
    top[i] = { name = r.name, samples = r.samples, share = r.samples / total }
  end
  local stacks, left_out = heaviest(prof:byFunction(map):collapsed(), counts.stacks)
  local events, all = {}, native:events()
  for i = #all, 1, -1 do
    local e = all[i]
    if e.name == "trace abort" then
      table.insert(events, 1, { tMs = e.tMs, name = e.name, details = next(e.details) and e.details or nil })
      if #events >= M.EVENTS then break end
    end
  end
  return { samples = total, frames = last, framesKept = kept, hitches = hitches, stacks = stacks,
    stacksLeftOut = left_out, top = top, events = events }
end

return M
