--- Sharing LuaJIT's trace and record events with a handler that is
-- already attached.
--
-- `jit.attach(fn, "trace")` keeps one handler per event: it stores `fn` in
-- the registry table `_VMEVENTS` under a slot derived from the event name,
-- replacing whatever was there (for example the handler of `-jv`, i.e.
-- `require("jit.v").on()`). `jit.attach(fn)` removes `fn` from every slot.
--
-- To chain instead of replacing, the slot's previous occupant is read from
-- the registry (by comparing the table before and after attaching, so the
-- slot number never has to be computed) and handed back to the caller, and
-- at detach time it is put back, but only if the slot still holds our
-- handler: a handler someone attached after us is left in place.
-- @module tecs.profile.trace.vmevent

local M = {}

local REGISTRY_KEY = "_VMEVENTS"

local function handler_table()
  local ok, reg = pcall(debug.getregistry)
  if not ok or type(reg) ~= "table" then return nil end
  local t = rawget(reg, REGISTRY_KEY)
  return type(t) == "table" and t or nil
end

local function copy(t)
  local c = {}
  if t then for k, v in pairs(t) do c[k] = v end end
  return c
end

--- Attach `fn` to the VM event `event` ("trace" or "record").
-- @tparam function fn the new handler
-- @tparam string event the event's name
-- @treturn table link: `previous` (the handler that was attached, or nil),
--   `slot` (where the handler lives, or nil when unknown) and `event`; pass
--   it to `detach`
function M.attach(fn, event)
  local before = copy(handler_table())
  jit.attach(fn, event)
  local slot
  local t = handler_table()
  if t then
    for k, v in pairs(t) do
      if rawequal(v, fn) then slot = k; break end
    end
  end
  local previous = slot ~= nil and before[slot] or nil
  if type(previous) ~= "function" or rawequal(previous, fn) then previous = nil end
  return { slot = slot, previous = previous, event = event }
end

--- Attach `fn` to the "trace" event (see `attach`).
function M.attach_trace(fn)
  return M.attach(fn, "trace")
end

--- The handler currently attached to the "trace" event, when it can be
-- read (nil when none or unknown).
-- @tparam table link as returned by `attach_trace`
function M.current(link)
  local t = handler_table()
  if t and link.slot ~= nil then return rawget(t, link.slot) end
  return nil
end

--- Detach `fn` and restore the handler it replaced.
-- @tparam function fn the handler given to `attach` or `attach_trace`
-- @tparam table link as returned by `attach` or `attach_trace`
-- @treturn boolean whether the previous handler was put back
function M.detach(fn, link)
  local holds_slot = link.slot == nil or rawequal(M.current(link), fn)
  jit.attach(fn) -- removes fn from every event slot
  if holds_slot and link.previous then
    jit.attach(link.previous, link.event or "trace")
    return true
  end
  return false
end

--- Detach a handler attached by `attach_trace` (see `detach`).
M.detach_trace = M.detach

return M
