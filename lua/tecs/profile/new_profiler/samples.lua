--- The "time" variant of `newProfiler`: a `profile.sample` session whose
-- stacks are grouped by function when it stops. No hook runs, so the JIT
-- keeps compiling; calls are not known, only sample counts.
-- @module tecs.profile.new_profiler.samples

local funcmap = require("tecs.profile.funcmap")
local jitinfo = require("tecs.profile.jitinfo")
local names = require("tecs.profile.new_profiler.names")
local native = require("tecs.profile.native")
local bit = require("bit")

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

-- The bytecode of Lua functions, read with jit.util; nil where this
-- LuaJIT ships without jit/*.lua.
local bytecode = (function()
  local ok_util, util = pcall(require, "jit.util")
  local vmdef = jitinfo.vmdef()
  if ok_util and vmdef and type(vmdef.bcnames) == "string" then return { util = util, names = vmdef.bcnames } end
end)()

-- The name of the opcode of instruction `ins`.
local function opcode(ins)
  local op = ins % 256
  return (bytecode.names:sub(op * 6 + 1, op * 6 + 6):gsub("%s+$", ""))
end

-- Instructions whose operand A is read, not written.
local function reads_a(op)
  return op:match("^IS") or op:match("^[TUG]SET") or op:match("^RET") or op == "CALLT" or op == "CALLMT"
end

-- The value register `reg` of `fn` holds before instruction `pc`, where
-- the last write to it names one: an upvalue, a global, a field of either
-- (`M.helper`), or a copy of one. Nil otherwise.
local function value_in(fn, reg, pc, depth)
  if depth > 8 then return nil end
  local util = bytecode.util
  for at = pc - 1, 1, -1 do
    local ins = util.funcbc(fn, at)
    local op = opcode(ins)
    local a, d = bit.band(bit.rshift(ins, 8), 0xff), bit.rshift(ins, 16)
    if a == reg and not reads_a(op) then
      if op == "UGET" then
        local _, v = debug.getupvalue(fn, d + 1)
        return v
      elseif op == "GGET" then
        local env, name = getfenv(fn), util.funck(fn, -d - 1)
        return type(env) == "table" and type(name) == "string" and rawget(env, name) or nil
      elseif op == "TGETS" then
        local t = value_in(fn, bit.rshift(ins, 24), at, depth + 1)
        local key = util.funck(fn, -bit.band(d, 0xff) - 1)
        return type(t) == "table" and type(key) == "string" and rawget(t, key) or nil
      elseif op == "MOV" then
        return value_in(fn, d, at, depth + 1)
      end
      return nil
    end
  end
  return nil
end

--- The Lua functions `fn` reaches by tail calls (`return helper(...)`),
-- and those they reach in turn, as far as the bytecode names the callee
-- (an upvalue, a global, a field of either). A tail call replaces the
-- caller's frame, so the samples taken in the callee do not show `fn`.
-- @tparam function fn
-- @treturn table function -> true
function M.tail_callees(fn)
  local found = {}
  if not bytecode then return found end
  local function walk(f)
    local info = bytecode.util.funcinfo(f)
    if not info or not info.bytecodes then return end
    for pc = 1, info.bytecodes - 1 do
      local ins = bytecode.util.funcbc(f, pc)
      if not ins then break end
      local op = opcode(ins)
      if op == "CALLT" or op == "CALLMT" then
        local callee = value_in(f, bit.band(bit.rshift(ins, 8), 0xff), pc, 0)
        if type(callee) == "function" and callee ~= fn and not found[callee] and
          debug.getinfo(callee, "S").what ~= "C" then
          found[callee] = true
          walk(callee)
        end
      end
    end
  end
  walk(fn)
  return found
end

--- What a report says when a session took too few samples to rank
-- functions (as the views say it: `native.errorNote`), with how long the
-- run was on the session's clock against the interval, and what to do; nil
-- when it took enough.
-- @param session the stopped `SampleSession`
-- @tparam integer n the samples the report counts
-- @tparam number interval_ms
-- @treturn string|nil
function M.few_samples_note(session, n, interval_ms)
  if n >= native.fewSamples then return nil end
  local st = session:stats()
  local wall = st.clock == "wall" or st.clock == "wall-timer"
  local sec = (wall and st.durationSec) or st.cpuSec or st.processCpuSec or st.durationSec
  local ran = string.format("the run took %.1f ms of %s", sec * 1000, wall and "real time" or "CPU time")
  local todo = string.format("profile a longer run, or sample more often with a smaller sampledelay " ..
    "(sampledelay / %d ms between samples, %g ms at the least)", M.OPCODES_PER_MS, M.interval_ms(0))
  if n > 0 then return string.format("%s; %s: %s", native.errorNote(n), ran, todo) end
  -- Samples the session took all in prevented functions: the header says so.
  if st.samples > 0 then return nil end
  if sec * 1000 < interval_ms then
    return string.format("no samples: %s, less than one interval (%g ms): %s", ran, interval_ms, todo)
  end
  return string.format("no samples: %s, %.1f intervals of %g ms, and the %s clock gave none: %s", ran,
    sec * 1000 / interval_ms, interval_ms, st.clock, todo)
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
  local function match(fn, level)
    local info = debug.getinfo(fn, "S")
    matchers[#matchers + 1] = { info = info, file = names.file_of(info), level = level }
  end
  for fn, level in pairs(prevented) do
    match(fn, level)
    -- What `fn` tail-calls runs in place of `fn`'s frame: with level 2 it
    -- is left out as well, as a call hook leaves it out.
    if level == 2 then
      for callee in pairs(M.tail_callees(fn)) do match(callee, 2) end
    end
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
