--- What a running sampling session puts on its time line: frame marks
-- (`profile.frame()`, and inside LÖVE at each `love.timer.step`, which the
-- standard `love.run` calls once per frame: `tecs.profile.host.love`) and
-- events (trace aborts).
-- Loaded with the session; reading the time line back is
-- `tecs.profile.timeline`, loaded when first asked.
-- @module tecs.profile.marks

local M = {}

-- The native handle of the running session, while one runs: the only
-- state `mark` reads, so that a mark without a session costs one test.
local marking
-- How the handle marks a frame (its `frame` method, looked up once).
local mark_frame

--- Mark the start of a frame (and the end of the previous one). Does
-- nothing when no sampling session runs.
function M.mark()
  if marking then mark_frame(marking) end
end

--- Whether a sampling session runs (and takes events).
-- @treturn boolean
function M.running()
  return marking ~= nil
end

--- Put an event on the time line of the running sampling session (a trace
-- abort): `details` is a table of strings. Does nothing without a session.
-- @tparam string name
-- @tparam[opt] table details
function M.event(name, details)
  if marking then marking:event(name, details) end
end

-- Marks a frame, registered with LÖVE's one wrapper of `love.timer.step`
-- (`tecs.profile.host.love`) while a session runs inside LÖVE.
local function mark_step()
  if marking then mark_frame(marking) end
end

--- Start marking frames for a session's native handle (at its start).
function M.attach(handle)
  marking, mark_frame = handle, handle.frame
  -- The host module loads inside LÖVE alone.
  if rawget(_G, "love") ~= nil then require("tecs.profile.host.love").on_step(mark_step) end
end

--- Stop marking frames (at the session's stop).
function M.detach(handle)
  if marking ~= handle then return end
  marking, mark_frame = nil, nil
  local love_host = package.loaded["tecs.profile.host.love"]
  if love_host then love_host.off_step(mark_step) end
end

return M
