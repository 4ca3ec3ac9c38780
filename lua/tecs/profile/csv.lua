--- RFC 4180 CSV writing.
-- Records end with CRLF, as RFC 4180 specifies (every record, the last one
-- included). A field is quoted when it holds a comma, a double quote, CR or
-- LF; quotes inside a quoted field are doubled. Everything else is written
-- as is, so plain values stay readable.
-- @module tecs.profile.csv

local csv = {}

--- The record terminator.
csv.EOL = "\r\n"

--- One field, quoted when needed.
-- @param v a string or number (other values go through `tostring`)
-- @treturn string
function csv.field(v)
  local s = type(v) == "string" and v or tostring(v)
  if s:find('[,"\r\n]') then
    return '"' .. s:gsub('"', '""') .. '"'
  end
  return s
end

--- One record (without its terminator).
-- @tparam table values array of field values
-- @treturn string
function csv.record(values)
  local out = {}
  for i = 1, #values do out[i] = csv.field(values[i]) end
  return table.concat(out, ",")
end

--- A whole document: a header record, then one record per row.
-- @tparam table header array of column names
-- @tparam table rows array of arrays of field values
-- @treturn string
function csv.document(header, rows)
  local out = { csv.record(header) }
  for i = 1, #rows do out[i + 1] = csv.record(rows[i]) end
  out[#out + 1] = ""
  return table.concat(out, csv.EOL)
end

return csv
