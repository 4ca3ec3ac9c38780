--- The report of a trace session: `TraceReport`, its CSV form and file.
-- @module tecs.profile.trace.report

local check = require("tecs.profile.check")
local csv = require("tecs.profile.csv")
local fs = require("tecs.profile.fs")
local linemap = require("tecs.profile.trace.lines")

local M = {}

--- The report returned by `TraceSession:stop` and `TraceSession:report`.
-- Fields: `durationSec`, `totalAborts`, `blacklisted`, `sites` (each with
-- `severity`, `count`, `reason`, `location`, `zone`, sorted), `includeBenign`,
-- `tracesStarted`, `tracesCompleted`, `tracesAborted`, `benignAborts`,
-- `blacklistings`; and which lines the completed traces cover: `traces`
-- (in completion order, each with `number` (LuaJIT's, as `-jv` shows it;
-- a flushed trace's number can come back), `start` (`file:line`),
-- `parent` and `exit` (for a side trace), `link` (the link type: "loop",
-- "root", "return", "interpreter", ...), `linkTo` (the trace linked to),
-- `lines` (how many lines it covers), `partial` (when some were not kept)),
-- `lines` (`{ [file] = { [line] = { trace numbers, ascending } } }`, files
-- named as in abort locations) and `tracesUnmapped` (completed traces not
-- listed, or listed without all their lines, past the memory bounds).
-- @type TraceReport
local TraceReport = {}
TraceReport.__index = TraceReport
M.TraceReport = TraceReport

--- CSV columns, in order.
M.COLUMNS = { "severity", "count", "reason", "location", "zone" }

local SEVERITY_RANK = { blacklist = 1, warn = 2, info = 3 }

local function sorted_sites(sites)
  local list = {}
  for _, s in pairs(sites) do
    list[#list + 1] = { severity = s.severity, count = s.count, reason = s.reason,
                        location = s.location, zone = s.zone }
  end
  table.sort(list, function(x, y)
    local rx, ry = SEVERITY_RANK[x.severity], SEVERITY_RANK[y.severity]
    if rx ~= ry then return rx < ry end
    if x.count ~= y.count then return x.count > y.count end
    if x.reason ~= y.reason then return x.reason < y.reason end
    if x.location ~= y.location then return x.location < y.location end
    return x.zone < y.zone
  end)
  return list
end

--- The report of `session` (a trace session) so far.
-- @tparam table self the session
-- @tparam number duration seconds since the session started
-- @treturn TraceReport
function M.build(self, duration)
  local c = self._counts
  local sites = sorted_sites(self._sites)
  local total, blacklisted = 0, 0
  local traces, lines, unmapped = {}, {}, 0
  if self._lines then traces, lines, unmapped = linemap.snapshot(self._lines) end
  for _, s in ipairs(sites) do
    total = total + s.count
    if s.severity == "blacklist" then blacklisted = blacklisted + s.count end
  end
  return setmetatable({
    durationSec = duration,
    totalAborts = total,
    blacklisted = blacklisted,
    sites = sites,
    includeBenign = self.includeBenign,
    -- The code that takes the report may itself be recorded into a trace
    -- (a side trace from a loop that just exited, say); such a trace ends
    -- after the report, so it is not counted as started yet either.
    tracesStarted = c.tracesStarted - (self._recording and 1 or 0),
    tracesCompleted = c.tracesCompleted,
    tracesAborted = c.tracesAborted,
    benignAborts = c.benignAborts,
    blacklistings = c.blacklistings,
    traces = traces,
    lines = lines,
    tracesUnmapped = unmapped,
  }, TraceReport)
end

--- The report as RFC 4180 CSV (header `severity,count,reason,location,zone`,
-- CRLF after every record). Also what `tostring(report)` returns.
-- @treturn string
function TraceReport:csv()
  check.self(self, TraceReport, "TraceReport", "csv", 2, "report")
  local rows = {}
  for i, s in ipairs(self.sites) do
    rows[i] = { s.severity, s.count, s.reason, s.location, s.zone }
  end
  return csv.document(M.COLUMNS, rows)
end

TraceReport.__tostring = function(self) return TraceReport.csv(self) end

--- Write the CSV to `filename` (atomically).
-- @tparam string filename
-- @treturn string the text written
function TraceReport:write(filename)
  check.self(self, TraceReport, "TraceReport", "write", 2, "report")
  if type(filename) ~= "string" or filename == "" then
    check.fail(2, "TraceReport:write: bad argument #1 'filename' (non-empty string expected, got %s)",
      check.describe(filename))
  end
  local text = self:csv()
  local ok, err = fs.write_atomic(filename, text)
  if not ok then error("TraceReport:write: " .. err, 2) end
  return text
end

--- Read the sites of a trace report back from its CSV (as written by
-- `TraceReport:write` or `TraceSession:stop(filename)`), for
-- `profile.hotAborts`. Columns are found by their header names; blank lines
-- are skipped.
-- @tparam string text the CSV
-- @treturn table `{ sites = {...} }`, each site with `severity`, `count`,
--   `reason`, `location` and `zone`; or nil and a message
function M.read_csv(text)
  local records, err = csv.parse(text)
  if not records then return nil, "not a trace report CSV (" .. err .. ")" end
  local header = records[1]
  if not header or header[1] ~= "severity" then
    return nil, "not a trace report CSV (no 'severity,...' header)"
  end
  local col = {}
  for k, name in ipairs(header) do col[name] = k end
  local sites = {}
  for r = 2, #records do
    local x = records[r]
    if #x > 1 then
      sites[#sites + 1] = {
        severity = x[col.severity], count = tonumber(x[col.count]) or 0, reason = x[col.reason] or "",
        location = x[col.location] or "", zone = x[col.zone] or "",
      }
    end
  end
  return { sites = sites }
end

return M
