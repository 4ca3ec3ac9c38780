--- What sessions recorded by the native module make on demand: the file
-- `stop(filename)` and `write` produce, `write` itself and `delta`. The
-- methods of their classes (see `session.profile_methods` in
-- `tecs.profile.session`) call these with the class and the kind table;
-- this module loads when one is first called.
-- @module tecs.profile.session.output

local check = require("tecs.profile.check")
local clock = require("tecs.profile.clock")
local fs = require("tecs.profile.fs")
local output = require("tecs.profile.output")
local native = require("tecs.profile.native")

local M = {}

--- `_write_file(filename, format, write)`: writes the profile to
-- `filename` in the session's format (or `format`), atomically, with
-- `write(path, text)` (default `fs.write_atomic`; the control channel
-- passes its own, which writes only where a client may).
-- @return true, or nil and a message
function M._write_file(_, kind, self, filename, format, write)
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
      prof:functionsFile(require("tecs.profile.funcmap").build(prof:files()), kind.unit)
    if not functions then return true end
    return write(filename .. native.functionsFileEnding, functions)
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

--- `write(filename, format)`: writes the profile to `filename`
-- (atomically); for retrying a failed `:stop(filename)` or saving a
-- snapshot of a running session. The format follows `format`, else the
-- session's `format` option, else the file name's ending (see
-- `tecs.profile.output`; anything else is collapsed).
-- @tparam string filename
-- @tparam[opt] string format a format name of `tecs.profile.output`, or "auto"
-- @treturn string the collapsed text
function M.write(class, kind, self, filename, format)
  local name = kind.name
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

--- `delta(format)`: what was recorded since the previous `delta` call
-- (since the start for the first), for continuous profiling: the session
-- keeps running, no trace is flushed, and every sample lands in exactly
-- one delta. Works on a stopped session too (what was left since the last
-- call).
-- @tparam[opt] string format nil for a profile object, which every view
--   and output takes (`profile.report(d)`, `profile.pprof(d)`); or the
--   name of a format written from a profile for the rendered content,
--   with the session's interval and clock and the delta's time window
-- @return profile object, or string
function M.delta(class, kind, self, format)
  local name = kind.name
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

return M
