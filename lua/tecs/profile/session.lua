--- The lifecycle that sampling, allocation and trace sessions share.
--
-- A session runs from its start until `:stop()`, which may be called once;
-- `:pause()` and `:resume()` are idempotent and error after stop. What a
-- session produces (collapsed text, a trace report) is its result: a
-- snapshot while it runs, final after stop. `:stop(filename)` also writes
-- the result to a file; when that fails the session is stopped all the same
-- and the result stays available, so nothing is lost.
--
-- Each kind of session describes itself with a table of names, messages and
-- hooks (see `class`); this module builds its class from that.
-- @module tecs.profile.session

local check = require("tecs.profile.check")
local clock = require("tecs.profile.clock")
local fs = require("tecs.profile.fs")
local output = require("tecs.profile.output")
-- Sessions of the native module only run where it loads.
local _, native_module = pcall(require, "tecs.profile.native")

local session = {}

--- Make the class of one kind of session.
-- @tparam table kind
--   `name` (class name used in messages, e.g. "SampleSession"),
--   `result` (name of the method that returns the result, e.g. "collapsed"),
--   `stopped_hint` (said by a second `:stop()`, e.g. "its text is still
--   available from :collapsed()"),
--   `kept_hint` (said when `:stop(filename)` could not write, e.g.
--   ":collapsed() returns the text, :write(path) retries"),
--   and the hooks, each called with the session:
--   `finish(s)` stops recording and returns the final result,
--   `snapshot(s)` returns the result so far,
--   `save(s, filename)` writes the final result: true, or nil and a message,
--   `set_paused(s, paused)` starts or stops counting.
-- @treturn table the class: the metatable of the kind's sessions, holding
--   `stop`, `pause`, `resume`, `isRunning` and the result method; add the
--   kind's own methods to it
function session.class(kind)
  local name = kind.name
  local class = {}
  class.__index = class

  --- Stop the session and return its result; with `filename`, also write
  -- the result there (atomically). Errors if called twice, or if the file
  -- cannot be written: then the session is stopped all the same and the
  -- result stays available.
  function class:stop(filename)
    check.self(self, class, name, "stop", 2)
    check.filename(name .. ":stop", filename, 2)
    if self._stopped then
      error(name .. ":stop: session already stopped (" .. kind.stopped_hint .. ")", 2)
    end
    self._result = kind.finish(self)
    self._stopped = true
    if filename then
      local ok, err = kind.save(self, filename)
      if not ok then
        error(name .. ":stop: " .. err .. " (the session is stopped and nothing is lost: " ..
          kind.kept_hint .. ")", 2)
      end
    end
    return self._result
  end

  local function set_paused(method, paused)
    class[method] = function(self)
      check.self(self, class, name, method, 2)
      if self._stopped then error(name .. ":" .. method .. ": session already stopped", 2) end
      kind.set_paused(self, paused)
      self._paused = paused
    end
  end
  set_paused("pause", true)
  set_paused("resume", false)

  class[kind.result] = function(self)
    check.self(self, class, name, kind.result, 2)
    if self._stopped then return self._result end
    return kind.snapshot(self)
  end

  --- Whether the session is still running.
  function class:isRunning()
    check.self(self, class, name, "isRunning", 2)
    return not self._stopped
  end

  return class
end

--- A new running session of `class` with the kind's own `fields`. (Any
-- table with the class as metatable is a running session too: the state
-- kept here, `_stopped` and `_paused`, starts out false or nil.)
-- @tparam table class from `class`
-- @tparam table fields the session's fields (taken over, not copied)
-- @return the session
function session.new(class, fields)
  fields._stopped = false
  fields._paused = false
  return setmetatable(fields, class)
end

--- Whether `s` (a session of any kind) is paused and not stopped.
function session.is_paused(s)
  return s._paused and not s._stopped
end

--- The kind table of a session recorded by the native module (sampling
-- and allocation sessions): collapsed text as its result, read from the
-- session's native handle (`_native`), written by its `_write_file`.
-- The caller adds `finish`.
-- @tparam string name the class name used in messages
-- @treturn table a kind table for `class`
function session.native_kind(name)
  return {
    name = name,
    result = "collapsed",
    stopped_hint = "its text is still available from :collapsed()",
    kept_hint = ":collapsed() returns the text, :write(path) retries",
    snapshot = function(self) return self._native:collapsed() end,
    save = function(self, filename) return self:_write_file(filename, nil) end,
    set_paused = function(self, paused)
      if paused then self._native:pause() else self._native:resume() end
    end,
  }
end

