--- Line and function coverage with the JIT on.
--
--    local cov = profile.coverage({ include = { "^src/" } })
--    require("mymodule").run()
--    cov:stop("coverage.info")          -- lcov; or "luacov.stats.out"
--
-- Chunks loaded while the session runs (through `require`, `loadfile`,
-- `dofile`, `load`, `loadstring`) are rewritten with a counter increment
-- before each statement and at each function entry (see the native
-- rewriter), then loaded under their own names. No debug hook runs, so
-- LuaJIT keeps compiling traces. Line numbers, error messages and
-- `debug.getinfo` answers are those of the unmodified code. A chunk that
-- cannot be rewritten (a syntax the rewriter refuses, or a rewrite that does
-- not load: LuaJIT's 200-local and 60-upvalue limits) runs unchanged and is
-- listed in `stats().skipped`. Chunks already loaded, and chunks loaded with
-- their own environment (`load`/`loadfile` with `env`), are not counted;
-- modules already loaded from `package.path` are listed in
-- `stats().preloaded`.
-- @module tecs.profile.coverage

local native = require("tecs.profile.native")
local check = require("tecs.profile.check")
local fs = require("tecs.profile.fs")
local loaders = require("tecs.profile.coverage.loaders")
local report = require("tecs.profile.coverage.report")

local coverage = {}

-- Lua's own loadstring, as it is before any session replaces it.
local compile = loadstring

local OPTIONS = {
  include = "a Lua pattern or a list of them (names a chunk must match; default: all)",
  exclude = "a Lua pattern or a list of them (names left uncounted)",
}
--- The package's own modules are never counted.
local ALWAYS_EXCLUDED = { "tecs/profile[/%.]" }

--- A chunk's counters, zeroed: a table whose field `native.coverKey .. i`
-- is counter i. String keys live in the hash part: the JIT stores them with
-- HSTORE, which never aliases the program's array loads and stores, and the
-- interpreter increments them as fast as any table field (an FFI array is
-- cheaper compiled but costs a C call per access interpreted).
local KEYS = setmetatable({}, { __index = function(t, i)
  local k = native.coverKey .. i
  t[i] = k
  return k
end })
local function new_counters(n)
  local t = {}
  for i = 1, n do t[KEYS[i]] = 0 end
  return t
end

--- LuaJIT trace limits while counting. Every counter adds its key and
-- slot constants and a few IR instructions, so long straight-line traces
-- reach LuaJIT's defaults (maxirconst=500, maxrecord=4000) and abort where
-- the unmodified code compiled: md5 from LuaJIT's benchmarks ran 12.7x
-- slower than unmodified at the defaults, 3.3x with these. The limits are
-- raised for the session and left raised (LuaJIT cannot report the values
-- they replace; larger limits only allow longer traces).
local JIT_LIMITS = { "maxirconst=2000", "maxrecord=12000" }

local CoverageSession = {}
CoverageSession.__index = CoverageSession
--- The class of coverage sessions (`profile.report` tells them apart by it).
coverage.CoverageSession = CoverageSession
local NAME = "profile.coverage"

local running -- the one session whose loaders are installed

local function pattern_list(opts, key)
  local v = opts[key]
  if v == nil then return {} end
  if type(v) == "string" then v = { v } end
  if type(v) ~= "table" then
    check.fail(3, "%s: option '%s' must be %s (got %s)", NAME, key, OPTIONS[key], check.describe(v))
  end
  for i, p in ipairs(v) do
    if type(p) ~= "string" or not pcall(string.find, "", p) then
      check.fail(3, "%s: option '%s' entry %d must be a valid Lua pattern (got %s)", NAME, key, i, check.describe(p))
    end
  end
  return v
end

local function matches_any(name, patterns)
  for _, p in ipairs(patterns) do
    if name:find(p) then return true end
  end
  return false
end

--- The name a chunk is reported under: a file's path, or the chunk name
-- without its `=`, or the first line of an unnamed string chunk; and
-- whether it names a file.
local function display_name(chunkname)
  local first = chunkname:sub(1, 1)
  if first == "@" or first == "=" then return chunkname:sub(2), first == "@" end
  return string.format('[string "%s"]', (chunkname:match("^[^\r\n]*"))), false
end

--- Start a coverage session.
-- @param opts optional table: `include`, `exclude` (Lua patterns matched
-- against file paths and chunk names)
-- @return a CoverageSession
function coverage.start(opts)
  if opts ~= nil and type(opts) ~= "table" then
    check.fail(2, "%s: bad argument #1 'opts' (table or nil expected, got %s)", NAME, check.describe(opts))
  end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then
      local names = {}
      for n in pairs(OPTIONS) do names[#names + 1] = n end
      table.sort(names)
      check.fail(2, "%s: unknown option %s (expected one of: %s)", NAME, check.describe(k), table.concat(names, ", "))
    end
  end
  local include, exclude = pattern_list(opts, "include"), pattern_list(opts, "exclude")
  if running then
    check.fail(2, "%s: a coverage session is already running (stop it first)", NAME)
  end
  local self = setmetatable({ chunks = {}, skipped = {}, preloaded = {}, files = nil }, CoverageSession)
  local function counted(name)
    return not ((#include > 0 and not matches_any(name, include)) or matches_any(name, exclude)
      or matches_any(name, ALWAYS_EXCLUDED))
  end
  local counters = {}
  rawset(_G, native.coverGlobal, counters)
  local pending -- the chunk the last prepare() rewrote, until it loads

  local function prepare(source, chunkname)
    local name, is_file = display_name(chunkname)
    if not counted(name) then return nil end
    local id = #self.chunks + 1
    local code, info = native.coverRewrite(source, id)
    if not code then
      -- A chunk that does not compile as it is (a probe of the language,
      -- such as Penlight's `local goto = 1`) runs nowhere: nothing of it is
      -- left uncounted.
      if compile(source, chunkname) then
        self.skipped[#self.skipped + 1] = { name = name, reason = "not covered by rewriting: " .. info }
      end
      return nil
    end
    local t = new_counters(#info.lines)
    pending = { id = id, name = name, file = is_file, info = info, counters = t }
    counters[id] = t
    return code
  end

  local function loaded(_, ok, err)
    if ok then
      self.chunks[#self.chunks + 1] = pending
    else
      counters[pending.id] = nil
      self.skipped[#self.skipped + 1] = { name = pending.name,
        reason = "not covered by rewriting: the rewritten chunk does not load: " .. tostring(err) }
    end
    pending = nil
  end

  -- Modules already loaded keep running their unmodified closures, which
  -- no rewrite can reach: they are named, so that a report missing them
  -- says why.
  for modname in pairs(package.loaded) do
    local path = type(modname) == "string" and package.searchpath and package.searchpath(modname, package.path)
    if path and counted(path) then
      self.preloaded[#self.preloaded + 1] = { name = path, module = modname }
    end
  end
  table.sort(self.preloaded, function(a, b) return a.name < b.name end)

  if jit and jit.opt and jit.opt.start then jit.opt.start(unpack(JIT_LIMITS)) end
  self.restore = loaders.install(prepare, loaded)
  running = self
  return self
end

--- The running session, or nil.
function coverage.current()
  return running
end

--- Counts by chunk name: name -> { file = whether the name is a file's
-- path, lines = {[line] = count}, functions =
-- { {name=, line=, count=} } }. A line's count is that of the statement on
-- it that ran most; chunks loaded more than once under one name add up.
local function collect(chunks)
  local files = {}
  for _, chunk in ipairs(chunks) do
    local file = files[chunk.name]
    if not file then
      file = { file = chunk.file, lines = {}, functions = {}, by_key = {} }
      files[chunk.name] = file
    end
    local per_line = {}
    for i, line in ipairs(chunk.info.lines) do
      if chunk.info.statement[i] then
        local c = chunk.counters[KEYS[i]]
        if c > (per_line[line] or -1) then per_line[line] = c end
      end
    end
    for line, c in pairs(per_line) do file.lines[line] = (file.lines[line] or 0) + c end
    local seen = {}
    for _, fn in ipairs(chunk.info.functions) do
      local name = fn.name
      if seen[name] then name = name .. "@" .. fn.line end
      seen[name] = true
      local key = name .. "\0" .. fn.line
      local entry = file.by_key[key]
      if not entry then
        entry = { name = name, line = fn.line, lastline = fn.lastline, count = 0 }
        file.by_key[key] = entry
        file.functions[#file.functions + 1] = entry
      end
      entry.count = entry.count + chunk.counters[KEYS[fn.counter]]
    end
  end
  for _, file in pairs(files) do file.by_key = nil end
  return files
end

--- Counts so far (while running) or at stop, by file.
function CoverageSession:files()
  check.self(self, CoverageSession, NAME, "files", 1)
  return self.stopped_files or collect(self.chunks)
end

--- Whether the session still rewrites chunks.
function CoverageSession:isRunning()
  check.self(self, CoverageSession, NAME, "isRunning", 1)
  return self.restore ~= nil
end

--- Stop rewriting, restore the loading functions, keep the counts as they
-- are now, and write them to `filename` if given.
-- @return the lcov text
function CoverageSession:stop(filename)
  check.self(self, CoverageSession, NAME, "stop", 1)
  check.filename(NAME .. ":stop", filename, 2)
  if self.restore then
    self.restore()
    self.restore = nil
    running = nil
    if rawget(_G, native.coverGlobal) then rawset(_G, native.coverGlobal, nil) end
    self.stopped_files = collect(self.chunks)
  end
  if filename then self:write(filename) end
  return report.lcov(self:files())
end

--- Only chunks named after files go to files: genhtml and luacov read the
-- sources back.
local function file_chunks(files)
  local out = {}
  for name, file in pairs(files) do
    if file.file then out[name] = file end
  end
  return out
end

--- Write the counts to `filename` as lcov (the default) or luacov stats
-- (format "luacov", or a name ending in `.stats.out`).
function CoverageSession:write(filename, format)
  check.self(self, CoverageSession, NAME, "write", 1)
  if type(filename) ~= "string" or filename == "" then
    check.fail(2, "%s:write: bad argument #1 'filename' (non-empty string expected, got %s)", NAME,
      check.describe(filename))
  end
  format = format or report.format_for(filename)
  if not report[format] or type(report[format]) ~= "function" or format == "format_for" then
    check.fail(2, "%s:write: bad argument #2 'format' (one of %s expected, got %s)", NAME,
      table.concat(report.formats, ", "), check.describe(format))
  end
  local ok, err = fs.write_atomic(filename, report[format](file_chunks(self:files())))
  if not ok then check.fail(2, "%s:write: %s", NAME, err) end
  return self
end

--- Numbers about the session: chunks counted, lines and functions found
-- and hit, the chunks left uncounted with the reason, and the modules the
-- filters would count that were loaded before the session (`preloaded`:
-- `name` the file, `module`).
function CoverageSession:stats()
  check.self(self, CoverageSession, NAME, "stats", 1)
  local st = { chunks = #self.chunks, lines = 0, linesHit = 0, functions = 0, functionsHit = 0, skipped = {} }
  for _, file in pairs(self:files()) do
    for _, c in pairs(file.lines) do
      st.lines = st.lines + 1
      if c > 0 then st.linesHit = st.linesHit + 1 end
    end
    for _, fn in ipairs(file.functions) do
      st.functions = st.functions + 1
      if fn.count > 0 then st.functionsHit = st.functionsHit + 1 end
    end
  end
  for i, s in ipairs(self.skipped) do st.skipped[i] = { name = s.name, reason = s.reason } end
  st.preloaded = {}
  for i, p in ipairs(self.preloaded) do st.preloaded[i] = { name = p.name, module = p.module } end
  return st
end

--- Coverage of a whole busted run, for `tecs.profile.busted`'s `cover=`
-- argument: a session from now to busted's `exit` event, written to `out`.
-- @param busted the busted module
-- @param out the file to write (lcov, or luacov stats for `*.stats.out`)
-- @param opts `profile.coverage` options
-- @param session optional: the session `tecs-profile busted` started before
-- busted loaded anything (then `opts` are not used)
-- @return the session
function coverage.busted(busted, out, opts, session)
  if not session then
    local ok, started = pcall(coverage.start, opts)
    if not ok then error("tecs.profile.busted: " .. tostring(started):gsub("^.-: profile%.coverage: ", NAME .. ": "), 0) end
    session = started
  end
  busted.subscribe({ "exit" }, function()
    if session:isRunning() then
      session:stop()
      local wok, err = pcall(session.write, session, out)
      local st = session:stats()
      io.stderr:write(wok and string.format("tecs.profile.busted: coverage of %d of %d lines in %d chunks written to %s\n",
        st.linesHit, st.lines, st.chunks, out) or ("tecs.profile.busted: " .. tostring(err) .. "\n"))
      for _, s in ipairs(st.skipped) do
        io.stderr:write("tecs.profile.busted: not counted: ", s.name, ": ", s.reason, "\n")
      end
      for _, p in ipairs(st.preloaded) do
        io.stderr:write("tecs.profile.busted: not counted: ", p.name, ": loaded before the session (module ",
          p.module, "; coverPreloaded=yes under tecs-profile busted counts it)\n")
      end
    end
    return nil, true
  end)
  return { session = session, out = out }
end

return coverage
