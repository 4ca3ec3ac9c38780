--- Display names of functions for the `newProfiler` reports, in the form
-- the other views use: `name (file:line)` for a Lua function (the name read
-- from the source line where it starts, see `tecs.profile.funcmap`),
-- `(main chunk) file` for a chunk, and the Lua path of a C function
-- (`string.rep`) where one reaches it.
-- @module tecs.profile.new_profiler.names

local funcmap = require("tecs.profile.funcmap")
local cfuncs = require("tecs.profile.cfuncs")
local jitinfo = require("tecs.profile.jitinfo")

local M = {}

--- The file a Lua function was loaded from, as the sampler names it (the
-- chunk name without its `@`), or nil for a function not loaded from a file.
function M.file_of(info)
  local source = info.source or ""
  if source:sub(1, 1) == "@" then return source:sub(2) end
  return nil
end

--- A namer: `namer(fn)` returns the display name of `fn`. Source files and
-- the module walk are read once per namer, when first needed.
function M.namer()
  local files = {}
  local cnames
  local function c_name(fn)
    if not cnames then
      cnames = {}
      local ok, list = pcall(cfuncs.collect)
      if ok then
        for _, entry in ipairs(list) do cnames[entry[2]] = entry[1] end
      end
      local ff = jitinfo.ffnames()
      cnames.ff = ff
    end
    if cnames[fn] then return cnames[fn] end
    local id = tostring(fn):match("builtin#(%d+)")
    local ff = cnames.ff
    if id and ff and ff[tonumber(id)] then return ff[tonumber(id)] end
    return "[C " .. tostring(fn):gsub("^function: ", "") .. "]"
  end
  return function(fn)
    local info = debug.getinfo(fn, "S")
    if info.what == "C" then return c_name(fn) end
    local file = M.file_of(info)
    if info.what == "main" or info.linedefined == 0 then
      return "(main chunk) " .. (file or info.short_src)
    end
    if file then
      if files[file] == nil then files[file] = funcmap.for_file(file) or false end
      local entry = files[file]
      if entry then
        for _, range in ipairs(entry) do
          if range[1] == info.linedefined and range[2] == info.lastlinedefined then return range[3] end
        end
      end
    end
    return string.format("function (%s:%d)", file or info.short_src, info.linedefined)
  end
end

--- Whether `frame`, a frame of a by-function collapsed stack, is the Lua
-- function described by `info` (`debug.getinfo(fn, "S")`).
function M.frame_is(frame, info, file)
  if info.what == "main" or info.linedefined == 0 then
    return frame == "(main chunk) " .. file
  end
  local suffix = "(" .. file .. ":" .. info.linedefined .. ")"
  if frame:sub(-#suffix) == suffix then return true end
  local f, first = frame:match("^(.*):(%d+)%-%d+$")
  return f == file and tonumber(first) == info.linedefined
end

return M