--- Adds what sessions recorded by the native module share to their class:
-- `_write_file` (the file `stop(filename)` and `write` produce), `write`
-- and `delta`. The session has `_native`, `format`, `_started_at`,
-- `_delta_wall` and `_delta_at`.
-- @tparam table class from `class`
-- @tparam table kind `name` (as for `class`); `meta(s, format, start_sec,
--   duration_sec, objects)`, what `output.render` takes to render the
--   profile in `format` (`objects`: a delta's object counts, if any);
--   `timeline(s, format)`, for a kind with a time line, the content of a
--   time-line format; `delta_profile(s, prof, meta)`, for a kind that keeps
--   something beside a delta's profile object
function session.profile_methods(class, kind)
  local name = kind.name

  -- Writes the profile to `filename` in the session's format (or
  -- `format`), atomically, with `write(path, text)` (default
  -- `fs.write_atomic`; the control channel passes its own, which writes
  -- only where a client may). Returns true, or nil and a message.
  function class:_write_file(filename, format, write)
    write = write or fs.write_atomic
    local fmt = output.format_for(filename, format or self.format)
    local content, err
    if fmt == "collapsed" then
      local ok, why = write(filename, self:collapsed())
      if not ok then return nil, why end
      -- Beside collapsed text, which has no room for them, the functions
      -- the session recorded for its frames: a report of the file made
      -- later or elsewhere names them as the session does.
      local prof = not fs.is_special(filename) and self._native:profile()
      local functions = prof and prof.functionsFile and
        prof:functionsFile(require("tecs.profile.funcmap").build(prof:files()))
      if not functions then return true end
      return write(filename .. native_module.functionsFileEnding, functions)
    elseif kind.timeline and output.is_timeline_format(fmt) then
      local ok
      ok, content = pcall(kind.timeline, self, fmt)
      if not ok then return nil, string.format("cannot write '%s': %s", filename, content) end
    else
      local meta = kind.meta(self, fmt, self._started_at, self._native:stats().durationSec)
      content, err = output.render(self._native:profile(), fmt, meta)
      if not content then return nil, string.format("cannot write '%s': %s", filename, err) end
    end
    return write(filename, content)
  end

  --- Write the profile to `filename` (atomically); for retrying a failed
  -- `:stop(filename)` or saving a snapshot of a running session. The format
  -- follows `format`, else the session's `format` option, else the file
  -- name's ending (see `tecs.profile.output`; anything else is collapsed).
  -- @tparam string filename
  -- @tparam[opt] string format a format name of `tecs.profile.output`, or "auto"
  -- @treturn string the collapsed text
  function class:write(filename, format)
    check.self(self, class, name, "write", 2)
    if type(filename) ~= "string" or filename == "" then
      check.fail(2, "%s:write: bad argument #1 'filename' (non-empty string expected, got %s)", name,
        check.describe(filename))
    end
    if format ~= nil and not output.is_format(format) then
      check.fail(2, "%s:write: bad argument #2 'format' (%s expected, got %s)", name, output.format_list(),
        check.describe(format))
    end
    local text = self:collapsed()
    local ok, err = self:_write_file(filename, format)
    if not ok then error(name .. ":write: " .. err, 2) end
    return text
  end

  --- What was recorded since the previous `delta` call (since the start
  -- for the first), for continuous profiling: the session keeps running,
  -- no trace is flushed, and every sample lands in exactly one delta.
  -- Works on a stopped session too (what was left since the last call).
  -- @tparam[opt] string format nil for a profile object, which every view
  --   and output takes (`profile.report(d)`, `profile.pprof(d)`); or the
  --   name of a format written from a profile for the rendered content,
  --   with the session's interval and clock and the delta's time window
  -- @return profile object, or string
  function class:delta(format)
    check.self(self, class, name, "delta", 2)
    if format ~= nil and (format == "auto" or not output.is_format(format) or output.is_timeline_format(format)) then
      local names = {}
      for _, f in ipairs(output.formats) do
        if f ~= "auto" and not output.is_timeline_format(f) then names[#names + 1] = '"' .. f .. '"' end
      end
      check.fail(2, "%s:delta: bad argument #1 'format' (nil or %s expected, got %s)", name,
        table.concat(names, " or "), check.describe(format))
    end
    local now, wall = clock.now(), os.time()
    local started, duration = self._delta_wall, now - self._delta_at
    self._delta_wall, self._delta_at = wall, now
    local prof, objects = self._native:delta()
    local meta = kind.meta(self, format, started, duration, objects)
    if format == nil then
      if kind.delta_profile then kind.delta_profile(self, prof, meta) end
      return prof
    end
    local content, err = output.render(prof, format, meta)
    if not content then error(name .. ":delta: " .. err, 2) end
    return content
  end
end

return session
