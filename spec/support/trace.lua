-- Helpers shared by the trace-tracker specs (spec/trace_*_spec.lua): running
-- a fixture under a trace session in a fresh LuaJIT, reading its report back,
-- comparing with -jv, and making hot loops in-process.
--
-- In-process tests run inside the test runner, whose own code LuaJIT traces
-- too: while a session is open, the runner may start, complete and abort
-- traces of its own. Such tests look only at the sites of their own chunks
-- (`own_sites`) and check counts with relations that hold whatever foreign
-- traces are added.
local csv4180 = require("spec.support.csv4180")
local jv = require("spec.support.jv")
local luassert = require("luassert")

local M = {}

M.LUAJIT = os.getenv("LUAJIT_BIN") or "luajit"
M.RUNNER = "spec/support/trace_runner.lua"
M.RECERR = "error thrown or hook called during recording"
M.COLUMNS = { "severity", "count", "reason", "location", "zone" }

-- Command-line option that leaves LuaJIT's own jit/ directory (jit.vmdef,
-- jit.zone) off package.path. Set from the command line rather than through
-- LUA_PATH, so that it also works for a launcher that puts jit/ on the path
-- itself (scripts/luajit2.sh) or a binary with the directory compiled in.
-- Only `?.lua` patterns: the package needs no `?/init.lua`.
M.HIDE_JIT_DIR = [[-e "package.path = 'lua/?.lua'"]]

function M.read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

-- Runs `script` (Lua source) in a fresh LuaJIT; returns its standard output
-- (and its standard error with `with_stderr`).
function M.run_script(script, with_stderr)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local p = io.popen(M.LUAJIT .. " " .. path .. (with_stderr and " 2>&1" or ""))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out
end

-- Run a fixture under a trace session in a fresh LuaJIT. With `with_jv`, the
-- same process also runs -jv (which the session chains to). Returns the
-- parsed CSV records, the summary fields, the -jv text (or nil) and the CSV.
function M.run_fixture(name, opts)
  opts = opts or {}
  local fixture = "spec/fixtures/trace_" .. name .. ".lua"
  local out = os.tmpname()
  local args = string.format("%s %s %s %s", M.RUNNER, fixture, out, opts.benign and "benign" or "")
  local jv_text
  if opts.with_jv then
    local ok
    jv_text, ok = jv.run(M.LUAJIT, args)
    assert(ok, "runner failed for " .. fixture)
  else
    local hide = opts.hide_vmdef and (M.HIDE_JIT_DIR .. " ") or ""
    local rc = os.execute(M.LUAJIT .. " " .. hide .. args)
    assert(rc == 0 or rc == true, "runner failed for " .. fixture)
  end
  local csv_text = M.read(out .. ".csv")
  local summary = {}
  for k, v in M.read(out .. ".summary"):gmatch("([%w_]+)=([^\n]*)") do
    summary[k] = tonumber(v) or v
  end
  os.remove(out); os.remove(out .. ".csv"); os.remove(out .. ".summary")
  local records = csv4180.parse(csv_text)
  return records, summary, jv_text, csv_text
end

-- Sites from parsed CSV records (header checked).
function M.sites_of(records)
  luassert.same(M.COLUMNS, records[1])
  local sites = {}
  for i = 2, #records do
    local r = records[i]
    sites[#sites + 1] = { severity = r[1], count = tonumber(r[2]), reason = r[3], location = r[4], zone = r[5] }
  end
  return sites
end

function M.find_site(sites, pred)
  for _, s in ipairs(sites) do if pred(s) then return s end end
end

-- The sites whose location is in one of the chunks named in `chunks` (chunk
-- names as locations show them, without the ":line"), in report order.
function M.own_sites(sites, ...)
  local chunks = {}
  for _, c in ipairs({ ... }) do chunks[c] = true end
  local own = {}
  for _, s in ipairs(sites) do
    if chunks[s.location:match("^(.*):%d+$") or s.location] then own[#own + 1] = s end
  end
  return own
end

-- Sum of the counts of `sites`.
function M.total(sites)
  local n = 0
  for _, s in ipairs(sites) do n = n + s.count end
  return n
end

-- Where -jv names a builtin as the place of an abort ("... at
-- ffi.meta.__call", as OpenResty's luajit2 does for an abort inside a
-- builtin) the report names the Lua line that called the builtin, which is
-- what other VMs' -jv prints. Such aborts are compared by reason under this
-- key; the lines the report gives for them are checked exactly in the
-- severity specs.
M.IN_BUILTIN = "(Lua line calling a builtin)"

local function is_file_line(location)
  return location:find(":%d+$") ~= nil
end

-- -jv's aborts counted by "reason @ location" (IN_BUILTIN for a builtin),
-- and the set of reasons -jv placed in a builtin.
function M.count_jv(aborts)
  local counts, in_builtin = {}, {}
  for _, a in ipairs(aborts) do
    local location = a.location
    if not is_file_line(location) then
      in_builtin[a.reason] = true
      location = M.IN_BUILTIN
    end
    local key = a.reason .. " @ " .. location
    counts[key] = (counts[key] or 0) + 1
  end
  return counts, in_builtin
end

-- Count sites by "reason @ base name:line", across severities, as -jv shows
-- them (reasons -jv placed in a builtin under IN_BUILTIN).
function M.count_like_jv(sites, in_builtin)
  local counts = {}
  for _, s in ipairs(sites) do
    local location = s.location:gsub("^.*/", "")
    if in_builtin and in_builtin[s.reason] then location = M.IN_BUILTIN end
    local key = s.reason .. " @ " .. location
    counts[key] = (counts[key] or 0) + s.count
  end
  return counts
end

-- A chunk whose loop makes itself hot and aborts on a closure (NYI: bytecode
-- FNEW) at line 1 of `chunkname`. The closure captures nothing: one that
-- captured the loop variable would also abort on closing it (NYI: bytecode
-- UCLO) whenever a trace started inside the closure returns into the loop,
-- a second reason at the same line (seen about 1 run in 75). A fresh chunk every time: a new
-- prototype, so earlier penalties and blacklists do not carry over. How many
-- aborts it gives depends on the hot counters' state (shared with all other
-- code of the process) and on LuaJIT's randomised penalties, so in-process
-- tests check relations. The hot counters are reset before the loop runs:
-- they are shared by hash slot, and an abort elsewhere can leave a penalty
-- of up to 60,000 in the loop's slot, more than its iterations take off.
function M.fresh_nyi_loop(chunkname, iterations)
  local src = "local s = 0 for i = 1, " .. (iterations or 1000) ..
    " do local f = function() return 1 end s = s + f() end return s"
  local chunk = assert(loadstring(src, chunkname))
  return function()
    M.reset_hot_counters()
    return chunk()
  end
end

-- Resets every hot counter of the VM to its start value (LuaJIT does so
-- when its compiler is turned back on); compiled traces are kept.
function M.reset_hot_counters()
  jit.off()
  jit.on()
end

-- Closes a session a failed test left open.
function M.stop_active()
  local s = require("tecs.profile.trace").active()
  if s then s:stop() end
end

return M
