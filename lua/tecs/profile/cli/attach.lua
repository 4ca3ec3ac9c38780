--- The command line's side of the control channel: `targets`, `attach`
-- and `run --listen` (see `tecs.profile.listen` for the program's side).
-- @module tecs.profile.cli.attach

local M = {}

--- Seconds `attach` waits for an answer unless `--timeout` says otherwise
-- (declared with the option, in `tecs.profile.cli.options`).
M.TIMEOUT = require("tecs.profile.cli.options").option("attach", "timeout").default

-- Which options each command of `attach` takes (besides --timeout).
local TAKES = {
  status = {},
  start = { intervalMs = "--interval", zone = "--zone", seconds = "--seconds", allocations = "--allocations",
    bytesPerSample = "--bytes-per-sample" },
  stop = { output = "--output" },
  report = { by = "--by", ["then"] = "--then", top = "--top", hitches = "--hitches" },
  trace_start = {},
  trace_stop = { output = "--output" },
}
local ALL = { intervalMs = "--interval", zone = "--zone", seconds = "--seconds", output = "--output", by = "--by",
  ["then"] = "--then", top = "--top", hitches = "--hitches", allocations = "--allocations",
  bytesPerSample = "--bytes-per-sample" }

local function native()
  local ok, n = pcall(require, "tecs.profile.native")
  if not ok then error("cannot load the native module tecs.profile.native: " .. tostring(n), 0) end
  if not n.raw.controlTargets then error("this system has no Unix sockets", 0) end
  return n
end

-- The programs listening, or nil and the error.
local function list()
  local n = native()
  local ok, targets = n.call(n.raw.controlTargets, nil)
  if not ok then return nil, targets end
  local dok, dir = n.call(n.raw.controlDirectory, nil)
  return targets, nil, dok and dir or nil
end

local function say_error(msg)
  io.stderr:write("tecs-profile: ", msg, "\n")
  return 1
end

--- `targets`: the programs that can be attached.
-- @treturn number exit code
function M.targets(_, pos, usage_error)
  if #pos > 0 then usage_error("targets takes no argument (got %q)", pos[1]) end
  local targets, err = list()
  if not targets then return say_error(err) end
  if #targets == 0 then
    io.stderr:write("tecs-profile: no program is listening (call profile.listen() in it, or run it with ",
      "tecs-profile run --listen)\n")
    return 0
  end
  io.stdout:write(string.format("%-8s %-7s %-20s %s\n", "PID", "KIND", "STARTED", "PROGRAM"))
  for _, t in ipairs(targets) do
    io.stdout:write(string.format("%-8d %-7s %-20s %s\n", t.pid, t.kind, os.date("%Y-%m-%d %H:%M:%S", t.started),
      t.program))
  end
  return 0
end

--- The target `pid` names (or the only one listening), or nil and why not.
-- @tparam[opt] number pid
-- @treturn table `{ pid, program, kind, socket, started }`
function M.choose(pid)
  local targets, err = list()
  if not targets then return nil, err end
  local pids = {}
  for i, t in ipairs(targets) do pids[i] = tostring(t.pid) end
  if pid then
    for _, t in ipairs(targets) do
      if t.pid == pid then return t end
    end
    return nil, string.format("no program with pid %d is listening (%s)", pid,
      #pids == 0 and "none is" or "listening: " .. table.concat(pids, ", "))
  end
  if #targets == 0 then
    return nil, "no program is listening: call profile.listen() in it, or run it with tecs-profile run --listen"
  elseif #targets > 1 then
    return nil, string.format("%d programs are listening (pids %s): name one, tecs-profile attach PID COMMAND",
      #targets, table.concat(pids, ", "))
  end
  return targets[1]
end

--- `path` as an absolute path (the program, which writes it, runs elsewhere).
-- @tparam string path
-- @treturn string
function M.absolute(path)
  if path:sub(1, 1) == "/" then return path end
  local cwd = os.getenv("PWD")
  if not cwd then
    local p = io.popen("pwd")
    cwd = p and p:read("*l")
    if p then p:close() end
  end
  return (cwd or ".") .. "/" .. path
end

--- The `path` of a `stop` or `trace_stop` for `-o FILE`: a bare file name
-- as it is (the program writes it in its output directory), any other
-- path made absolute (the program, which writes it, runs elsewhere; it
-- writes only in its output directory or the control directory).
-- @tparam string file
-- @treturn string
function M.output_path(file)
  if not file:find("/", 1, true) then return file end
  return M.absolute(file)
end

local function percent(share) return string.format("%5.1f%%", share * 100) end

--- One of a stop's slowest frames as one line: its index, length, the
-- part of it spent on the CPU and waiting (where known), and the functions
-- that ran most in it.
-- @tparam table f `{ index, ms, cpuMs?, top = { { name, share }, ... } }`
-- @treturn string
function M.slow_frame_text(f)
  local parts = {}
  for i, t in ipairs(f.top or {}) do parts[i] = string.format("%s %.0f%%", t.name, t.share * 100) end
  local cpu = f.cpuMs and string.format(" (%.1f ms on CPU, %.1f ms waiting)", f.cpuMs, math.max(0, f.ms - f.cpuMs))
    or ""
  local waits = {}
  for i, w in ipairs(f.waits or {}) do
    if i > 3 then break end
    waits[i] = string.format("%s %.0f%%", w.kind, w.share * 100)
  end
  return string.format("frame %d: %.1f ms%s%s%s", f.index, f.ms, cpu,
    #parts > 0 and ("  " .. table.concat(parts, ", ")) or "",
    #waits > 0 and ("; waits: " .. table.concat(waits, ", ")) or "")
end

-- The answer of `cmd` as text.
local function answer_text(cmd, a)
  local out = {}
  if cmd == "status" then
    out[1] = string.format("pid %d (%s, %s): %s", a.pid, a.program or "?", a.kind or "?",
      a.running and "sampling" or "not sampling")
    if a.samples and a.allocations then
      out[#out + 1] = string.format(", allocations: %d bytes (a sample every %d bytes) in %.2f s", a.samples,
        a.bytesPerSample or 0, a.elapsedSec or 0)
    elseif a.samples then
      out[#out + 1] = string.format(", %d samples every %g ms in %.2f s", a.samples, a.intervalMs or 0, a.elapsedSec or 0)
    end
    if a.secondsLeft then out[#out + 1] = string.format(", stops by itself in %.1f s", a.secondsLeft) end
    out[#out + 1] = "\n"
    if a.path then out[#out + 1] = "last profile: " .. a.path .. "\n" end
  elseif cmd == "start" and a.allocations then
    out[1] = string.format("pid %d: profiling allocations, a sample every %d bytes on average\n", a.pid,
      a.bytesPerSample or 0)
  elseif cmd == "start" then
    out[1] = string.format("pid %d: sampling every %g ms\n", a.pid, a.intervalMs)
  elseif cmd == "stop" and a.allocations then
    out[1] = string.format("%d bytes allocated (sampled) in %.2f s; written to %s\n", a.samples, a.elapsedSec or 0,
      a.path)
    for _, f in ipairs(a.top or {}) do
      out[#out + 1] = string.format("  %s  %s\n", percent(f.share), f.name)
    end
  elseif cmd == "stop" then
    out[1] = string.format("%d samples in %.2f s; written to %s\n", a.samples, a.elapsedSec or 0, a.path)
    for _, f in ipairs(a.top or {}) do
      out[#out + 1] = string.format("  %s  %s\n", percent(f.share), f.name)
    end
    if a.zones then
      out[#out + 1] = "zones:\n"
      for _, z in ipairs(a.zones) do out[#out + 1] = string.format("  %s  %s\n", percent(z.share), z.name) end
    end
    if a.hitches and #a.hitches > 0 then
      out[#out + 1] = string.format("slowest of %d frames:\n", a.framesMarked or #a.hitches)
      for _, f in ipairs(a.hitches) do out[#out + 1] = "  " .. M.slow_frame_text(f) .. "\n" end
    end
  elseif cmd == "trace_start" then
    out[1] = string.format("pid %d: tracking trace aborts\n", a.pid)
  elseif cmd == "trace_stop" then
    out[1] = string.format("%d trace aborts; written to %s\n", a.aborts or 0, a.path)
    for _, site in ipairs(a.sites or {}) do
      out[#out + 1] = string.format("  %6d  %-9s %s: %s%s\n", site.count, site.severity, site.location, site.reason,
        site.zone and (" [" .. site.zone .. "]") or "")
    end
  else
    out[1] = a.text
  end
  return table.concat(out)
end

--- Sends `request` (a command of the protocol) to `target` and waits up to
-- `timeout` seconds for the answer.
-- @return the answer table, or nil and why there is none
function M.send(target, request, timeout)
  local n = native()
  local ok, answer = n.call(n.raw.controlRequest, target.socket, request, timeout or M.TIMEOUT)
  if not ok then return nil, answer end
  return answer
end

--- The programs listening (`{ pid, program, kind, socket, started }`
-- each), or nil and the error.
function M.targets_list()
  local targets, err = list()
  return targets, err
end

--- `attach [PID] COMMAND [options]`: one command to a running program.
-- @treturn number exit code
function M.attach(opts, pos, usage_error)
  local pid
  local first = pos[1]
  if first and first:match("^%d+$") then
    pid = tonumber(first)
    table.remove(pos, 1)
  end
  local cmd = pos[1]
  if cmd == nil then usage_error("attach needs a COMMAND: status, start, stop, report, trace_start or trace_stop") end
  if not TAKES[cmd] then
    usage_error("attach: unknown COMMAND %q (status, start, stop, report, trace_start or trace_stop expected)", cmd)
  end
  if #pos > 1 then usage_error("attach %s: unexpected argument %q", cmd, pos[2]) end
  for key, spelling in pairs(ALL) do
    if opts[key] ~= nil and not TAKES[cmd][key] then usage_error("option %s is not one of attach %s", spelling, cmd) end
  end
  local function positive(key, spelling, integer)
    local v = opts[key]
    if v ~= nil and (v <= 0 or v == math.huge or (integer and v ~= math.floor(v))) then
      usage_error("option %s needs a positive %s, got %s", spelling, integer and "integer" or "number", tostring(v))
    end
  end
  positive("intervalMs", "--interval")
  positive("bytesPerSample", "--bytes-per-sample", true)
  if opts.bytesPerSample ~= nil and not opts.allocations then
    usage_error("option --bytes-per-sample needs --allocations")
  end
  if opts.intervalMs ~= nil and opts.allocations then
    usage_error("option --interval is not one of attach start --allocations (its samples are bytes)")
  end
  positive("seconds", "--seconds")
  positive("timeout", "--timeout")
  positive("top", "--top", true)
  positive("hitches", "--hitches", true)
  local target, err = M.choose(pid)
  if not target then return say_error(err) end
  local request = { cmd = cmd }
  if cmd == "start" then
    request.intervalMs, request.zone, request.seconds = opts.intervalMs, opts.zone, opts.seconds
    request.allocations, request.bytesPerSample = opts.allocations or nil, opts.bytesPerSample
  elseif cmd == "stop" or cmd == "trace_stop" then
    request.path = opts.output and M.output_path(opts.output)
  elseif cmd == "report" then
    request.by, request["then"], request.top, request.hitches = opts.by, opts["then"], opts.top, opts.hitches
  end
  local n = native()
  local ok, answer = n.call(n.raw.controlRequest, target.socket, request, opts.timeout or M.TIMEOUT)
  if not ok then return say_error(string.format("attach %s to pid %d: %s", cmd, target.pid, answer)) end
  if not answer.ok then return say_error(string.format("pid %d: %s", target.pid, answer.error)) end
  io.stdout:write(answer_text(cmd, answer))
  return 0
end

return M
