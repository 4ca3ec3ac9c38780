--- File output: atomic writes that never lose what they were asked to write.
-- The text goes to a temporary file beside the target, which is then renamed
-- over it, so a reader never sees half a file. On failure the caller keeps
-- the text and the error names the path and the system's reason.
-- @module tecs.profile.fs

local fs = {}

local counter = 0

--- Write `text` to `path` atomically.
-- @return true, or nil and an error message naming the path
function fs.write_atomic(path, text)
  counter = counter + 1
  local tmp = string.format("%s.tmp-%d-%d", path, os.time() % 100000, counter)
  local f, err = io.open(tmp, "wb")
  if not f then
    -- Report the target path, with the system's reason.
    local reason = tostring(err):gsub("^.-: ", "", 1)
    return nil, string.format("cannot write '%s': %s", path, reason)
  end
  local ok, werr = f:write(text)
  local cok, cerr = f:close()
  if not ok or not cok then
    os.remove(tmp)
    local reason = tostring(werr or cerr):gsub("^.-: ", "", 1)
    return nil, string.format("cannot write '%s': %s", path, reason)
  end
  local rok, rerr = os.rename(tmp, path)
  if not rok then
    os.remove(tmp)
    local reason = tostring(rerr):gsub("^.-: ", "", 1)
    return nil, string.format("cannot write '%s': %s", path, reason)
  end
  return true
end

return fs
