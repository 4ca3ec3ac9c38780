--- `tecs-profile mcp`: a Model Context Protocol server over stdio, so that
-- an agent can profile a running program ("profile it for 5 seconds")
-- through the control channel (`tecs.profile.listen`, docs/control.md).
--
-- One JSON-RPC message per line on stdin, one answer per request on stdout;
-- nothing else is written there (messages for a person go to stderr). Both
-- eras of the protocol are answered, each revision as `tecs.profile.mcp.protocol`
-- declares it: 2025-11-25 and earlier (`initialize`, then `tools/list` and
-- `tools/call`) and the stateless 2026-07-28 (no handshake; `server/discover`;
-- each request names its revision in `_meta`). Beyond the revision
-- `initialize` chose, the server keeps no state between requests: each tool
-- call finds its target and sends it one command. The profiles the programs
-- write in the control directory are resources (`tecs.profile.mcp.resources`).
-- @module tecs.profile.mcp

local attach = require("tecs.profile.cli.attach")
local clock = require("tecs.profile.clock")
local native = require("tecs.profile.native")
local protocol = require("tecs.profile.mcp.protocol")
local resources = require("tecs.profile.mcp.resources")

local M = {}

--- The revisions answered, newest first.
M.VERSIONS = protocol.VERSIONS

-- Seconds between two progress notifications of a call that waits.
local PROGRESS_SECONDS = 1

local SERVER_INFO = { name = "tecs-profile", version = "0.1.0" }

local INSTRUCTIONS = "Profiles running LuaJIT programs (LÖVE games, OpenResty workers, scripts) that listen for "
  .. "tecs-profile (profile.listen() in the program, or tecs-profile run --listen script.lua). "
  .. "Call list_targets first; then profiler_start with seconds to profile for a while and get the result, "
  .. "or profiler_start and later profiler_stop; report gives another view of the last profile. The profiles "
  .. "written are resources (their links come with the results)."

-- An empty JSON object (an empty table is written as an array otherwise).
local OBJECT = { __jsontype = "object" }
local function object(t) return setmetatable(t or {}, OBJECT) end

