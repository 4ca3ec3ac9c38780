-- tecs-profile in Neovim: the :TecsProfile command (its work is in
-- lua/tecs/profile/host/nvim_commands.lua, loaded on first use), and the profile of the
-- editor's startup when $TECS_PROFILE_STARTUP names a file. Plugin files
-- run after init.lua, so startup profiling sources this file earlier:
--
--   TECS_PROFILE_STARTUP=/tmp/startup.svg nvim --cmd 'source /path/to/tecs-profile/plugin/tecs_profile.lua'
--
-- See docs/neovim.md.
if vim.g.loaded_tecs_profile then return end
vim.g.loaded_tecs_profile = true

-- Sourced with --cmd, before the plugin manager has put this package on
-- the runtime path: its own directory goes there, so that its modules and
-- lua/tecs/profile/native.so are found.
if #vim.api.nvim_get_runtime_file("lua/tecs/profile/host/nvim_commands.lua", false) == 0
  and not package.searchpath("tecs.profile.host.nvim_commands", package.path) then
  local here = debug.getinfo(1, "S").source:match("^@(.*)/plugin/[^/]*$")
  if here then vim.opt.runtimepath:prepend((vim.fn.fnamemodify(here, ":p"):gsub("/$", ""))) end
end

vim.api.nvim_create_user_command("TecsProfile", function(o)
  require("tecs.profile.host.nvim_commands").command(o.fargs)
end, {
  nargs = "*",
  desc = "tecs-profile: start, stop, report, trace, cover, listen, close",
  complete = function(arglead, cmdline) return require("tecs.profile.host.nvim_commands").complete(arglead, cmdline) end,
})

local startup = os.getenv("TECS_PROFILE_STARTUP")
if startup and startup ~= "" then
  -- $TECS_PROFILE_STARTUP_CLOCK: "wall" to count the time startup waits
  -- (a plugin blocked in vim.fn.system), "cpu" (the default) not.
  local clock = os.getenv("TECS_PROFILE_STARTUP_CLOCK")
  -- Not for the editors started from this one (:terminal nvim).
  vim.env.TECS_PROFILE_STARTUP = nil
  vim.env.TECS_PROFILE_STARTUP_CLOCK = nil
  require("tecs.profile.host.nvim_commands").startup(vim.fn.fnamemodify(startup, ":p"), { clock = clock ~= "" and clock or nil })
end
