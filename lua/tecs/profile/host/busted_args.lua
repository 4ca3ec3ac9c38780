--- The arguments of the busted helper (`-Xhelper k=v,k=v`), declared once:
-- read by the helper itself and by `tecs-profile busted`, which must know
-- before busted loads anything whether a coverage run starts there.
-- @module tecs.profile.host.busted_args

local check = require("tecs.profile.check")

local busted_args = {}

--- Each argument: name and help, in the order the error message lists them.
busted_args.ARGS = {
  { "out", "PATH", "the collapsed-stack file (default busted.collapsed, or $TECS_PROFILE)" },
  { "intervalMs", "N", "sampling interval (or $TECS_PROFILE_INTERVAL_MS)" },
  { "stackDepth", "N", "frames kept per sample" },
  { "cover", "PATH", "coverage of the run instead of a profile, written to PATH (lcov, or luacov stats)" },
  { "coverInclude", "PATTERN", "count only chunks whose name matches this Lua pattern" },
  { "coverExclude", "PATTERN", "do not count chunks whose name matches this Lua pattern" },
  { "coverPreloaded", "yes", "also count the modules busted loads before the helper (Penlight's pl.*):"
    .. " the session starts before busted loads anything; needs tecs-profile busted" },
}

local KNOWN = {}
for _, a in ipairs(busted_args.ARGS) do KNOWN[a[1]] = a end

--- The settings `k=v` arguments give, starting from the environment's.
-- @param list the helper's arguments (the global `arg` under busted)
-- @return settings by name
function busted_args.parse(list)
  local settings = { out = os.getenv("TECS_PROFILE"), intervalMs = os.getenv("TECS_PROFILE_INTERVAL_MS") }
  for _, a in ipairs(type(list) == "table" and list or {}) do
    local k, v = tostring(a):match("^([%w_]+)=(.*)$")
    if not KNOWN[k] then
      local names = {}
      for _, d in ipairs(busted_args.ARGS) do names[#names + 1] = d[1] .. "=" .. d[2] end
      error(string.format("tecs.profile.busted: unknown helper argument %s (expected %s)",
        check.describe(a), table.concat(names, ", ")), 0)
    end
    settings[k] = v
  end
  if settings.coverPreloaded ~= nil and settings.coverPreloaded ~= "yes" and settings.coverPreloaded ~= "no" then
    error(string.format("tecs.profile.busted: coverPreloaded must be yes or no (got %s)",
      check.describe(settings.coverPreloaded)), 0)
  end
  return settings
end

--- Whether the settings ask for a coverage run.
function busted_args.covers(settings)
  return settings.cover ~= nil and settings.cover ~= ""
end

--- The `profile.coverage` options of a coverage run: spec files and the
-- system's Lua libraries are not counted (busted's own modules load during
-- the run).
function busted_args.coverage_options(settings)
  return { include = settings.coverInclude,
    exclude = { "_spec%.lua$", "^/usr/share/lua/", "^/usr/local/share/lua/", "^/usr/share/luajit", "^/usr/local/share/luajit",
      settings.coverExclude } }
end

--- The helper's arguments among busted's command-line arguments: the
-- values of `-Xhelper V` and `-Xhelper=V`, split at commas as busted does.
function busted_args.from_command_line(args)
  local out, i = {}, 1
  local function add(v)
    for piece in v:gmatch("[^,]+") do out[#out + 1] = piece end
  end
  while i <= #args do
    local a = args[i]
    if a == "--" then break end
    if a == "-Xhelper" and args[i + 1] then
      add(args[i + 1])
      i = i + 1
    elseif a:match("^%-Xhelper=") then
      add(a:sub(10))
    end
    i = i + 1
  end
  return out
end

return busted_args
