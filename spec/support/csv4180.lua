-- A strict RFC 4180 reader for checking what the tracker writes.
-- Records end with CRLF (the final one may omit it); a field is either
-- unquoted (no comma, quote, CR or LF) or quoted, with quotes doubled inside.
-- Anything else (bare LF or CR, a quote inside an unquoted field, text after
-- a closing quote, an unterminated quote, records of unequal width) is an
-- error naming the position.
local csv4180 = {}

--- Parse `text` into an array of records (arrays of strings).
function csv4180.parse(text)
  local records, record, pos, n = {}, {}, 1, #text
  local function fail(msg) error(string.format("CSV error at byte %d: %s", pos, msg), 2) end
  if n == 0 then return records end
  while true do
    local field
    if text:sub(pos, pos) == '"' then
      local parts = {}
      pos = pos + 1
      while true do
        local q = text:find('"', pos, true)
        if not q then fail("unterminated quoted field") end
        parts[#parts + 1] = text:sub(pos, q - 1)
        if text:sub(q + 1, q + 1) == '"' then
          parts[#parts + 1] = '"'
          pos = q + 2
        else
          pos = q + 1
          break
        end
      end
      field = table.concat(parts)
    else
      local stop = text:find('[,\r\n"]', pos) or n + 1
      if text:sub(stop, stop) == '"' then fail("quote inside an unquoted field") end
      field = text:sub(pos, stop - 1)
      pos = stop
    end
    record[#record + 1] = field
    local c = text:sub(pos, pos)
    if c == "," then
      pos = pos + 1
    elseif c == "\r" then
      if text:sub(pos + 1, pos + 1) ~= "\n" then fail("CR not followed by LF") end
      pos = pos + 2
      records[#records + 1] = record
      record = {}
      if pos > n then break end
    elseif c == "" then
      records[#records + 1] = record
      break
    elseif c == "\n" then
      fail("bare LF (records must end with CRLF)")
    else
      fail("unexpected character after a quoted field: " .. string.format("%q", c))
    end
  end
  for i = 2, #records do
    if #records[i] ~= #records[1] then
      error(string.format("CSV error: record %d has %d fields, the header has %d", i, #records[i], #records[1]), 2)
    end
  end
  return records
end

return csv4180
