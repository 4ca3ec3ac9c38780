--- Trace-abort reasons, worded the way `luajit -jv` words them.
--
-- An abort event carries an error code (an index into the running VM's
-- `jit.vmdef.traceerr`) or an error value, plus an argument that fills the
-- `%d`/`%s` in the message: an opcode number for "NYI: bytecode", a function
-- for "NYI: unsupported variant of FastFunc", an IR opcode, a number.
-- Opcode numbers and message indices differ between LuaJIT versions, so the
-- running VM's own tables are used whenever `jit.vmdef` can be loaded.
--
-- Some LÖVE builds ship without `jit/vmdef.lua`. Then a built-in copy of the
-- LuaJIT 2.1 (or 2.0) message list (`tecs.profile.trace.builtin_tables`) is
-- used and every reason says so. Opcode
-- names come from the built-in opcode list (one per numbering used along the
-- 2.1 branch) that agrees with the bytecode of probe functions on the running
-- VM, and are left out when none does.
-- @module tecs.profile.trace.reasons

local jutil_ok, jutil = pcall(require, "jit.util")
if not jutil_ok then jutil = nil end
local band = require("bit").band

local M = {}

--- Appended to every reason worded from the built-in tables.
M.FALLBACK_NOTE = " (worded from the built-in LuaJIT message table: jit.vmdef not found)"

