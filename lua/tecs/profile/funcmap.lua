--- Maps source lines to the Lua functions that contain them.
-- Samples are recorded as `file:line` (the line each function was
-- executing). To group them by function, each readable source file is
-- compiled (never run) with `loadfile`, and the line range of every function
-- prototype is read with `jit.util.funcinfo`; a line belongs to the innermost
-- function whose range contains it. Display names come from the source text
-- of the line where the function starts (`function a.b:c(`,
-- `local function f(`, `f = function(`); the range, not the name, is the
-- identity, so two functions with one name stay apart. Files that cannot be
-- read or compiled are left out, and their frames stay at line granularity.
-- @module tecs.profile.funcmap

local M = {}

local ok_util, util = pcall(require, "jit.util")

local function read_lines(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  if text:byte(1) == 27 then return nil end -- bytecode: no source text
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  return lines
end

local name_patterns = {
  "^%s*local%s+function%s+([%w_]+)%s*%(",
  "^%s*function%s+([%w_%.:]+)%s*%(",
  "^%s*local%s+([%w_]+)%s*=%s*function%s*%(",
  "^%s*([%w_%.%[%]\"']+)%s*=%s*function%s*%(",
  "%f[%w_]function%s+([%w_%.:]+)%s*%(",
  "([%w_]+)%s*=%s*function%s*%(",
}

--- The name a function gets from the source line where it starts, or nil
-- when the line holds no recognisable definition (or more than one).
function M.name_from_source(line)
  if not line then return nil end
  local _, defs = line:gsub("%f[%w_]function%f[^%w_]", "")
  if defs ~= 1 then return nil end
  for _, pat in ipairs(name_patterns) do
    local name = line:match(pat)
    if name then return name end
  end
  return nil
end

local function walk(fn, out)
  local info = util.funcinfo(fn)
  out[#out + 1] = info
  local i = -1
  while true do
    local k = util.funck(fn, i)
    if k == nil then break end
    if type(k) == "proto" then walk(k, out) end
    i = i - 1
  end
end

--- Function ranges of one file, in the form the native views take:
-- `{ main = label, { first, last, label }, ... }`, or nil and a reason.
function M.for_file(file)
  if not ok_util then return nil, "jit.util is not available" end
  local chunk = loadfile(file)
  if not chunk then return nil, "cannot compile " .. file end
  local lines = read_lines(file)
  local protos = {}
  walk(chunk, protos)
  local entry = { main = "(main chunk) " .. file }
  for _, info in ipairs(protos) do
    if info.linedefined and info.linedefined > 0 then
      local name = M.name_from_source(lines and lines[info.linedefined])
      local label = string.format("%s (%s:%d)", name or "function", file, info.linedefined)
      entry[#entry + 1] = { info.linedefined, info.lastlinedefined or info.linedefined, label }
    end
  end
  return entry
end

--- Function map for a list of files; unreadable files are skipped.
-- @tparam {string,...} files
-- @treturn table map for the native views
function M.build(files)
  local map = {}
  for _, file in ipairs(files) do
    local entry = M.for_file(file)
    if entry then map[file] = entry end
  end
  return map
end

return M
