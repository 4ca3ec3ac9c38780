--- Which source lines each completed trace covers.
--
-- LuaJIT's "record" event reports every bytecode the recorder takes in:
-- (trace number, function, bytecode position, frame depth). While a trace
-- is recorded, the (function, position) pairs are only appended to two
-- arrays, which costs nothing but at recording time and allocates nothing
-- once the arrays have grown. When the trace completes, the pairs are
-- turned into source lines (`jit.util.funcinfo`) and kept under the trace's
-- number; an aborted recording, or one cut short by a flush, is dropped.
-- Traces flushed later keep their lines: they did run.
--
-- Memory is bounded: past `MAX_TRACES` listed traces, `MAX_LINE_TRACES`
-- (line, trace) pairs or `MAX_PENDING` recorded bytecodes in one trace, a
-- trace is listed without (all of) its lines and counted as unmapped.
-- @module tecs.profile.trace.lines

local jutil_ok, jutil = pcall(require, "jit.util")
if not jutil_ok then jutil = nil end

local M = {}

--- Traces listed at most.
M.MAX_TRACES = 20000
--- (line, trace) pairs kept at most.
M.MAX_LINE_TRACES = 200000
--- Bytecodes kept for one trace being recorded.
M.MAX_PENDING = 65536

-- The chunk name of `func` as abort locations and frames name files: the
-- whole name without its leading '@' or '=', or Lua's short form for chunks
-- loaded from strings.
local function chunk_name(func, source)
  local first = source:sub(1, 1)
  if first == "@" or first == "=" then return source:sub(2) end
  local ok, info = pcall(debug.getinfo, func, "S")
  return ok and info and info.short_src or "?"
end

local WEAK_KEYS = { __mode = "k" }

--- A new line map.
-- The record handler (`tecs.profile.trace.tracker`) appends each recorded
-- bytecode itself, as `funcs[n], pcs[n]` after incrementing `n` (the
-- position is negative for a builtin), up to `MAX_PENDING`; past it, it
-- sets `truncated`.
-- @treturn table the map: pass it to the functions below
function M.new()
  return {
    funcs = {}, pcs = {}, n = 0, -- the trace being recorded
    truncated = false,
    traces = {}, -- listed traces, in completion order
    by_file = {}, -- by_file[file][line][traceno] = true
    pairs_kept = 0,
    unmapped = 0,
    -- Per function: its chunk name, and the line of each position seen.
    file_of = setmetatable({}, WEAK_KEYS),
    line_at = setmetatable({}, WEAK_KEYS),
  }
end

-- Forget the recorded bytecodes (and the references to their functions).
local function clear(map)
  local funcs = map.funcs
  for i = 1, map.n do funcs[i] = nil end
  map.n, map.truncated = 0, false
end

--- Drop the trace being recorded (aborted, or cut short by a flush).
-- @tparam table map
function M.drop(map)
  clear(map)
end

-- The lines covered by the recorded bytecodes: { [file] = { [line] = true } }.
-- A function's lines are looked up once per bytecode position and kept
-- while the function lives (a function is recorded into many traces, and a
-- loop's body more than once into one).
local function covered_lines(map)
  local funcinfo = jutil.funcinfo
  local funcs, pcs = map.funcs, map.pcs
  local file_of, line_at = map.file_of, map.line_at
  local out = {}
  for i = 1, map.n do
    local func, pc = funcs[i], pcs[i]
    if pc >= 0 then
      local at = line_at[func]
      if not at then at = {}; line_at[func] = at end
      local line = at[pc]
      if line == nil then
        local fi = funcinfo(func, pc)
        line = fi.currentline
        if type(fi.source) ~= "string" or type(line) ~= "number" then line = false end
        at[pc] = line
        if line and not file_of[func] then file_of[func] = chunk_name(func, fi.source) end
      end
      if line then
        local file = file_of[func]
        local set = out[file]
        if not set then set = {}; out[file] = set end
        set[line] = true
      end
    end
  end
  return out
end

--- Keep the lines of a completed trace.
-- @tparam table map
-- @tparam table entry the trace's listing (`number`, `start`, ...); gets
--   `lines` (how many lines kept) and `partial` when some were not kept
function M.commit(map, entry)
  if #map.traces >= M.MAX_TRACES then
    map.unmapped = map.unmapped + 1
    clear(map)
    return
  end
  local partial = map.truncated
  local covered = covered_lines(map)
  clear(map)
  local tr, kept = entry.number, 0
  for file, set in pairs(covered) do
    local lines = map.by_file[file]
    if not lines then lines = {}; map.by_file[file] = lines end
    for line in pairs(set) do
      local at = lines[line]
      if not at then at = {}; lines[line] = at end
      if at[tr] then
        kept = kept + 1
      elseif map.pairs_kept < M.MAX_LINE_TRACES then
        at[tr] = true
        map.pairs_kept = map.pairs_kept + 1
        kept = kept + 1
      else
        partial = true
      end
    end
  end
  entry.lines = kept
  if partial then
    entry.partial = true
    map.unmapped = map.unmapped + 1
  end
  map.traces[#map.traces + 1] = entry
end

--- A copy of the map for a report.
-- @tparam table map
-- @treturn table traces: the listed traces, in completion order (copies)
-- @treturn table lines: `{ [file] = { [line] = { trace numbers, ascending } } }`
-- @treturn number traces completed but not listed, or listed without all their lines
function M.snapshot(map)
  local traces = {}
  for i, e in ipairs(map.traces) do
    local c = {}
    for k, v in pairs(e) do c[k] = v end
    traces[i] = c
  end
  local lines = {}
  for file, by_line in pairs(map.by_file) do
    local copy = {}
    for line, set in pairs(by_line) do
      local list = {}
      for tr in pairs(set) do list[#list + 1] = tr end
      table.sort(list)
      copy[line] = list
    end
    lines[file] = copy
  end
  return traces, lines, map.unmapped
end

return M
