--- Output formats for files: collapsed text, SVG flamegraph, speedscope JSON.
-- The format is the one asked for, or else follows the file name: `.svg` is
-- SVG, `.speedscope.json` is speedscope, anything else collapsed text.
-- @module tecs.profile.output

local M = {}

M.formats = { "auto", "collapsed", "svg", "speedscope" }

--- The format for `filename` given an explicit choice (nil or "auto": by extension).
function M.format_for(filename, explicit)
  if explicit and explicit ~= "auto" then return explicit end
  local lower = filename:lower()
  if lower:sub(-4) == ".svg" then return "svg" end
  if lower:sub(-16) == ".speedscope.json" then return "speedscope" end
  return "collapsed"
end

--- Render `prof` (a native profile object) in `format`.
-- @return the text, or nil and an error message
function M.render(prof, format, meta)
  meta = meta or {}
  if format == "collapsed" then return prof:collapsed() end
  local ok, out
  if format == "svg" then
    ok, out = pcall(prof.flamegraph, prof, { title = meta.title or "tecs-profile" })
  elseif format == "speedscope" then
    ok, out = pcall(prof.speedscope, prof, { name = meta.title or "tecs-profile", intervalMs = meta.intervalMs })
  else
    return nil, "unknown format " .. tostring(format)
  end
  if not ok then return nil, (tostring(out):gsub("^runtime error: ", "")) end
  return out
end

return M