--- The greatest pid (Linux's PID_MAX_LIMIT, 2^22).
M.MAX_PID = 4194304

local TARGET = { type = "integer", minimum = 1, maximum = M.MAX_PID, description = "pid of the program "
  .. "(list_targets); may be left out when exactly one program is listening" }

-- The bounds of the fields of the control channel's commands, declared
-- with its protocol (`control::FIELDS`), and those of profile.sample's
-- options.
local FIELDS = native.raw.controlFields or {}
local SAMPLE_BOUNDS = native.options.sample.bounds

-- A tool argument that is the field `name` of `command`: its type and
-- bounds as the protocol declares them.
local function field(command, name, description)
  local f = FIELDS[command] and FIELDS[command][name] or { type = "string" }
  return { type = f.type, minimum = f.minimum, maximum = f.maximum, maxLength = f.maxLength,
    description = description }
end

local PATH_HELP = "a file name, written in the program's output directory (profile.listen{ outputDir }, else the "
  .. "control directory), or an absolute path in one of those two; a new file, or one the program's channel wrote "
  .. "itself (anything else is refused, saying where it may write)"

-- A function's or zone's share of a profile's samples.
local SHARE = { type = "object", properties = { name = { type = "string" }, share = { type = "number" } } }
-- What `profile.report`'s options take and mean, as the native module
-- declares them.
local REPORT_CHOICES, REPORT_HELP = native.options.report.choices, native.options.report.help

--- The tools, in the order tools/list gives them.
M.TOOLS = {
  {
    name = "list_targets",
    description = "Lists the programs that can be profiled: pid, kind (love, nginx, nvim, luajit), program name and "
      .. "start time. Call it first; pass a pid as `target` to the other tools when more than one is listed.",
    inputSchema = { type = "object", properties = object(), additionalProperties = false },
  },
  {
    name = "profiler_start",
    description = "Starts sampling the target's CPU time (with `allocations`, the bytes it allocates, by the stacks "
      .. "that allocate them). With `seconds`, waits that long, stops, and returns what "
      .. "profiler_stop returns (top functions with their shares, the file written); without it, returns at once: "
      .. "call profiler_stop later.",
    inputSchema = {
      type = "object",
      properties = {
        target = TARGET,
        intervalMs = { type = "number", minimum = SAMPLE_BOUNDS.intervalMs.minimum,
          maximum = SAMPLE_BOUNDS.intervalMs.maximum, description = "sampling interval in milliseconds (default 1)" },
        zone = field("start", "zone", "record only samples in this jit.zone path or below it"),
        seconds = field("start", "seconds", "profile this long, then stop and return the profile"),
        allocations = { type = "boolean",
          description = "profile the bytes the target allocates instead of its CPU time (an allocation session)" },
        bytesPerSample = field("start", "bytesPerSample",
          "with allocations: a sample about every this many bytes allocated (default 524288)"),
      },
      additionalProperties = false,
    },
  },
  {
    name = "profiler_stop",
    description = "Stops the target's session and writes its profile: returns which profile it is (when it started, "
      .. "how long it ran), the samples, the file written (also a resource), the top functions and zones with their "
      .. "shares and 95% sampling errors, and the slowest frames (games that mark frames; LÖVE does) with the "
      .. "functions that ran most in them. With no session running it fails, saying where the last profile is: "
      .. "report gives its views.",
    inputSchema = {
      type = "object",
      properties = {
        target = TARGET,
        path = field("stop", "path", "the file to write: " .. PATH_HELP .. "; its ending picks the format: "
          .. table.concat((native.raw.controlLimits or {}).profileEndings or {}, ", ")
          .. " (default: a new .collapsed file in the control directory)"),
      },
      additionalProperties = false,
    },
    outputSchema = {
      type = "object",
      properties = {
        samples = { type = "number" },
        startedAt = { type = "number", description = "when the session started, Unix seconds" },
        elapsedSec = { type = "number", description = "how long it ran" },
        path = { type = "string" },
        top = { type = "array", items = SHARE },
        zones = { type = "array", items = SHARE },
        slowest = { type = "array", items = { type = "object", properties = {
          index = { type = "integer" }, ms = { type = "number" }, top = { type = "array", items = SHARE },
          waits = { type = "array", description = "where the frame waited, by kind (present, sleep, process, "
            .. "I/O, collector), with its share of the frame's samples", items = { type = "object", properties = {
            kind = { type = "string" }, share = { type = "number" } } } } } } },
      },
      required = { "samples", "path", "top" },
    },
  },
  {
    name = "report",
    description = "A text view of the target's last profile (or the running one), headed by which profile it is "
      .. "(when its session started, how long it ran, its samples): rows by function (default), "
      .. "line, module, zone, zonecomponent, vmstate or plugin (in Neovim: the plugin whose code ran), each with a "
      .. "second level `then` (caller and callee show "
      .. "who calls a function and what it calls), the top N rows with their shares and the total samples; or "
      .. "with `hitches`, the N slowest frames and what ran in them.",
    inputSchema = {
      type = "object",
      properties = {
        target = TARGET,
        by = { type = "string", enum = REPORT_CHOICES.by, description = REPORT_HELP.by },
        ["then"] = { type = "string", enum = REPORT_CHOICES["then"], description = REPORT_HELP["then"] },
        top = field("report", "top", "rows shown (default 20)"),
        hitches = field("report", "hitches", "instead of rows, the N slowest frames and what ran in them"),
      },
      additionalProperties = false,
    },
  },
  {
    name = "trace_start",
    description = "Starts tracking the target's JIT trace aborts (why hot code is not compiled). Call trace_stop "
      .. "later for the abort sites.",
    inputSchema = {
      type = "object",
      properties = {
        target = TARGET,
        includeBenign = { type = "boolean", description = "also count the aborts LuaJIT recovers from by itself" },
      },
      additionalProperties = false,
    },
  },
  {
    name = "trace_stop",
    description = "Stops tracking trace aborts: returns how many there were and the most frequent sites (severity, "
      .. "count, reason, location, zone), and the CSV file written.",
    inputSchema = {
      type = "object",
      properties = {
        target = TARGET,
        path = field("trace_stop", "path", "the CSV file to write, ending in .csv: " .. PATH_HELP
          .. " (default: a new file in the control directory)"),
      },
      additionalProperties = false,
    },
  },
}

local by_name = {}
for _, t in ipairs(M.TOOLS) do by_name[t.name] = t end

-- A tool's failure: an agent reads the text and knows what to do next.
local function failed(text)
  return { content = { { type = "text", text = text } }, isError = true }
end

local function succeeded(text, structured)
  return { content = { { type = "text", text = text } }, structuredContent = structured }
end

-- The target named by `args.target` (or the only one listening), or nil
-- and a failure result that says how to go on.
local function target_of(args)
  local targets, err = attach.targets_list()
  if not targets then return nil, failed(err) end
  local pids = {}
  for i, t in ipairs(targets) do pids[i] = tostring(t.pid) end
  if args.target then
    for _, t in ipairs(targets) do
      if t.pid == args.target then return t end
    end
    return nil, failed(string.format("no program with pid %d is listening (%s). Call list_targets and pass one of "
      .. "its pids as target.", args.target, #pids == 0 and "none is" or "listening: " .. table.concat(pids, ", ")))
  end
  if #targets == 0 then
    return nil, failed("No program is listening. In the program call require(\"tecs.profile\").listen() (in "
      .. "OpenResty, in init_worker_by_lua*), or start it with tecs-profile run --listen script.lua; then call "
      .. "list_targets.")
  elseif #targets > 1 then
    return nil, failed(string.format("%d programs are listening (pids %s): pass the pid of the one to profile as "
      .. "target (list_targets says which is which).", #targets, table.concat(pids, ", ")))
  end
  return targets[1]
end

-- Sends one command; nil and a failure result when it has no answer.
local function sleep(seconds)
  os.execute(string.format("sleep %.3f", seconds))
end

-- Seconds between two tries of a command the target answered "busy" (it
-- serves one client at a time: another `tecs-profile attach`, say).
local BUSY_RETRY_SECONDS = 0.05

local function send(target, request)
  local deadline = clock.now() + attach.TIMEOUT
  local answer, err = attach.send(target, request)
  while answer and not answer.ok and tostring(answer.error):match("^busy:") and clock.now() < deadline do
    sleep(BUSY_RETRY_SECONDS)
    answer, err = attach.send(target, request)
  end
  if not answer then
    return nil, failed(string.format("pid %d did not answer (%s): it may not be polling (a long load, a hitch, "
      .. "or profile.poll() not called); the command runs at its next poll. Try again shortly.", target.pid, err))
  end
  if not answer.ok then return nil, failed(string.format("pid %d: %s", target.pid, answer.error)) end
  return answer
end

-- Which profile an answer of the channel describes: when its session
-- started, how long it ran, its samples.
local function which_profile(a)
  local started = a.startedAt and os.date("%Y-%m-%d %H:%M:%S", a.startedAt) or "at an unknown time"
  if a.allocations then
    return string.format("the allocation session started %s, %.2f s, %d bytes allocated (a sample every %d bytes)",
      started, a.elapsedSec or 0, a.samples or 0, a.bytesPerSample or 0)
  end
  return string.format("the session started %s, %.2f s, %d samples", started, a.elapsedSec or 0, a.samples or 0)
end

-- A result's content: its text, then a link to each file written that is
-- a resource.
local function with_links(result, ...)
  for _, link in ipairs({ ... }) do
    if link then result.content[#result.content + 1] = link end
  end
  return result
end

-- The text and structured content of a stop's answer.
local function stopped(target, a)
  local top, lines = {}, {}
  -- The samples the shares rest on (an allocation session counts bytes).
  local n = a.allocations and (a.samples or 0) / (a.bytesPerSample or 1) or a.samples or 0
  lines[1] = string.format("pid %d (%s): profile of %s; written to %s", target.pid, target.program or "?",
    which_profile(a), tostring(a.path))
  if #(a.top or {}) > 0 then lines[2] = "Top functions by self time (share ± 95% sampling error):" end
  local function share_line(f)
    local err = n > 0 and 1.96 * math.sqrt(f.share * (1 - f.share) / n) or 0
    lines[#lines + 1] = string.format("  %5.1f%% ±%.1f  %s", f.share * 100, err * 100, f.name)
    return { name = f.name, share = f.share }
  end
  for i, f in ipairs(a.top or {}) do top[i] = share_line(f) end
  local zones, slowest
  if a.zones then
    lines[#lines + 1] = "Zones by samples:"
    zones = {}
    for i, z in ipairs(a.zones) do zones[i] = share_line(z) end
  end
  if a.hitches then
    lines[#lines + 1] = string.format("Slowest of %d frames:", a.framesMarked or #a.hitches)
    slowest = {}
    for i, f in ipairs(a.hitches) do
      lines[#lines + 1] = "  " .. attach.slow_frame_text(f)
      slowest[i] = { index = f.index, ms = f.ms, top = f.top, waits = f.waits and #f.waits > 0 and f.waits or nil }
    end
  end
  lines[#lines + 1] = "Next: report with by = \"zone\" or \"line\", then = \"caller\", or hitches = N for other "
    .. "views of this profile."
  return with_links(succeeded(table.concat(lines, "\n"), { samples = n, startedAt = a.startedAt,
    elapsedSec = a.elapsedSec, path = tostring(a.path), top = top, zones = zones, slowest = slowest }),
    resources.link(a.path, "the profile of " .. which_profile(a)))
end

local run = {}

function run.list_targets()
  local targets, err = attach.targets_list()
  if not targets then return failed(err) end
  local lines, list = {}, {}
  for i, t in ipairs(targets) do
    list[i] = { pid = t.pid, kind = t.kind, program = t.program, started = t.started }
    lines[i] = string.format("pid %d  %s  %s  started %s", t.pid, t.kind, t.program, os.date("%Y-%m-%d %H:%M:%S",
      t.started))
  end
  if #targets == 0 then
    lines[1] = "No program is listening. In the program call require(\"tecs.profile\").listen(), or start it "
      .. "with tecs-profile run --listen script.lua."
  end
  return succeeded(table.concat(lines, "\n"), { targets = list })
end

-- Waits `seconds` while the target samples; with a progress token, sends
-- `notifications/progress` about once a second (progress and total in
-- seconds, the samples so far in the message), and a last one at the end.
local function wait_sampling(target, seconds, progress)
  local began = clock.now()
  local elapsed = 0
  while elapsed < seconds do
    sleep(math.min(PROGRESS_SECONDS, seconds - elapsed))
    elapsed = clock.now() - began
    if progress and elapsed < seconds then
      -- The samples so far, if the target answers while the wait goes on:
      -- one that does not poll delays neither the notification nor the stop.
      local status = attach.send(target, { cmd = "status" }, math.min(PROGRESS_SECONDS / 2, seconds - elapsed))
      local samples = status and status.ok and status.samples
      progress(elapsed, seconds, string.format("pid %d: %.0f of %g s%s", target.pid, elapsed, seconds,
        samples and string.format(", %d samples", samples) or ""))
      -- The status took time of its own: the next sleep is what is left.
      elapsed = clock.now() - began
    end
  end
  if progress then progress(seconds, seconds, string.format("pid %d: %g s done, stopping", target.pid, seconds)) end
end

function run.profiler_start(args, progress)
  local target, failure = target_of(args)
  if not target then return failure end
  local a
  a, failure = send(target, { cmd = "start", intervalMs = args.intervalMs, zone = args.zone, seconds = args.seconds,
    allocations = args.allocations, bytesPerSample = args.bytesPerSample })
  if not a then return failure end
  if not args.seconds and a.allocations then
    return succeeded(string.format("pid %d: profiling allocations, a sample every %d bytes on average. Call "
      .. "profiler_stop to stop and read the profile.", target.pid, a.bytesPerSample or 0),
      { pid = target.pid, allocations = true, bytesPerSample = a.bytesPerSample })
  end
  if not args.seconds then
    return succeeded(string.format("pid %d: sampling every %g ms. Call profiler_stop to stop and read the profile.",
      target.pid, a.intervalMs or 1), { pid = target.pid, intervalMs = a.intervalMs })
  end
  wait_sampling(target, args.seconds, progress)
  a, failure = send(target, { cmd = "stop" })
  if not a then return failure end
  return stopped(target, a)
end

function run.profiler_stop(args)
  local target, failure = target_of(args)
  if not target then return failure end
  -- Nothing running: an error that says so, never the last profile again
  -- as if this call had taken it. (A profile its stop could not write is
  -- still stopped here: the channel writes it now.)
  local status
  status, failure = send(target, { cmd = "status" })
  if not status then return failure end
  if not status.running and (status.path or not status.samples) then
    if not status.samples then
      return failed(string.format("pid %d: no profiling session is running, and none has run since the program "
        .. "started listening: call profiler_start first.", target.pid))
    end
    return with_links(failed(string.format("pid %d: no profiling session is running, so nothing was stopped. The last "
      .. "profile, of %s, was written to %s: call report for its views (by function, line, zone, caller, hitches), or "
      .. "profiler_start to take another.", target.pid, which_profile(status), status.path)),
      resources.link(status.path, "the profile of " .. which_profile(status)))
  end
  local a
  a, failure = send(target, { cmd = "stop", path = args.path })
  if not a then return failure end
  return stopped(target, a)
end

function run.report(args)
  local target, failure = target_of(args)
  if not target then return failure end
  local a
  a, failure = send(target, { cmd = "report", by = args.by, ["then"] = args["then"], top = args.top or 20,
    hitches = args.hitches })
  if not a then return failure end
  -- Which profile the rows are of, first: the running session's so far, or
  -- the last one stopped.
  local head = a.running and string.format("pid %d: the running session so far: %s.", target.pid, which_profile(a))
    or string.format("pid %d: the last profile, of %s (stopped; written to %s).", target.pid, which_profile(a),
      tostring(a.path))
  return succeeded(head .. "\n" .. a.text, { text = a.text, running = a.running, startedAt = a.startedAt,
    elapsedSec = a.elapsedSec, samples = a.samples, path = a.path })
end

function run.trace_start(args)
  local target, failure = target_of(args)
  if not target then return failure end
  local a
  a, failure = send(target, { cmd = "trace_start", includeBenign = args.includeBenign })
  if not a then return failure end
  return succeeded(string.format("pid %d: tracking trace aborts. Call trace_stop for the abort sites.", target.pid),
    { pid = target.pid })
end

function run.trace_stop(args)
  local target, failure = target_of(args)
  if not target then return failure end
  local a
  a, failure = send(target, { cmd = "trace_stop", path = args.path })
  if not a then return failure end
  local lines = { string.format("pid %d: %d trace aborts; report written to %s", target.pid, a.aborts or 0,
    tostring(a.path)) }
  for _, site in ipairs(a.sites or {}) do
    lines[#lines + 1] = string.format("  %6d  %-9s %s: %s%s", site.count, site.severity, site.location, site.reason,
      site.zone and (" [" .. site.zone .. "]") or "")
  end
  if #(a.sites or {}) > 0 then
    lines[#lines + 1] = "Blacklisted and warn sites in hot code are worth fixing first; profiler_stop shows where the "
      .. "time goes."
  end
  return with_links(succeeded(table.concat(lines, "\n"), { aborts = a.aborts or 0, path = tostring(a.path),
    sites = a.sites or {} }), resources.link(a.path, "the trace aborts' sites, as CSV"))
end

-- A number as a message shows it.
local function number_text(v)
  if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%d", v) end
  return string.format("%.14g", v)
end

-- Checks `args` against the tool's input schema: known names, types,
-- bounds (`minimum`, `maximum`, `maxLength`), choices.
local function check_args(tool, args)
  if type(args) ~= "table" then return "arguments must be an object" end
  local props = tool.inputSchema.properties
  for k, v in pairs(args) do
    local p = type(k) == "string" and rawget(props, k)
    if not p then return string.format("unknown argument '%s'", tostring(k)) end
    local want = (p.type == "integer" or p.type == "number") and "number" or p.type
    if type(v) ~= want then return string.format("argument '%s' must be a %s", k, p.type) end
    if want == "number" then
      if p.type == "integer" and v ~= math.floor(v) then
        return string.format("argument '%s' must be an integer (got %s)", k, number_text(v))
      end
      if not (v >= p.minimum and v <= p.maximum) then
        return string.format("argument '%s' must be %s from %s to %s (got %s)", k,
          p.type == "integer" and "an integer" or "a number", number_text(p.minimum), number_text(p.maximum),
          number_text(v))
      end
    elseif want == "string" then
      if p.maxLength and #v > p.maxLength then
        return string.format("argument '%s' must be at most %d bytes long (got %d)", k, p.maxLength, #v)
      end
      if p.enum then
        local ok = false
        for _, e in ipairs(p.enum) do ok = ok or e == v end
        if not ok then return string.format("argument '%s' must be one of %s", k, table.concat(p.enum, ", ")) end
      end
    end
  end
  return nil
end

-- Each method's answer, given its params, a function that sends a
-- notification while it runs, and the connection (`{ revision }`: the row
-- `initialize` chose). Which era has a method and what its result carries
-- there is `tecs.profile.mcp.protocol`'s.
local methods = {}

local CAPABILITIES = { tools = object({ listChanged = false }),
  resources = object({ listChanged = false, subscribe = false }) }

function methods.initialize(params, _, conn)
  local r = protocol.negotiate(type(params) == "table" and params.protocolVersion)
  conn.revision = r
  return { protocolVersion = r.version, capabilities = CAPABILITIES, serverInfo = SERVER_INFO,
    instructions = INSTRUCTIONS }
end

methods["server/discover"] = function()
  return { supportedVersions = protocol.VERSIONS, capabilities = CAPABILITIES, instructions = INSTRUCTIONS }
end

function methods.ping() return object() end

methods["tools/list"] = function()
  return { tools = M.TOOLS }
end

methods["tools/call"] = function(params, notify)
  local tool = type(params) == "table" and by_name[params.name]
  if not tool then
    return nil, { code = protocol.ERRORS.invalid_params,
      message = "unknown tool: " .. tostring(type(params) == "table" and params.name) }
  end
  local args = params.arguments or {}
  local bad = check_args(tool, args)
  if bad then return failed(tool.name .. ": " .. bad) end
  local meta = type(params._meta) == "table" and params._meta
  local token = meta and meta.progressToken
  local progress
  if notify and (type(token) == "string" or type(token) == "number") then
    progress = function(done, total, message)
      notify({ jsonrpc = "2.0", method = "notifications/progress",
        params = { progressToken = token, progress = done, total = total, message = message } })
    end
  end
  local ok, result = pcall(run[tool.name], args, progress)
  if not ok then return failed(tool.name .. ": " .. tostring(result)) end
  return result
end

-- The last profile of each program listening, as resources. A program
-- that does not answer within the channel's patience (as with a tool, a
-- busy one asked again) is left out.
methods["resources/list"] = function()
  local targets = attach.targets_list() or {}
  local files = {}
  for _, t in ipairs(targets) do
    local status = send(t, { cmd = "status" })
    if status and status.path then
      files[#files + 1] = { path = status.path, title = string.format("pid %d (%s): last profile", t.pid, t.program),
        description = "the profile of " .. which_profile(status) }
    end
  end
  return { resources = resources.list(files) }
end

methods["resources/templates/list"] = function()
  return { resourceTemplates = {} }
end

methods["resources/read"] = function(params)
  local contents, why = resources.read(type(params) == "table" and params.uri)
  if not contents then return nil, { code = protocol.ERRORS.invalid_params, message = why } end
  return { contents = contents }
end

local function error_answer(id, code, message, data)
  return { jsonrpc = "2.0", id = id, error = { code = code, message = message, data = data } }
end

--- The answer to one message (a decoded table), or nil for a notification.
-- @tparam[opt] function notify sends a notification (a table) to the client
--   while the request runs (progress of a call that waits)
-- @tparam[opt] table conn the connection's state (`M.serve` keeps one per
--   process): the revision `initialize` chose
function M.handle(msg, notify, conn)
  conn = conn or {}
  if type(msg) ~= "table" or msg.jsonrpc ~= "2.0" or type(msg.method) ~= "string" then
    return error_answer(type(msg) == "table" and msg.id or native.null, protocol.ERRORS.invalid_request,
      "not a JSON-RPC 2.0 request")
  end
  if msg.id == nil then return nil end -- a notification (notifications/initialized, ...)
  local revision, err = protocol.revision_of(msg.params, conn.revision)
  if not revision then return error_answer(msg.id, err.code, err.message, err.data) end
  if not protocol.has(msg.method, revision) then
    return error_answer(msg.id, protocol.ERRORS.method_not_found,
      string.format("method not found in protocol revision %s: %s", revision.version, msg.method))
  end
  local result
  result, err = methods[msg.method](msg.params, notify, conn)
  if err then return error_answer(msg.id, err.code, err.message, err.data) end
  return { jsonrpc = "2.0", id = msg.id, result = protocol.shape(result, msg.method, revision, SERVER_INFO) }
end

--- The longest request line the server reads, in bytes: the control
-- channel's bound. A longer line is answered with an error and dropped.
M.MAX_LINE = (native.raw.controlLimits or {}).requestLine or 65536

--- Serves stdin until it closes; returns the exit code.
function M.serve(output)
  output = output or io.stdout
  io.stderr:write("tecs-profile mcp: serving MCP on stdin/stdout\n")
  local function send_message(message)
    output:write(native.json(message), "\n")
    output:flush()
  end
  local conn = {}
  local input = native.raw.stdinLines(M.MAX_LINE)
  while true do
    local line, long = input:next()
    if line == nil then break end
    local answer
    if line == false then
      answer = error_answer(native.null, protocol.ERRORS.invalid_request, string.format("request line longer than "
        .. "%d bytes (%d read): not read", M.MAX_LINE, long))
    elseif line:find("%S") then
      local msg, err = native.jsonDecode(line)
      if err then
        answer = error_answer(native.null, protocol.ERRORS.parse, "parse error: " .. err)
      else
        answer = M.handle(msg, send_message, conn)
      end
    end
    if answer then send_message(answer) end
  end
  return 0
end

return M
