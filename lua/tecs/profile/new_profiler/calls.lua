--- The "call" variant of `newProfiler`: exact call counts and times per
-- function, from a `debug.sethook` call/return hook.
--
-- Code profiled this way runs interpreted: LuaJIT aborts the trace being
-- recorded at every hook call, and traces compiled before `start` would
-- run without calling the hook. So `start` flushes the compiled code and
-- turns the JIT off (`jit.flush()`, `jit.off()`), and `stop` turns it back
-- on if it was on: trace attempts aborted by the hook would otherwise get
-- hot loops blacklisted, and slow for the rest of the program.
--
-- What LuaJIT reports, and how this module copes:
--
-- * A tail call is reported as a plain "call" event (no "tail call" event),
--   and its new frame takes the stack level of the frame it replaces. Each
--   frame is kept with its level; a call at a level already held ends the
--   frames at and above it.
-- * A frame left by an error gets no "return" event. The next event at its
--   level or below ends it, so an error unwinding through frames never leaves
--   them open.
-- * A C function gets a "call" event but no "return" event. Its calls are
--   counted exactly; its time is not measured: it stays in its caller's self
--   time (the report marks C functions as untimed). Lua functions it calls
--   back (`table.sort`'s comparator, `pcall`'s function) are its callees.
-- * The hook is global to the Lua state: every coroutine has its own stack
--   here. Time between two events goes to the frame on top of the coroutine
--   that ran; a function's total covers the time its own coroutine ran
--   inside it (what another coroutine it resumed did counts there).
-- @module tecs.profile.new_profiler.calls

local clock = require("tecs.profile.clock")

local M = {}

local getinfo = debug.getinfo

-- The level of the frame that raised the hook event, counted the same way
-- for every event (only differences between levels matter), found from a
-- guess by walking to the last level that exists.
local function level_from(guess)
  if guess < 2 then guess = 2 end
  if getinfo(guess, "l") then
    local step = 1
    while getinfo(guess + step, "l") do
      guess = guess + step
      step = step * 2
    end
    -- Now `guess` exists and `guess + step` does not.
    local lo, hi = guess, guess + step
    while hi - lo > 1 do
      local mid = math.floor((lo + hi) / 2)
      if getinfo(mid, "l") then lo = mid else hi = mid end
    end
    return lo
  end
  local lo, hi = 1, guess -- lo exists (this function), hi does not
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    if getinfo(mid, "l") then lo = mid else hi = mid end
  end
  return lo
end

