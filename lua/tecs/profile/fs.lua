--- File output: atomic writes that never lose what they were asked to write.
-- The text goes to a temporary file beside the target, which is then renamed
-- over it, so a reader never sees half a file. On failure the caller keeps
-- the text and the error names the path and the system's reason.
-- @module tecs.profile.fs

local fs = {}

local counter = 0
-- Its address differs between processes, so two processes writing the same
-- target in the same second still pick different temporary names.
local anchor = {}
local EEXIST = 17

-- Renames `from` over `to`. On Windows the C library's rename refuses an
-- existing target: MoveFileExA replaces it, as rename(2) does elsewhere.
local move_file_declared = false
local function rename_over(from, to)
  if package.config:sub(1, 1) ~= "\\" then return os.rename(from, to) end
  local ffi = require("ffi")
  if not move_file_declared then
    ffi.cdef([[
      int MoveFileExA(const char *from, const char *to, unsigned long flags);
      unsigned long GetLastError(void);
    ]])
    move_file_declared = true
  end
  -- MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH
  if ffi.C.MoveFileExA(from, to, 0x9) ~= 0 then return true end
  return nil, string.format("%s: Windows error %d", to, tonumber(ffi.C.GetLastError()))
end

--- Opens a new temporary file beside `path`. The "x" mode (O_EXCL) makes
-- the open fail rather than share a file another writer just created.
local function open_temporary(path)
  local f, err, code, tmp
  for _ = 1, 8 do
    counter = counter + 1
    tmp = string.format("%s.tmp-%d-%s-%d", path, os.time() % 100000,
      tostring(anchor):match("0x(%x+)") or "0", counter)
    f, err, code = io.open(tmp, "wbx")
    if f or code ~= EEXIST then break end
  end
  return f, err, tmp
end

-- The system's reason in an io error message, without the path.
local function reason_of(err)
  return (tostring(err):gsub("^.-: ", "", 1))
end

--- Whether `path` names a device or a process's file (`/dev/null`,
-- `/proc/self/fd/1`) rather than a file of its own, beside which other
-- files can go.
function fs.is_special(path)
  return path:find("^/dev/") ~= nil or path:find("^/proc/") ~= nil
end

--- Write `text` to `path` atomically. A device or a process's file
-- (`/dev/null`, `/dev/stdout`, `/proc/self/fd/1`) is written in place:
-- renaming over it would put a regular file where the device was.
-- @return true, or nil and an error message naming the path
function fs.write_atomic(path, text)
  if fs.is_special(path) then
    local f, err = io.open(path, "wb")
    if not f then return nil, string.format("cannot write '%s': %s", path, reason_of(err)) end
    local ok, werr = f:write(text)
    local cok, cerr = f:close()
    if not ok or not cok then return nil, string.format("cannot write '%s': %s", path, reason_of(werr or cerr)) end
    return true
  end
  local f, err, tmp = open_temporary(path)
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
  local rok, rerr = rename_over(tmp, path)
  if not rok then
    os.remove(tmp)
    local reason = tostring(rerr):gsub("^.-: ", "", 1)
    return nil, string.format("cannot write '%s': %s", path, reason)
  end
  return true
end

return fs
