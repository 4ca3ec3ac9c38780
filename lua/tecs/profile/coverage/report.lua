--- Coverage results as files: lcov tracefiles (genhtml, CI services) and
-- luacov's stats file (so luacov's reporters can read them).
-- @module tecs.profile.coverage.report

local report = {}

--- The file formats, and the format a file name implies.
report.formats = { "lcov", "luacov" }

function report.format_for(path)
  if path:match("%.stats%.out$") then return "luacov" end
  return "lcov"
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

--- lcov text for `files` (name -> { lines = {[line] = count}, functions =
-- { {name, line, count} } }), one record per file, sorted by name.
function report.lcov(files)
  local out = { "TN:\n" }
  local function add(...) out[#out + 1] = string.format(...) end
  for _, name in ipairs(sorted_keys(files)) do
    local file = files[name]
    add("SF:%s\n", name)
    local hit_functions = 0
    for _, fn in ipairs(file.functions) do add("FN:%d,%s\n", fn.line, fn.name) end
    for _, fn in ipairs(file.functions) do
      add("FNDA:%d,%s\n", fn.count, fn.name)
      if fn.count > 0 then hit_functions = hit_functions + 1 end
    end
    add("FNF:%d\nFNH:%d\n", #file.functions, hit_functions)
    local hit = 0
    local lines = sorted_keys(file.lines)
    for _, line in ipairs(lines) do
      local count = file.lines[line]
      add("DA:%d,%d\n", line, count)
      if count > 0 then hit = hit + 1 end
    end
    add("LF:%d\nLH:%d\nend_of_record\n", #lines, hit)
  end
  return table.concat(out)
end

--- luacov.stats.out text: per file a `max:name` line (max = the last line
-- with a count) then the counts of lines 1..max separated by spaces.
function report.luacov(files)
  local out = {}
  for _, name in ipairs(sorted_keys(files)) do
    local lines = files[name].lines
    local max = 0
    for line in pairs(lines) do if line > max then max = line end end
    local counts = {}
    for i = 1, max do counts[i] = tostring(lines[i] or 0) end
    out[#out + 1] = string.format("%d:%s\n%s \n", max, name, table.concat(counts, " "))
  end
  return table.concat(out)
end

return report
