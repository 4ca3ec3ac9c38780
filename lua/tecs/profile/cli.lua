--- The `tecs-profile` command line: `run`, `report`, `flamegraph`, `busted`.
-- `main(args)` returns the process exit code: 0 on success, 1 when the
-- profiled program or an output failed, 2 on wrong usage (after printing the
-- usage to stderr). The commands and their options are declared in
-- `tecs.profile.cli.options`, which also makes the help texts; what each
-- command does is in `tecs.profile.cli.commands`.
-- @module tecs.profile.cli

local commands = require("tecs.profile.cli.commands")
local jitpath = require("tecs.profile.cli.jitpath")
local options = require("tecs.profile.cli.options")

local M = {}

local usage_error = commands.usage_error

-- Parses `args[first..]` against the options of command `cmd`. For `run`,
-- parsing stops at the script name; the rest are the script's arguments.
local function parse(cmd, args, first)
  local known = options.by_spelling(cmd)
  local opts, positional = {}, {}
  local i = first
  if options.command(cmd).passthrough then
    -- Every argument is the wrapped program's, but a lone --help, and a
    -- leading "--" is dropped.
    if #args == first and known[args[first]] == known["--help"] then return { help = true }, positional end
    if args[first] == "--" then first = first + 1 end
    for j = first, #args do positional[#positional + 1] = args[j] end
    return opts, positional
  end
  while i <= #args do
    local a = args[i]
    if a == "--" then
      for j = i + 1, #args do positional[#positional + 1] = args[j] end
      break
    elseif a:sub(1, 1) == "-" and #a > 1 then
      local name, inline = a:match("^(%-%-[^=]+)=(.*)$")
      name = name or a
      local o = known[name]
      if not o then usage_error("unknown option %s", a) end
      local v = true
      if o.arg then
        if inline then
          v = inline
        else
          i = i + 1
          v = args[i]
          if v == nil then usage_error("option %s needs a value", name) end
        end
        if o.number then
          local n = tonumber(v)
          if not n then usage_error("option %s needs a number, got %q", name, v) end
          v = n
        end
      elseif inline then
        usage_error("option %s takes no value", name)
      end
      if o.negate then v = false end
      opts[o.key] = v
    else
      positional[#positional + 1] = a
      if cmd == "run" or options.command(cmd).script then
        for j = i + 1, #args do positional[#positional + 1] = args[j] end
        break
      end
    end
    i = i + 1
  end
  return opts, positional
end

--- Run the command line `args` (as in `arg`); returns the exit code.
-- @tparam table args the arguments, the command first
-- @tparam[opt] table paths `{ path = ..., cpath = ... }`: the search paths
-- the process started with, before the launcher changed them (a program
-- run is given them back)
-- @treturn number exit code
function M.main(args, paths)
  require("tecs.profile.cli.program").capture(args, paths)
  jitpath.complete()
  local cmd = args[1]
  if cmd == nil or cmd == "--help" or cmd == "-h" or cmd == "help" then
    local out = cmd == nil and io.stderr or io.stdout
    out:write(options.main_usage())
    return cmd == nil and 2 or 0
  end
  if not options.command(cmd) then
    io.stderr:write("tecs-profile: unknown command '", tostring(cmd), "'\n\n", options.main_usage())
    return 2
  end
  local ok, res = pcall(function()
    local opts, pos = parse(cmd, args, 2)
    if opts.help then
      io.stdout:write(options.usage(cmd))
      return 0
    end
    return commands[cmd](opts, pos)
  end)
  if ok then return res end
  if getmetatable(res) == commands.UsageError then
    io.stderr:write("tecs-profile ", cmd, ": ", res.msg, "\n\n", options.usage(cmd))
    return 2
  end
  error(res, 0)
end

return M
