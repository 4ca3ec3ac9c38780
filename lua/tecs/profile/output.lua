--- Output formats for files, as the native module's registry declares them
-- (`native.formatTable`): collapsed text, SVG flamegraph, speedscope JSON,
-- gzipped pprof, the Firefox Profiler's processed profile, and from a
-- session's timeline speedscope in time order, Chrome trace events and
-- the report page. The format is the one asked for, or else follows the
-- file name's ending (`.svg`, `.speedscope.json`, `.pb.gz`,
-- `.firefox.json`, `.timeline.speedscope.json`, `.trace.json`, `.html`;
-- anything else is collapsed text).
-- @module tecs.profile.output

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

--- The registry: one table per format, in its order, with `name`,
-- `endings` (a list), `timeLine` (written from a session's timeline),
-- `native` (written by the native module), `readsSources`, `groupsFunctions`, `help` and
-- `withoutInterval` (see `output::Declaration` in the native module).
M.registry = native_ok and native.formatTable or {}

--- The format names the `format` option takes: "auto", then the registry's.
M.formats = native_ok and native.formats or {}

--- The declaration of the format named `name`, or nil.
function M.declaration(name)
  for _, d in ipairs(M.registry) do
    if d.name == name then return d end
  end
  return nil
end

--- Whether `v` names a format (or is "auto").
function M.is_format(v)
  for _, f in ipairs(M.formats) do
    if v == f then return true end
  end
  return false
end

--- The format names for a message: `"auto" or "collapsed" or ...`.
function M.format_list()
  local quoted = {}
  for i, f in ipairs(M.formats) do quoted[i] = '"' .. f .. '"' end
  return table.concat(quoted, " or ")
end

--- The formats written from a session's timeline rather than from a
-- profile (a profile object has no timeline).
M.timeline_formats = native_ok and native.timelineFormats or {}

--- Whether `v` names a timeline format.
function M.is_timeline_format(v)
  local d = M.declaration(v)
  return d ~= nil and d.timeLine
end

--- File-name endings and the format each chooses, longest first:
-- `{ {".timeline.speedscope.json", "speedscope-timeline"}, ... }`.
M.extensions = native_ok and native.formatExtensions or {}

--- The format for `filename` given an explicit choice (nil or "auto": by
-- the file name's ending, collapsed text when none matches).
function M.format_for(filename, explicit)
  if explicit and explicit ~= "auto" then return explicit end
  return native.formatFor(filename)
end

--- Render `prof` (a native profile object) in `format`, a format of the
-- registry written from a profile.
-- @tparam[opt] table meta `title`, `countName`, `inverted`, `intervalMs`,
--   `clock`, `startSec`, `durationSec`, and for pprof `objects`,
--   `inuseSpace`, `inuseObjects` (profile objects) and `funcs` (the
--   function map; read from the sources when not given)
-- @return the content, or nil and an error message
function M.render(prof, format, meta)
  meta = meta or {}
  local d = M.declaration(format)
  if not d or d.timeLine then return nil, "unknown format " .. tostring(format) end
  local funcs
  if d.readsSources then funcs = meta.funcs or require("tecs.profile.funcmap").build(prof:files()) end
  local ok, out = native.call(prof.render, prof, format, meta, funcs)
  if not ok then return nil, out end
  return out
end

return M
