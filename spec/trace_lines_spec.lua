-- The lines each completed trace covers: the tracker's `traces` and `lines`,
-- and the `traces` column of the annotated source. Each workload runs in a
-- fresh LuaJIT, whose traces are only the workload's own (no flush, no
-- runner code), so trace numbers are not reused.
local t = require("spec.support.trace")

local FIXTURE = "spec/fixtures/trace_lines.lua"

-- The fixture's line numbers by the comment that marks them.
local function marked_lines()
  local at, n = {}, 0
  for line in io.lines(FIXTURE) do
    n = n + 1
    local mark = line:match("%-%- (%a+ ?%a* ?%a*)$")
    if mark then at[mark] = n end
    if line:find("^local function cold") then at["cold header"] = n end
  end
  return at
end

-- Runs `body` (Lua source, with `profile`, `FIXTURE` and `rep` for the
-- session's report in scope after `RUN`) in a fresh LuaJIT and returns what
-- it printed, parsed: `T number|start|link|lines|partial`, `L line|list`
-- (the fixture's lines), `C trace=lines listing it` (in any file),
-- `K key=value` and the rest as `text`.
local function run(body)
  local script = [[
    local profile = require("tecs.profile")
    local FIXTURE = "]] .. FIXTURE .. [["
    local function dump(rep)
      for _, x in ipairs(rep.traces) do
        print(string.format("T %d|%s|%s|%d|%s", x.number, x.start, tostring(x.link), x.lines, tostring(x.partial)))
      end
      for line, list in pairs(rep.lines[FIXTURE] or {}) do
        print(string.format("L %d|%s", line, table.concat(list, ",")))
      end
      for _, k in ipairs({ "tracesStarted", "tracesCompleted", "tracesAborted", "tracesUnmapped" }) do
        print(string.format("K %s=%d", k, rep[k]))
      end
      local pairs_kept, per_trace = 0, {}
      for _, by_line in pairs(rep.lines) do
        for _, list in pairs(by_line) do
          pairs_kept = pairs_kept + #list
          for _, n in ipairs(list) do per_trace[n] = (per_trace[n] or 0) + 1 end
        end
      end
      print(string.format("K pairs=%d", pairs_kept))
      for n, count in pairs(per_trace) do print(string.format("C %d=%d", n, count)) end
    end
  ]] .. body
  local out = t.run_script(script, true)
  local r = { traces = {}, by_number = {}, lines = {}, k = {}, listed = {}, text = {}, out = out }
  for line in out:gmatch("[^\n]*") do
    local kind, rest = line:match("^([TLKC]) (.*)$")
    if kind == "T" then
      local num, start, link, n, partial = rest:match("^(%d+)|(.*)|(.*)|(%d+)|(.*)$")
      local x = { number = tonumber(num), start = start, link = link, lines = tonumber(n), partial = partial == "true" }
      r.traces[#r.traces + 1] = x
      r.by_number[x.number] = x
    elseif kind == "L" then
      local l, list = rest:match("^(%d+)|(.*)$")
      local nums = {}
      for n in list:gmatch("%d+") do nums[#nums + 1] = tonumber(n) end
      r.lines[tonumber(l)] = nums
    elseif kind == "C" then
      local n, count = rest:match("^(%d+)=(%d+)$")
      r.listed[tonumber(n)] = tonumber(count)
    elseif kind == "K" then
      local k, v = rest:match("^(%w+)=(%d+)$")
      r.k[k] = tonumber(v)
    else
      r.text[#r.text + 1] = line
    end
  end
  r.text = table.concat(r.text, "\n")
  return r
end

local TRACED = [[
  local tr = profile.trace()
  dofile(FIXTURE)
  local rep = tr:stop()
  dump(rep)
]]

local function contains(list, x)
  for _, v in ipairs(list or {}) do if v == x then return true end end
  return false
end

local function common(a, b)
  for _, x in ipairs(a or {}) do if contains(b, x) then return x end end
end

describe("lines per trace", function()
  local at = marked_lines()

  it("lists a compiled loop's lines under its trace, and none of a jit.off function", function()
    local r = run(TRACED)
    local body_a = r.lines[at["loop A body"]]
    assert.is_table(body_a, r.out)
    -- Every trace number listed is one of the listed traces.
    for line, list in pairs(r.lines) do
      for _, n in ipairs(list) do assert.is_table(r.by_number[n], "line " .. line .. ": " .. r.out) end
    end
    -- The loop's own trace starts at its `for` line (LuaJIT's loop bytecode).
    local own
    for _, n in ipairs(body_a) do
      if r.by_number[n].start == FIXTURE .. ":" .. at["loop A"] then own = r.by_number[n] end
    end
    assert.is_table(own, r.out)
    assert.is_true(contains(r.lines[at["loop A"]], own.number), r.out)
    -- `cold` never ran compiled: neither its header nor its body is listed.
    assert.is_nil(r.lines[at["cold header"]], r.out)
    assert.is_nil(r.lines[at["cold body"]], r.out)
    -- Each trace's line count is the number of lines (in any file) that
    -- list it.
    for _, x in ipairs(r.traces) do
      assert.equal(x.lines, r.listed[x.number] or 0, r.out)
      assert.is_false(x.partial)
    end
    assert.equal(r.k.tracesCompleted, #r.traces)
    assert.equal(0, r.k.tracesUnmapped)
  end)

  it("lists both traces on a line inlined into two loops", function()
    local r = run(TRACED)
    local step = r.lines[at["step body"]]
    local in_a = common(step, r.lines[at["loop A body"]])
    local in_b = common(step, r.lines[at["loop B body"]])
    assert.is_number(in_a, r.out)
    assert.is_number(in_b, r.out)
    assert.are_not.equal(in_a, in_b, r.out)
  end)

  it("shows the traces in the annotated source's traces column", function()
    local r = run(TRACED .. [[
      local collapsed = string.format("%s:%d 3\n%s:%d 1\n", FIXTURE, ]] .. at["loop A body"] .. [[, FIXTURE, ]]
        .. at["cold body"] .. [[)
      io.write(profile.report(collapsed, { annotate = "full", trace = rep }))
    ]])
    local text = r.text
    assert.matches("# traces column: the completed traces that cover a line", text, 1, true)
    assert.matches("   self   total   jit     traces |  line | source\n", text, 1, true)
    local function row(n)
      return text:match("\n([^\n]-|%s+" .. n .. " | [^\n]*)")
    end
    local body_a = row(at["loop A body"])
    -- The last column before `| line |`, 10 wide.
    local cell = body_a:match("^(.-) |"):sub(-10):match("^%s*(.-)$")
    -- The first listed trace numbers, then how many more.
    local list = r.lines[at["loop A body"]]
    local want = {}
    for i = 1, math.min(2, #list) do want[i] = "T" .. list[i] end
    if #list > 2 then want[#want + 1] = "+" .. (#list - 2) end
    assert.equal(table.concat(want, " "), cell)
    -- Under the file, the traces that start in it: loop A's own among them.
    local own
    for _, n in ipairs(list) do
      if r.by_number[n].start == FIXTURE .. ":" .. at["loop A"] then own = n end
    end
    assert.is_number(own, r.out)
    local legend = text:match("\n# traces starting here: ([^\n]*)")
    assert.is_string(legend, text)
    assert.is_truthy((", " .. legend .. ","):find(", T" .. own .. " line " .. at["loop A"] .. " loop,", 1, true), legend)
    -- The jit.off function's body ran only interpreted: the column is blank.
    local body_cold = row(at["cold body"])
    assert.is_nil(body_cold:match("T%d"), body_cold)
    assert.matches("^%s+%S+%s+%S+%s+%S+%s+|", body_cold)
    -- Without the report's lines (a report read back from CSV), no column.
    local plain = run(TRACED .. [[
      rep.lines = nil
      io.write(profile.report("]] .. FIXTURE .. ":" .. at["loop A body"] .. [[ 1\n", { annotate = "full", trace = rep }))
    ]]).text
    assert.is_nil(plain:find("traces |", 1, true), plain)
    assert.is_nil(plain:find("# traces column", 1, true), plain)
  end)

  it("bounds the memory it keeps and counts what it leaves out", function()
    local r = run([[
      local lines = require("tecs.profile.trace.lines")
      lines.MAX_TRACES = 1
    ]] .. TRACED)
    assert.equal(1, #r.traces, r.out)
    assert.is_true(r.k.tracesCompleted >= 2, r.out)
    assert.equal(r.k.tracesCompleted - 1, r.k.tracesUnmapped, r.out)
    r = run([[
      local lines = require("tecs.profile.trace.lines")
      lines.MAX_LINE_TRACES = 3
    ]] .. TRACED)
    assert.equal(3, r.k.pairs, r.out)
    assert.equal(r.k.tracesCompleted, #r.traces, r.out)
    local partial = 0
    for _, x in ipairs(r.traces) do if x.partial then partial = partial + 1 end end
    assert.is_true(partial >= 1, r.out)
    assert.equal(partial, r.k.tracesUnmapped, r.out)
  end)

  it("lists no trace recorded while paused", function()
    local r = run([[
      local tr = profile.trace()
      tr:pause()
      dofile(FIXTURE)
      tr:resume()
      dump(tr:stop())
    ]])
    -- (The tracker's own code can be traced between resume and stop.)
    for _, x in ipairs(r.traces) do
      assert.is_nil(x.start:find(FIXTURE, 1, true), r.out)
    end
    assert.is_nil(next(r.lines), r.out)
    assert.equal(#r.traces, r.k.tracesCompleted, r.out)
  end)

  it("keeps a record handler attached before it working, and puts it back", function()
    local r = run([[
      local seen = 0
      local function mine() seen = seen + 1 end
      jit.attach(mine, "record")
      local tr = profile.trace()
      dofile(FIXTURE)
      local rep = tr:stop()
      local during = seen
      local x = 0
      for i = 1, 1000 do x = x + i end -- a new loop to record
      print(string.format("K during=%d", during))
      print(string.format("K after=%d", seen - during))
      print(string.format("K listed=%d", #rep.traces))
    ]])
    assert.is_true(r.k.listed >= 1, r.out)
    assert.is_true(r.k.during > 0, r.out)
    assert.is_true(r.k.after > 0, r.out)
  end)
end)
