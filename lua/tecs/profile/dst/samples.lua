--- The "time" variant of `newProfiler`: a `profile.sample` session whose
-- stacks are grouped by function when it stops. No hook runs, so the JIT
-- keeps compiling; calls are not known, only sample counts.
-- @module tecs.profile.dst.samples

local funcmap = require("tecs.profile.funcmap")
local names = require("tecs.profile.dst.names")

local M = {}

--- Opcodes per millisecond in `sampledelay`'s mapping to an interval:
-- the default 100000 opcodes becomes the sampler's default 1 ms.
M.OPCODES_PER_MS = 100000

--- The sampling interval in milliseconds for a `sampledelay` (opcodes),
-- within the sampler's bounds (0.1 to 60000 ms).
function M.interval_ms(sampledelay)
  local ms = sampledelay / M.OPCODES_PER_MS
  if ms < 0.1 then ms = 0.1 end
  if ms > 60000 then ms = 60000 end
  return ms
end

-- Splits a collapsed line into its frames (leaf's VM state removed) and
-- its count.
local function parse_line(line)
  local stack, count = line:match("^(.*) (%d+)$")
  if not stack then return nil end
  local frames = {}
  for frame in (stack .. ";"):gmatch("([^;]*);") do frames[#frames + 1] = frame end
  frames[#frames] = frames[#frames]:gsub("_%[%a%]$", "")
  return frames, tonumber(count)
end

-- Which frames a prevented function matches: `matchers` is a list of
-- `{ info, file, level }`.
local function level_of(frame, matchers, cache)
  local v = cache[frame]
  if v == nil then
    v = 0
    for _, m in ipairs(matchers) do
      if m.file and names.frame_is(frame, m.info, m.file) and m.level > v then v = m.level end
    end
    cache[frame] = v
  end
  return v
end

--- Aggregates a stopped session's samples by function.
-- @param session the stopped `SampleSession`
-- @tparam table prevented function -> 1 or 2
-- @treturn table records keyed by name: `name`, `selfSamples`,
--   `totalSamples`, `callers` and `callees` (name -> `{ samples }`); and the
--   number of samples kept and dropped by `prevent`
function M.aggregate(session, prevented)
  local prof = session._native:profile()
  local text = prof:byFunction(funcmap.build(prof:files())):collapsed()
  local matchers = {}
  for fn, level in pairs(prevented) do
    local info = debug.getinfo(fn, "S")
    matchers[#matchers + 1] = { info = info, file = names.file_of(info), level = level }
  end
  local cache = {}
  local records, kept, dropped = {}, 0, 0
  local function record_of(name)
    local r = records[name]
    if not r then
      r = { name = name, selfSamples = 0, totalSamples = 0, callers = {}, callees = {} }
      records[name] = r
    end
    return r
  end
  for line in text:gmatch("[^\n]+") do
    local frames, count = parse_line(line)
    if frames then
      local visible, blocked = {}, false
      for _, frame in ipairs(frames) do
        local level = level_of(frame, matchers, cache)
        if level == 2 then blocked = true break end
        if level == 0 then visible[#visible + 1] = frame end
      end
      -- A sample whose leaf is prevented (level 1) is its own time: dropped.
      if blocked or level_of(frames[#frames], matchers, cache) == 1 or #visible == 0 then
        dropped = dropped + count
      else
        kept = kept + count
        local seen, seen_edge = {}, {}
        for i, frame in ipairs(visible) do
          local r = record_of(frame)
          if not seen[frame] then
            seen[frame] = true
            r.totalSamples = r.totalSamples + count
          end
          if i > 1 then
            local key = visible[i - 1] .. "\0" .. frame
            if not seen_edge[key] then
              seen_edge[key] = true
              local caller = record_of(visible[i - 1])
              caller.callees[frame] = (caller.callees[frame] or 0) + count
              r.callers[visible[i - 1]] = (r.callers[visible[i - 1]] or 0) + count
            end
          end
        end
        local leaf = record_of(visible[#visible])
        leaf.selfSamples = leaf.selfSamples + count
      end
    end
  end
  return records, kept, dropped
end

return M
