--- Output formats for files: collapsed text, SVG flamegraph, speedscope JSON,
-- gzipped pprof, and from a session's time line speedscope in time order
-- and Chrome trace events. The format is the one asked for, or else follows
-- the file name (`.svg`, `.speedscope.json`, `.pb.gz`,
-- `.timeline.speedscope.json`, `.trace.json`, `.html` the report page;
-- anything else is collapsed text). Names and endings are declared by the native module.
-- @module tecs.profile.output

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

--- The format names, as the native module declares them.
M.formats = native_ok and native.formats or {}

--- Whether `v` names a format.
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

--- The formats written from a session's time line rather than from a
-- profile (a profile object has no time line).
M.timeline_formats = native_ok and native.timelineFormats or {}

--- Whether `v` names a time-line format.
function M.is_timeline_format(v)
  for _, f in ipairs(M.timeline_formats) do
    if v == f then return true end
  end
  return false
end

--- File-name endings and the format each chooses, as the native module
-- declares them: `{ {".svg", "svg"}, ... }`.
M.extensions = native_ok and native.formatExtensions or {}

--- The format for `filename` given an explicit choice (nil or "auto": by extension).
function M.format_for(filename, explicit)
  if explicit and explicit ~= "auto" then return explicit end
  local lower = filename:lower()
  for _, e in ipairs(M.extensions) do
    if lower:sub(-#e[1]) == e[1] then return e[2] end
  end
  return "collapsed"
end

--- Render `prof` (a native profile object) in `format`.
-- @return the text, or nil and an error message
function M.render(prof, format, meta)
  meta = meta or {}
  if format == "collapsed" then return prof:collapsed() end
  local ok, out
  if format == "svg" then
    ok, out = native.call(prof.flamegraph, prof, { title = meta.title or "tecs-profile" })
  elseif format == "speedscope" then
    ok, out = native.call(prof.speedscope, prof, { name = meta.title or "tecs-profile", intervalMs = meta.intervalMs })
  elseif format == "pprof" then
    local funcs = meta.funcs or require("tecs.profile.funcmap").build(prof:files())
    ok, out = native.call(prof.pprof, prof, { intervalMs = meta.intervalMs, clock = meta.clock,
      startSec = meta.startSec, durationSec = meta.durationSec, objects = meta.objects,
      inuseSpace = meta.inuseSpace, inuseObjects = meta.inuseObjects }, funcs)
  else
    return nil, "unknown format " .. tostring(format)
  end
  if not ok then return nil, out end
  return out
end

return M