-- A fixed-width name table (6 characters a name, as in vmdef) as a 0-based
-- array whose names are cut out of the string when first read: a session
-- keeps the one string, not a table of names it may never print.
local function split_fixed(s)
  if type(s) ~= "string" then return {} end
  local count = math.floor(#s / 6)
  return setmetatable({}, {
    __index = function(names, i)
      if type(i) ~= "number" or i < 0 or i >= count or i ~= math.floor(i) then return nil end
      local name = (s:sub(i * 6 + 1, i * 6 + 6):gsub("%s+$", ""))
      rawset(names, i, name)
      return name
    end,
  })
end

local function split_words(s)
  local names, i = {}, 0
  for w in s:gmatch("%S+") do names[i] = w; i = i + 1 end
  return names
end

-- Probe functions and their expected opcodes, from the header on. Between
-- them they use opcodes from the start, the middle and the end of the
-- numbering (FUNCF and FUNCV come after the opcodes newer versions added),
-- so a list that matches all of them has the running VM's numbering.
local function probe_loop(n) local s = 0 for i = 1, n do s = s + i end return s end
local function probe_vararg(...) local t = { ... } return t[1] end
local PROBES = {
  { probe_loop, { "FUNCF", "KSHORT", "KSHORT", "MOV", "KSHORT", "FORI", "ADDVV", "FORL", "RET1" } },
  { probe_vararg, { "FUNCV", "TNEW", "VARG", "TSETM", "TGETB", "RET1" } },
}

-- Whether `names` matches the running VM's opcode numbering, judged by the
-- bytecode of the probe functions.
local function opcodes_match_vm(names)
  if not (jutil and jutil.funcbc) then return false end
  for _, probe in ipairs(PROBES) do
    local func, expected = probe[1], probe[2]
    for pc = 0, #expected - 1 do
      local ins = jutil.funcbc(func, pc)
      if not ins or names[band(ins, 0xff)] ~= expected[pc + 1] then return false end
    end
  end
  return true
end

-- The built-in opcode list matching the running VM: names array and the
-- list's name, or an empty array and nil when none matches.
local function builtin_opcodes()
  for _, list in ipairs(require("tecs.profile.trace.builtin_tables").OPCODE_LISTS) do
    local names = split_words(list.names)
    if opcodes_match_vm(names) then return names, list.name end
  end
  return {}, nil
end

-- Name of a builtin by searching the standard library tables, for VMs
-- without `vmdef.ffnames`.
local LIBRARIES = { "string", "table", "math", "bit", "io", "os", "coroutine", "debug", "jit", "ffi" }
local function find_builtin_name(f)
  for k, v in pairs(_G) do
    if rawequal(v, f) and type(k) == "string" then return k end
  end
  for _, lib in ipairs(LIBRARIES) do
    local t = package.loaded[lib]
    if type(t) == "table" then
      for k, v in pairs(t) do
        if rawequal(v, f) and type(k) == "string" then return lib .. "." .. k end
      end
    end
  end
  return nil
end

local Formatter = {}
Formatter.__index = Formatter

--- A reason formatter for a given `vmdef` table (nil: use the built-in tables).
-- @tparam[opt] table vmdef the running VM's `jit.vmdef`
-- @treturn Formatter
function M.new(vmdef)
  local self = setmetatable({}, Formatter)
  if type(vmdef) == "table" and type(vmdef.traceerr) == "table" then
    self.messages = vmdef.traceerr
    self.opcodes = split_fixed(vmdef.bcnames)
    self.irnames = split_fixed(vmdef.irnames)
    self.ffnames = type(vmdef.ffnames) == "table" and vmdef.ffnames or {}
    self.note = ""
    self.builtin = false
  else
    -- The message list is the same from 2.1.0-beta3 to current 2.1.
    local v21 = (jit and jit.version_num or 20100) >= 20100
    local builtin = require("tecs.profile.trace.builtin_tables")
    self.messages = v21 and builtin.MESSAGES_21 or builtin.MESSAGES_20
    self.opcodes, self.opcode_list = builtin_opcodes()
    self.irnames = {}
    self.ffnames = {}
    self.note = M.FALLBACK_NOTE
    self.builtin = true
  end
  -- Classify messages by their text, which is stable across versions
  -- (their indices are not).
  self.benign_codes, self.blacklisted_codes = {}, {}
  for code = 0, #self.messages do
    local text = self.messages[code]
    if type(text) == "string" then
      if M.is_benign_text(text) then self.benign_codes[code] = true end
      if text == "blacklisted" then self.blacklisted_codes[code] = true end
    end
  end
  return self
end

--- Whether a message text is a benign trace-formation event: leaving a
-- loop, an inner loop, down- or up-recursion (LuaJIT restarts or relinks the
-- trace), or an immediate retry (LuaJIT does not penalise it).
-- @tparam string text message template
function M.is_benign_text(text)
  return text:find("leaving loop", 1, true) ~= nil
      or text:find("inner loop", 1, true) ~= nil
      or text:find("down-recursion", 1, true) ~= nil
      or text:find("up-recursion", 1, true) ~= nil
      or text == "retry recording"
end

--- Name of bytecode opcode `op` ("FORL"), or "#<op>" when unknown.
function Formatter:opname(op)
  return self.opcodes[op] or ("#" .. tostring(op))
end

--- Whether opcode `op` has a known name in this formatter's tables.
function Formatter:knows_opcodes()
  return self.opcodes[0] ~= nil
end

--- Describe a function the way `-jv` does: `file:line` for Lua functions,
-- the library name for builtins, `C:<address>` for C functions.
function Formatter:funcname(f)
  if not (jutil and jutil.funcinfo) then return tostring(f) end
  local fi = jutil.funcinfo(f)
  if fi.loc then
    return fi.loc
  elseif fi.ffid then
    return self.ffnames[fi.ffid] or find_builtin_name(f) or ("builtin#" .. fi.ffid)
  elseif fi.addr then
    return string.format("C:%x", fi.addr)
  end
  return "(?)"
end

local function info_text(self, template, info)
  if type(info) == "function" then
    return self:funcname(info)
  elseif type(info) == "number" then
    if template:find("^NYI: bytecode") then
      return self:opname(info)
    elseif template:find("IR instruction", 1, true) and self.irnames[info] then
      return self.irnames[info]
    end
    return string.format("%d", info)
  elseif info == nil then
    return "?"
  end
  return tostring(info)
end

--- The reason text for an abort's `err` and `info`.
-- @param err error code (number) or error value
-- @param info argument of the message
-- @treturn string
function Formatter:reason(err, info)
  if type(err) == "number" then
    local template = self.messages[err]
    if type(template) ~= "string" then
      return "trace error " .. tostring(err) .. self.note
    end
    local arg = info_text(self, template, info)
    -- A function replacement keeps any '%' in `arg` literal.
    local text = template:gsub("%%[dsp]", function() return arg end, 1)
    return text .. self.note
  elseif type(err) == "string" then
    return err
  end
  return tostring(err)
end

--- Whether `err` is a benign trace-formation event.
function Formatter:is_benign(err)
  return type(err) == "number" and self.benign_codes[err] == true
end

--- Whether `err` says recording ran into blacklisted code.
function Formatter:is_blacklisted_reason(err)
  return type(err) == "number" and self.blacklisted_codes[err] == true
end

return M
