--- Maps source lines to the Lua functions that contain them.
-- Samples are recorded as `file:line` (the line each function was
-- executing). To group them by function, each readable source file (in a
-- LÖVE game, read through love.filesystem) is compiled (never run), and the line range of every function
-- prototype is read with `jit.util.funcinfo`; a line belongs to the innermost
-- function whose range contains it. Display names come from the source text
-- of the line where the function starts (`function a.b:c(`,
-- `local function f(`, `f = function(`); the range, not the name, is the
-- identity, so two functions with one name stay apart. Files that cannot be
-- read or compiled are listed with the reason (`{ missing = why }`), and
-- their frames stay at line granularity unless the session recorded their
-- functions.
--
-- The sources are read when the views are made, so they may no longer be
-- what ran. The native side checks this map against the functions a session
-- recorded from the VM while sampling (and, for collapsed text, against the
-- frames, using each file's line count `lines` and its lines with bytecode
-- `code`): a source name is used only
-- for a function whose span the source still has.
-- @module tecs.profile.funcmap

local M = {}

local ok_util, util = pcall(require, "jit.util")

-- The text of the source file a chunk was loaded from, or nil. In a LÖVE
-- game, chunk names are paths inside the game's source (a folder or a
-- .love archive), which love.filesystem reads whatever the working
-- directory, where io.open may not find them; in Neovim, the runtime's
-- modules are found on the runtime path.
local function read_source(path)
  local f = io.open(path, "rb")
  if f then
    local text = f:read("*a")
    f:close()
    return text
  end
  local fs = type(love) == "table" and type(love.filesystem) == "table" and love.filesystem
  if fs and type(fs.read) == "function" then
    local ok, text = pcall(fs.read, path)
    if ok and type(text) == "string" then return text end
  end
  -- In Neovim, the runtime's own modules are chunks named by their path
  -- below a `lua/` directory of the runtime path (`vim/shared.lua`), which
  -- no working directory holds.
  local api = type(vim) == "table" and type(vim.api) == "table" and vim.api
  if api and type(api.nvim_get_runtime_file) == "function" and path:sub(1, 1) ~= "/" then
    local found, files = pcall(api.nvim_get_runtime_file, "lua/" .. path, false)
    f = found and type(files) == "table" and files[1] and io.open(files[1], "rb")
    if f then
      local text = f:read("*a")
      f:close()
      return text
    end
  end
  return nil
end

local function split_lines(text)
  if not text or text:byte(1) == 27 then return nil end -- bytecode: no source text
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

-- Calls `visit(proto)` for `fn` and every prototype nested in it, outer
-- first.
local function each_proto(fn, visit)
  visit(fn)
  local i = -1
  while true do
    local k = util.funck(fn, i)
    if k == nil then break end
    if type(k) == "proto" then each_proto(k, visit) end
    i = i - 1
  end
end