--- A new recorder. `prevented` maps functions to 1 (not counted; what it
-- calls is counted under its caller) or 2 (neither it nor anything it
-- calls is counted).
-- @treturn table recorder with `start()`, `stop()` and `records()`
function M.new(prevented)
  local records = {} -- fn -> { fn, calls, self, total, timed, callers, callees }
  local stacks = setmetatable({}, { __mode = "k" }) -- thread -> stack
  local main_stack = { n = 0, active = {}, guess = 2 }
  local kinds = setmetatable({}, { __mode = "k" }) -- function -> "Lua", "C" or "main"
  local current -- the stack of the coroutine of the previous event
  local last -- time of the previous event

  local function record_of(fn, timed)
    local r = records[fn]
    if not r then
      r = { fn = fn, calls = 0, self = 0, total = 0, timed = timed, callers = {}, callees = {} }
      records[fn] = r
    end
    return r
  end

  local function edge(list, r)
    local e = list[r]
    if not e then
      e = { calls = 0, time = 0 }
      list[r] = e
    end
    return e
  end

  -- Charges `dt` to the frame that ran: the top frame of `stack`, or the
  -- Lua frame below the C frames on top (a C function's own time is its
  -- caller's). Hidden and blocked frames take nothing.
  local function charge(stack, dt)
    local i = stack.n
    while i > 0 do
      local f = stack[i]
      if f.kind == "lua" then
        f.self = f.self + dt
        f.record.self = f.record.self + dt
        return
      elseif f.kind ~= "c" then
        return
      end
      i = i - 1
    end
  end

  local function pop(stack)
    local f = stack[stack.n]
    stack[stack.n] = nil
    stack.n = stack.n - 1
    local parent = stack[stack.n]
    if f.kind == "blocked" then return end
    local incl = f.child
    if f.kind == "lua" then
      incl = incl + f.self
      local r = f.record
      local depth = stack.active[r] - 1
      stack.active[r] = depth
      if depth == 0 then
        r.total = r.total + incl
        if f.caller then edge(f.caller.callees, r).time = edge(f.caller.callees, r).time + incl end
      end
    elseif f.kind == "c" then
      stack.active[f.record] = stack.active[f.record] - 1
    end
    if parent then parent.child = parent.child + incl end
  end

  -- `replaced`: the frame a tail call replaced, whose blocking it keeps.
  local function push(stack, fn, level, what, replaced)
    local top = stack[stack.n]
    local kind
    local mode = prevented[fn]
    if mode == 2 or (top and top.kind == "blocked") or (replaced and replaced.kind == "blocked") then
      kind = "blocked"
    elseif mode == 1 then
      kind = "hidden"
    else
      kind = what == "C" and "c" or "lua"
    end
    local f = { fn = fn, level = level, kind = kind, what = what, self = 0, child = 0 }
    if kind == "lua" or kind == "c" then
      local r = record_of(fn, kind == "lua")
      r.calls = r.calls + 1
      f.record = r
      stack.active[r] = (stack.active[r] or 0) + 1
      -- The caller: the nearest counted frame below (hidden ones skipped).
      for i = stack.n, 1, -1 do
        local below = stack[i]
        if below.record then
          f.caller = below.record
          edge(below.record.callees, r).calls = edge(below.record.callees, r).calls + 1
          edge(r.callers, below.record).calls = edge(r.callers, below.record).calls + 1
          break
        end
      end
    end
    stack.n = stack.n + 1
    stack[stack.n] = f
  end

  local function hook(event)
    local now = clock.now()
    local co = coroutine.running()
    local stack
    if co then
      stack = stacks[co]
      if not stack then
        stack = { n = 0, active = {}, guess = 2 }
        stacks[co] = stack
      end
    else
      stack = main_stack
    end
    if current then charge(current, now - last) end
    current = stack
    -- A call is most likely one level above the top frame, a return at it.
    local top = stack[stack.n]
    local guess = top and top.level or stack.guess
    if event ~= "return" then guess = guess + 1 end
    local level = level_from(guess)
    stack.guess = level
    if event == "return" then
      while stack.n > 0 and stack[stack.n].level > level do pop(stack) end
      if stack.n > 0 and stack[stack.n].level == level then pop(stack) end
    else -- "call", and "tail call" where a VM reports it
      -- A Lua frame still open at the level of the call was replaced by
      -- it: a tail call (LuaJIT reports it as a call, with no return before
      -- it). A C function's frame stays open until the next call at its
      -- level (no return is reported for it), and is not replaced.
      local replaced
      while stack.n > 0 and stack[stack.n].level >= level do
        local f = stack[stack.n]
        if f.level == level and f.what ~= "C" then replaced = f end
        pop(stack)
      end
      local fn = getinfo(2, "f").func
      local what = kinds[fn]
      if not what then
        what = getinfo(fn, "S").what
        kinds[fn] = what
      end
      push(stack, fn, level, what, replaced)
    end
    -- The time the hook itself took is nobody's.
    last = clock.now()
  end

  local recorder = {}
  local jit_was_on -- whether the JIT was on at start (it is off while the hook runs)

  function recorder.start()
    -- Code compiled before the hook was set runs without calling it: drop
    -- it, so that every call is seen. The JIT is off while the hook runs:
    -- every trace it started would abort at the next call, and loops whose
    -- traces abort often are blacklisted for good (left interpreted after
    -- the profiler stopped).
    jit_was_on = false
    if jit and jit.flush and jit.status then
      jit_was_on = jit.status()
      jit.flush()
      jit.off()
    end
    last = clock.now()
    current = nil
    debug.sethook(hook, "cr")
  end

  --- Stops the hook and ends every open frame (of every coroutine).
  function recorder.stop()
    debug.sethook()
    if jit_was_on then jit.on() end
    if current then charge(current, clock.now() - last) end
    current = nil
    while main_stack.n > 0 do pop(main_stack) end
    for _, stack in pairs(stacks) do
      while stack.n > 0 do pop(stack) end
    end
  end

  --- The records, keyed by function: `calls`, `self` and `total` (seconds),
  -- `timed` (false for C functions), `callers` and `callees` (record ->
  -- `{ calls, time }`).
  function recorder.records()
    return records
  end

  return recorder
end

return M
