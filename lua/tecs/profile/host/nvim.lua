--- The control channel's host code for Neovim: how a running editor polls
-- with no user code, how it is named, and where its plugins live.
--
-- A host module of `tecs.profile.listen` (see its `HOSTS` for the
-- interface): `kind`, `detect()`, `program()`, `start(channel)`, `stop()`
-- and `plugins()`.
--
-- In Neovim a libuv timer (`vim.loop`; `vim.uv` from 0.10) wakes every
-- `POLL_MS` and schedules the poll with `vim.schedule`: the commands run
-- on the editor's main loop, between its events, where editor state may
-- be read (the runtime path, for `plugins`). A `VimLeavePre` autocommand
-- writes a session the channel started before the editor exits. Nothing
-- here changes editor state.
-- @module tecs.profile.host.nvim

local M = {}

--- The kind the discovery entry names.
M.kind = "nvim"

--- Milliseconds between two polls: a command waits at most about this long
-- while the editor is idle.
M.POLL_MS = 100

-- The running poll timer and autocommand group, while polling.
local timer, augroup

-- `vim.uv` from Neovim 0.10, `vim.loop` before.
local function uv()
  return vim.uv or vim.loop
end

--- Whether this Lua state is Neovim's.
function M.detect()
  return type(vim) == "table" and type(vim.api) == "table" and type(uv()) == "table"
    and type(vim.schedule) == "function"
end

--- The name `tecs-profile targets` shows: `nvim` and the editor's working
-- directory, which tells editors apart.
function M.program()
  local ok, cwd = pcall(function() return uv().cwd() end)
  return "nvim " .. (ok and type(cwd) == "string" and cwd or "?")
end

--- Where the editor's plugins live, as the views' `plugins` option takes
-- it: every runtime path directory by name, Neovim's own runtime as
-- `nvim` and the user's configuration as `config` (an `after` directory
-- goes with the directory it belongs to). Reads editor state: call it
-- from the main loop, not from a libuv callback.
-- @treturn table `{ [name] = dir }`, or `{ dir, real path }` for a
--   directory that is a link or lies below one
function M.plugins()
  local roots = {}
  local ok, dirs = pcall(vim.api.nvim_list_runtime_paths)
  if not ok or type(dirs) ~= "table" then return roots end
  local function clean(d) return type(d) == "string" and d ~= "" and (d:gsub("/+$", "")) or nil end
  local config_ok, config = pcall(vim.fn.stdpath, "config")
  -- Named first, so that no plugin directory takes their names.
  local reserved = { [clean(vim.env.VIMRUNTIME) or false] = "nvim", [config_ok and clean(config) or false] = "config" }
  reserved[false] = nil
  for dir, name in pairs(reserved) do roots[name] = dir end
  for _, dir in ipairs(dirs) do
    -- An `after` directory goes with the directory it belongs to.
    local base = clean(dir):gsub("/after$", "")
    if not reserved[base] then
      local name = base:match("([^/]+)$") or base
      -- A name already taken (a reserved one, or two package directories
      -- holding one plugin name): this directory is named by its path.
      if roots[name] and roots[name] ~= base then name = base end
      roots[name] = base
    end
  end
  -- Files sourced through a link are named by the path it leads to: each
  -- directory is known by that path too.
  local uv_ = uv()
  for name, dir in pairs(roots) do
    local real = uv_.fs_realpath(dir)
    if real and real ~= dir then roots[name] = { dir, real } end
  end
  return roots
end

--- Starts polling `channel` (see the module's description).
-- @treturn nil, or a string saying why polling could not start
function M.start(channel)
  if timer then return nil end
  local loop = uv()
  local t = loop.new_timer()
  if not t then return "cannot make a libuv timer" end
  -- The timer's callback runs in libuv's fast context, where the editor's
  -- API may not be called: the poll itself runs on the main loop.
  local poll = vim.schedule_wrap(function() channel.poll() end)
  t:start(M.POLL_MS, M.POLL_MS, poll)
  -- The timer keeps no editor open that would otherwise exit.
  if t.unref then t:unref() end
  timer = t
  -- Before the editor exits, a session the channel started is written
  -- (its path in :messages) and the channel closed.
  local ok = pcall(function()
    augroup = vim.api.nvim_create_augroup("TecsProfileListen", { clear = true })
    vim.api.nvim_create_autocmd("VimLeavePre", { group = augroup, callback = function() channel.finish() end })
  end)
  if not ok then augroup = nil end
  return nil
end

--- Stops polling.
function M.stop()
  if timer then
    timer:stop()
    timer:close()
    timer = nil
  end
  if augroup then
    pcall(vim.api.nvim_del_augroup_by_id, augroup)
    augroup = nil
  end
end

return M