-- Collects the info of `chunk` and of every prototype nested in it, and
-- marks in `code` the lines that have bytecode.
local function walk(chunk, out, code)
  each_proto(chunk, function(fn)
    local info = util.funcinfo(fn)
    out[#out + 1] = info
    for pc = 1, (info.bytecodes or 0) - 1 do
      local line = util.funcinfo(fn, pc).currentline
      if line then code[line] = true end
    end
  end)
end

-- The keys of a set of line numbers, sorted.
local function sorted_lines(set)
  local list = {}
  for line in pairs(set) do list[#list + 1] = line end
  table.sort(list)
  return list
end

--- Function ranges of one file, in the form the native views take:
-- `{ main = label, lines = count, code = {line, ...}, { first, last, label },
-- ... }` (`code`: the lines that have bytecode), or nil and a reason.
function M.for_file(file)
  if not ok_util then return nil, "jit.util is not available" end
  local text = read_source(file)
  if not text then
    return nil, file:sub(1, 1) == "/" and "cannot read the file"
      or "cannot read the file (relative paths are read from the current directory)"
  end
  local chunk = loadstring(text, "@" .. file)
  if not chunk then return nil, "cannot compile the file (changed since it was profiled?)" end
  local lines = split_lines(text)
  local protos, code = {}, {}
  walk(chunk, protos, code)
  local entry = { main = "(main chunk) " .. file, lines = lines and #lines or nil, code = sorted_lines(code) }
  -- A file ending with a newline has no line after it.
  if lines and lines[#lines] == "" then entry.lines = #lines - 1 end
  for _, info in ipairs(protos) do
    if info.linedefined and info.linedefined > 0 then
      local name = M.name_from_source(lines and lines[info.linedefined])
      local label = string.format("%s (%s:%d)", name or "function", file, info.linedefined)
      entry[#entry + 1] = { info.linedefined, info.lastlinedefined or info.linedefined, label }
    end
  end
  return entry
end

-- Opcodes the VM rewrites in place as code gets hot, compiled or
-- blacklisted (`IFORL`, `JFORI`, a `JITERL` or `JLOOP` holding its trace's
-- number, an `ITERN` whose trace makes it a `JLOOP`), or despecializes
-- (`ITERN` to `ITERC`, `ISNEXT` to `JMP`), operands included: each is
-- known by its family alone.
local REWRITTEN = {
  FORI = "FORI", JFORI = "FORI", FORL = "FORL", IFORL = "FORL", JFORL = "FORL",
  ITERL = "ITERL", IITERL = "ITERL", JITERL = "ITERL",
  LOOP = "LOOP", ILOOP = "LOOP", JLOOP = "LOOP", ITERN = "LOOP", ITERC = "LOOP",
  ISNEXT = "JMP", JMP = "JMP",
}

-- What tells a function's bytecode from the others of its file: its
-- instructions and constants, the same whether the chunk was compiled from
-- the source or loaded from bytecode without its debug information, and
-- however the VM has rewritten its hot loops since.
local function fingerprint(fn, names)
  local info = util.funcinfo(fn)
  local parts = { info.params or 0, info.stackslots or 0, info.upvalues or 0, info.isvararg and 1 or 0 }
  for pc = 1, (info.bytecodes or 0) - 1 do
    local ins = util.funcbc(fn, pc) or 0
    local op = ins % 256
    local family = REWRITTEN[names:sub(op * 6 + 1, op * 6 + 6):match("^%S+")]
    parts[#parts + 1] = family or ins
  end
  for i = 0, (info.nconsts or 0) - 1 do parts[#parts + 1] = tostring(util.funck(fn, i)) end
  for i = -1, -(info.gcconsts or 0), -1 do
    local k = util.funck(fn, i)
    parts[#parts + 1] = type(k) == "string" and string.format("%q", k) or type(k)
  end
  return table.concat(parts, ",")
end

-- A file's prototypes by fingerprint, for `stripped_spans` (a file read and
-- compiled once): fingerprint -> { first, last }, false where two
-- prototypes share one.
local spans_by_file = {}

--- Where functions loaded from bytecode without lines (Neovim 0.12's
-- runtime, `string.dump(f, true)`) are defined in their source file, if it
-- can be read: each function's bytecode is matched with the prototypes of
-- the file compiled (never run). A function two prototypes could be is not
-- matched.
-- @tparam string file the chunk's short name
-- @tparam {function,...} fns functions of that chunk
-- @treturn table `{ [fn] = { first, last } }` for the functions matched
function M.stripped_spans(file, fns)
  local found = {}
  local ok_vmdef, vmdef = pcall(require, "jit.vmdef")
  local names = ok_vmdef and type(vmdef) == "table" and vmdef.bcnames
  if not ok_util or type(names) ~= "string" then return found end
  local spans = spans_by_file[file]
  if spans == nil then
    spans = false
    local text = read_source(file)
    local chunk = text and text:byte(1) ~= 27 and loadstring(text, "@" .. file)
    if chunk then
      spans = {}
      each_proto(chunk, function(proto)
        local info = util.funcinfo(proto)
        if info.linedefined and info.linedefined > 0 then
          local key = fingerprint(proto, names)
          spans[key] = spans[key] == nil and { info.linedefined, info.lastlinedefined or info.linedefined } or false
        end
      end)
    end
    spans_by_file[file] = spans
  end
  if spans then
    for _, fn in ipairs(fns) do
      local span = spans[fingerprint(fn, names)]
      if span then found[fn] = span end
    end
  end
  return found
end

--- Function map for a list of files; a file that cannot be read or
-- compiled gets `{ missing = reason }`, which the views report.
-- @tparam {string,...} files
-- @treturn table map for the native views
function M.build(files)
  local map = {}
  for _, file in ipairs(files) do
    local entry, why = M.for_file(file)
    map[file] = entry or { missing = why }
  end
  return map
end

return M
