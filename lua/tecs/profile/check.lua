--- Argument checking shared by the session modules (their options are
-- checked by the native module, `native.raw.checkOptions`).
-- Every error is raised at the level of the public function's caller, names
-- the argument and says what was expected.
-- @module tecs.profile.check

local check = {}

-- How a bad value is shown in a message (`string "abc"`, `number 3`,
-- `table`): the native module's description, the one its own option
-- errors use; only the type where the module cannot load.
local native_ok, native = pcall(require, "tecs.profile.native")
local describe = native_ok and native.describe or type
check.describe = describe

--- Raise `msg` at `level` above the caller of the public function.
function check.fail(level, fmt, ...)
  error(string.format(fmt, ...), level + 1)
end

--- Check that `self` is an object of class `mt`, so that `obj.method()`
-- (a dot instead of a colon) gets a clear error.
-- @param noun what the example call names the object (default "session")
function check.self(self, mt, cname, method, level, noun)
  if getmetatable(self) ~= mt then
    check.fail((level or 1) + 1, "%s:%s: called on %s; use a colon, e.g. %s:%s()",
      cname, method, describe(self), noun or "session", method)
  end
end

--- Check an optional filename argument.
function check.filename(fname, v, level)
  if v ~= nil and (type(v) ~= "string" or v == "") then
    check.fail((level or 1) + 1, "%s: bad argument #1 'filename' (non-empty string or nil expected, got %s)",
      fname, describe(v))
  end
end

return check
