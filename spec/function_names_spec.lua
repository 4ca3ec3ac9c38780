-- One name per function in every file a session writes: the formats with
-- room for a function's name (speedscope, both orders; the Firefox
-- Profiler's functions; Chrome trace ranges) name a Lua frame by the
-- function the by-function report names, and keep the line it sampled
-- where the format has a place for lines.
local json = require("tecs.profile.native").jsonDecode
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local run = require("spec.support.run")

local LIB = "local M = {}\nfunction M.crunch(n)\n  local s = 0\n" ..
  "  for i = 1, n do s = (s + i * 7) % 1000003 end\n  return s\nend\nreturn M\n"
local FIRST, LAST = 2, 6 -- the lines of M.crunch in LIB

local function read_json(path)
  return json(assert(run.read(path), "not written: " .. path))
end

describe("function names in the written formats", function()
  local dir, label, file
  setup(function()
    dir = run.tmpdir()
    file = dir .. "/crunchlib.lua"
    run.write(file, LIB)
    local lib = assert(loadfile(file))()
    local s = profile.sample({ intervalMs = 0.5 })
    while s:stats().recordedSamples < 200 do lib.crunch(1e5) end
    s:stop()
    for _, ending in ipairs({ ".speedscope.json", ".timeline.speedscope.json", ".firefox.json", ".trace.json" }) do
      assert(s:write(dir .. "/run" .. ending))
    end
    -- The name the report gives the function.
    label = profile.report(s, { minPercent = 0 }):match("(M%.crunch %b())")
    assert.is_string(label, "the report names no M.crunch")
    assert.matches(":" .. FIRST .. "%)$", label)
  end)
  teardown(function()
    sessions.stop_all()
    os.execute("rm -rf " .. run.quote(dir))
  end)

  -- Frames of speedscope's shared list named after the function, and the
  -- lines they stand at.
  local function speedscope_lines(path)
    local lines = {}
    for _, f in ipairs(read_json(path).shared.frames) do
      local name = f.name:gsub("_%[%u%]$", "")
      assert.is_nil(name:match("^" .. file:gsub("%p", "%%%0") .. ":%d"), "a frame named by its line: " .. f.name)
      if name == label then
        assert.equal(file, f.file)
        lines[#lines + 1] = f.line
      end
    end
    return lines
  end

  it("speedscope frames carry the function's name, the file and the line sampled", function()
    for _, ending in ipairs({ ".speedscope.json", ".timeline.speedscope.json" }) do
      local lines = speedscope_lines(dir .. "/run" .. ending)
      assert.is_true(#lines > 0, ending .. ": no frame named " .. label)
      for _, line in ipairs(lines) do
        assert.is_true(line >= FIRST and line <= LAST, ending .. ": line " .. line .. " outside M.crunch")
      end
    end
  end)

  it("the Firefox Profiler's function table names it once, at its first line", function()
    local thread = read_json(dir .. "/run.firefox.json").threads[1]
    local strings = thread.stringArray
    local found = 0
    for i = 1, thread.funcTable.length do
      local name = strings[thread.funcTable.name[i] + 1]
      assert.is_nil(name:match("^" .. file:gsub("%p", "%%%0") .. ":%d"), "a function named by its line: " .. name)
      if name == label then
        found = found + 1
        assert.equal(FIRST, thread.funcTable.lineNumber[i])
      end
    end
    assert.equal(1, found)
    -- Its frames keep the lines sampled.
    for i = 1, thread.frameTable.length do
      local func = thread.frameTable.func[i] + 1
      if strings[thread.funcTable.name[func] + 1] == label then
        local line = thread.frameTable.line[i]
        assert.is_true(line >= FIRST and line <= LAST, "frame line " .. tostring(line))
      end
    end
  end)

  it("Chrome trace ranges are named by function", function()
    local doc = read_json(dir .. "/run.trace.json")
    local named = 0
    for _, e in ipairs(doc.traceEvents) do
      if e.ph == "X" and e.cat == "lua" then
        assert.is_nil(e.name:match("^" .. file:gsub("%p", "%%%0") .. ":%d"), "a range named by its line: " .. e.name)
        if e.name == label then named = named + 1 end
      end
    end
    assert.is_true(named > 0, "no range named " .. label)
  end)
end)
