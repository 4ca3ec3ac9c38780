--- The string table a program ends with, under a session or not: how many
-- slots LuaJIT's string table has (it doubles when the strings outnumber
-- them, and every collection sweeps every slot) and how many strings are
-- interned, read after the program with no collection in between
-- (spec/support/vm_tables.lua). Exact, whatever the machine's speed.
--
--   luajit bench/string_table.lua none|require|tecs program.lua [args...]
--
-- Run from the checkout (it loads spec/support/vm_tables.lua); the
-- program's output is dropped.
local vm_tables = require("spec.support.vm_tables")
vm_tables.open()
local config, program = arg[1], arg[2]
local args = {}
for i = 3, #arg do args[#args + 1] = arg[i] end
local session
if config == "require" then
  require("tecs.profile")
elseif config == "tecs" then
  session = require("tecs.profile").sample()
elseif config ~= "none" then
  error("usage: luajit bench/string_table.lua none|require|tecs program.lua [args...]", 0)
end
local chunk = assert(loadfile(program))
local write = io.write
io.write = function() end
chunk(unpack(args))
io.write = write
local slots = vm_tables.slots()
if session then session:stop() end
io.stderr:write(string.format("slots=%d\n", slots))
