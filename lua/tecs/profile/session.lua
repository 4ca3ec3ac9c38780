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
-- hooks (see `class`); this module builds its class from that. Its files,
-- `write` and `delta` are `tecs.profile.session.output`, loaded when first
-- called (a session that only records needs neither the formats nor file
-- writing, and what a program loads stays on its heap: see `once`).
-- @module tecs.profile.session

local check = require("tecs.profile.check")

local session = {}

--- `require` without keeping: the module a session needs for a moment (at
-- its start, at its stop) is loaded for the call and left for the
-- collector, unless something had loaded it before.
--
-- What a program loads stays on its Lua heap, and a module's constants are
-- strings there. LuaJIT's collector sweeps the whole string table on every
-- cycle, so a program with a small live set that allocates strings fast
-- pays for each string on each cycle, and much more once a few hundred
-- more double the table: LuaJIT's life.lua runs 4% slower with 200 more
-- live strings, 15% with 300 (BENCHMARKS.md, "The module's footprint").
-- @tparam string name
-- @return the module
function session.once(name)
  local had = package.loaded[name]
  local module = require(name)
  if not had then package.loaded[name] = nil end
  return module
end

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
-- and `delta`, from `tecs.profile.session.output`, which loads when one is
-- first called: a session that only records needs neither the formats nor
-- file writing. The session has `_native`, `format`, `_started_at`,
-- `_delta_wall` and `_delta_at`.
-- @tparam table class from `class`
-- @tparam table kind `name` (as for `class`); `meta(s, format, start_sec,
--   duration_sec, objects)`, what `output.render` takes to render the
--   profile in `format` (`objects`: a delta's object counts, if any);
--   `timeline(s, format)`, for a kind with a timeline, the content of a
--   timeline format; `delta_profile(s, prof, meta)`, for a kind that keeps
--   something beside a delta's profile object; `unit`, what the counts are
--   when not samples ("bytes"), which a collapsed file's functions file says
function session.profile_methods(class, kind)
  for _, method in ipairs({ "_write_file", "write", "delta" }) do
    -- A tail call: errors raised at the caller's level still point at it.
    class[method] = function(self, ...)
      return require("tecs.profile.session.output")[method](class, kind, self, ...)
    end
  end
end

return session
