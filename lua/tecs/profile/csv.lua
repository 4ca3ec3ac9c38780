--- RFC 4180 CSV: writing and reading.
-- Records end with CRLF, as RFC 4180 specifies (every record, the last one
-- included). A field is quoted when it holds a comma, a double quote, CR or
-- LF; quotes inside a quoted field are doubled. Everything else is written
-- as is, so plain values stay readable. The reader takes what the writer
-- writes, and also records ended by a bare LF or CR (files edited by hand).
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

--- Read a document into its records.
-- A record terminator (CRLF, LF or CR) right at the end of the text ends the
-- last record; it does not start an empty one. Text after the closing quote
-- of a quoted field, up to the next separator, is kept as part of the field.
-- @tparam string text
-- @treturn table array of records, each an array of field strings; or nil
--   and a message when a quoted field is not closed
function csv.parse(text)
  local records, record = {}, {}
  local pos, n = 1, #text
  while pos <= n do
    local value
    if text:byte(pos) == 34 then -- '"'
      local parts, i = {}, pos + 1
      while true do
        local q = text:find('"', i, true)
        if not q then
          return nil, string.format("unterminated quoted field in record %d", #records + 1)
        end
        parts[#parts + 1] = text:sub(i, q - 1)
        if text:byte(q + 1) == 34 then
          parts[#parts + 1] = '"'
          i = q + 2
        else
          i = q + 1
          break
        end
      end
      local stop = text:find("[,\r\n]", i) or n + 1
      value = table.concat(parts) .. text:sub(i, stop - 1)
      pos = stop
    else
      local stop = text:find("[,\r\n]", pos) or n + 1
      value = text:sub(pos, stop - 1)
      pos = stop
    end
    record[#record + 1] = value
    local sep = text:byte(pos)
    if sep == 44 then -- ','
      pos = pos + 1
      if pos > n then record[#record + 1] = "" end
    else
      records[#records + 1] = record
      record = {}
      pos = pos + ((sep == 13 and text:byte(pos + 1) == 10) and 2 or 1)
    end
  end
  if #record > 0 then records[#records + 1] = record end
  return records
end

return csv
