-- The views agree with `luajit -jp` on the same workload: both profile
-- spec/fixtures/jp_workload.lua (6:3:1 work in heavy/medium/light, zones,
-- one function kept interpreted) in separate processes, and the shares of
-- every key above 5% must match within sampling error (4.5 standard errors
-- of the difference of two proportions, plus the allowance for -jp's
-- rounding: spec/support/sampling.lua). -jp's own timer gives about 250
-- samples a second here, and one process's shares can stray well past its
-- sampling error (its timer can fall in step with the workload's loop: the
-- interpreted function got 3.8% of one run's 501 samples, 8-13% in
-- others), so its counts are pooled over JP_RUNS processes or more. 19
-- shares are compared in each LuaJIT's run of this file, 57 in `make
-- test`; at 4.5 standard errors the chance that any of them fails by
-- sampling error alone is under 1 in 2,500 per `make test`.
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")
local profile = require("tecs.profile")

local WORKLOAD = "spec/fixtures/jp_workload.lua"
local SECONDS = 2
-- -jp's counts are pooled over at least this many processes, and over more
-- until they reach JP_SAMPLES (its timer is the kernel's tick: 100 to 1000
-- a second), at most JP_MAX_RUNS.
local JP_RUNS, JP_SAMPLES, JP_MAX_RUNS = 3, 750, 12
-- Ours runs until about OUR_SAMPLES at the least rate of its clock here.
local OUR_SAMPLES = 1500

-- Runs the workload under `luajit -jp=<options>` in its own process; returns
-- the text -jp wrote.
local function jp_text(options)
  local out = os.tmpname()
  local rc, text = run.run(string.format("%s -jp=%s,%s %s %s", run.luajit, options, out, WORKLOAD, SECONDS))
  assert.equal(0, rc, text)
  local report = assert(run.read(out))
  os.remove(out)
  return report
end

-- Runs `luajit -jp=<mode>` with raw counts and no threshold in JP_RUNS
-- processes or more (until JP_SAMPLES); returns the first-level counts, the
-- second-level counts and the total, summed over the runs.
local function jp(mode)
  local first, second, total, current = {}, {}, 0, nil
  local runs = 0
  while runs < JP_RUNS or (total < JP_SAMPLES and runs < JP_MAX_RUNS) do
    runs = runs + 1
    for line in jp_text(mode .. "rm0i1"):gmatch("[^\n]+") do
      local c2, k2 = line:match("^  %-%- +(%d+)  (.+)$")
      if c2 then
        second[current][k2] = (second[current][k2] or 0) + tonumber(c2)
      else
        local c, k = line:match("^ *(%d+)  (.+)$")
        assert(c, "unexpected -jp line: " .. line)
        current = k
        first[k] = (first[k] or 0) + tonumber(c)
        second[k] = second[k] or {}
        total = total + tonumber(c)
      end
    end
  end
  return first, second, total
end

-- Parses our raw report: first level `self total key`, second level `n -- key`.
local function ours(path, opts, normalise)
  opts.raw, opts.minPercent = true, 0
  local text = profile.report(path, opts)
  local first, second, total, current = {}, {}, 0, nil
  for line in text:gmatch("[^\n]+") do
    if not line:find("^#") and not line:find("^ +self +total") then
      local c2, k2 = line:match("^ +(%d+)  %-%- (.+)$")
      if c2 then
        k2 = normalise(k2)
        second[current][k2] = (second[current][k2] or 0) + tonumber(c2)
      else
        local s, _, k = line:match("^ *(%d+) +(%d+)  (.+)$")
        assert(s, "unexpected report line: " .. line)
        current = normalise(k)
        first[current] = (first[current] or 0) + tonumber(s)
        second[current] = second[current] or {}
        total = total + tonumber(s)
      end
    end
  end
  return first, second, total
end

-- Our keys in -jp's spelling: function names without their location,
-- lines with the file's base name, "(none)" for no zone.
local function normalise(k)
  k = k:gsub(" %(.-:%d+%)$", "")
  k = k:gsub("^.*/([^/]+:%d+)$", "%1")
  if k == "(no zone)" then k = "(none)" end
  return k
end

-- `max_tol` bounds the tolerance so that a test with too few samples fails
-- instead of passing vacuously (second levels hold fewer samples).
local function agree(what, a, na, b, nb, max_tol)
  max_tol = max_tol or 10
  assert.is_true(na >= 200, what .. ": too few samples of ours: " .. na)
  assert.is_true(nb >= 80, what .. ": too few samples from -jp: " .. nb)
  local keys, compared = {}, 0
  for k in pairs(a) do keys[k] = true end
  for k in pairs(b) do keys[k] = true end
  for k in pairs(keys) do
    local pa, pb = (a[k] or 0) / na, (b[k] or 0) / nb
    if pa >= 0.05 or pb >= 0.05 then
      local p = ((a[k] or 0) + (b[k] or 0)) / (na + nb)
      local tol = 100 * sampling.tolerance_two(p, na, nb, "jp_rounding")
      assert.is_true(tol < max_tol, what .. ": tolerance too loose to mean anything: " .. tol)
      local msg = string.format("%s %q: ours %.1f%% (n=%d), -jp %.1f%% (n=%d), tolerance %.1f",
        what, k, 100 * pa, na, 100 * pb, nb, tol)
      assert.is_true(math.abs(100 * (pa - pb)) <= tol, msg)
      compared = compared + 1
    end
  end
  assert.is_true(compared >= 2, what .. ": fewer than two keys above 5%")
end

describe("views agree with luajit -jp", function()
  -- Ours at the default (function) precision, and at line precision for
  -- the line views, which -jp draws from LuaJIT's line mode.
  local collapsed, by_line

  setup(function()
    collapsed, by_line = os.tmpname(), os.tmpname()
    local seconds = math.max(SECONDS, OUR_SAMPLES / sampling.least_rate(sampling.probe({})))
    local rc, out = run.run(string.format("%s run -q -o %s %s %s", run.cli, collapsed, WORKLOAD, seconds))
    assert.equal(0, rc, out)
    rc, out = run.run(string.format("%s run -q --precision line -o %s %s %s", run.cli, by_line, WORKLOAD, seconds))
    assert.equal(0, rc, out)
  end)

  teardown(function() os.remove(collapsed) os.remove(by_line) end)

  it("top functions (-jp=f)", function()
    local a, _, na = ours(collapsed, { by = "function" }, normalise)
    local b, _, nb = jp("f")
    assert.is_true(a.heavy > a.medium and a.medium > a.light, "6:3:1 order")
    agree("function", a, na, b, nb)
  end)

  it("top lines (-jp=l)", function()
    local a, _, na = ours(by_line, { by = "line" }, normalise)
    local b, _, nb = jp("l")
    agree("line", a, na, b, nb)
  end)

  it("zones by function (-jp=zf)", function()
    local a, a2, na = ours(collapsed, { mode = "zf" }, normalise)
    local b, b2, nb = jp("zf")
    agree("zone", a, na, b, nb)
    assert.is_true(a.alpha > 0 and b.alpha > 0)
    agree("zone beta by function", a2.beta, a.beta, b2.beta, b.beta, 16)
  end)

  it("annotated source (-jp=A): per-line shares", function()
    local b, nb, runs = {}, 0, 0
    -- -jp itself now and then writes no annotated lines for the workload;
    -- that says nothing about ours, so such a run is not counted and the
    -- reference is run again (3 tries more than the runs pooled).
    for _ = 1, JP_RUNS + 3 do
      local n, in_file, counts, sum = 0, false, {}, 0
      for line in jp_text("Arm0i1"):gmatch("([^\n]*)\n") do
        if line:find("^====== ") then
          in_file = line:find("jp_workload.lua", 1, true) ~= nil
          n = 0
        elseif in_file and line:find(" | ", 1, true) then
          n = n + 1
          local c = line:match("^ *(%d+) | ")
          if c then counts[WORKLOAD .. ":" .. n] = tonumber(c); sum = sum + tonumber(c) end
        end
      end
      if sum > 0 then
        for k, c in pairs(counts) do b[k] = (b[k] or 0) + c end
        nb, runs = nb + sum, runs + 1
      end
      if runs == JP_RUNS then break end
    end
    assert.equal(JP_RUNS, runs, "-jp wrote annotated lines in too few runs")
    local a, na = {}, 0
    local ann = profile.report(by_line, { annotate = "full", raw = true, minPercent = 0 })
    for c, lineno in ann:gmatch("\n *(%d+) +%d+ | +(%d+) | ") do
      a[WORKLOAD .. ":" .. lineno] = tonumber(c)
      na = na + tonumber(c)
    end
    agree("annotated line", a, na, b, nb)
  end)

  it("VM states by function (-jp=vf): the interpreted function", function()
    local a, a2, na = ours(collapsed, { mode = "vf" }, normalise)
    local b, b2, nb = jp("vf")
    agree("vmstate", a, na, b, nb)
    -- "Which time-consuming functions are only interpreted?" Both say: interp.
    assert.is_true(a2.Interpreted.interp / a.Interpreted > 0.9)
    assert.is_true(b2.Interpreted.interp / b.Interpreted > 0.9)
    assert.is_nil(a2.Compiled.interp)
  end)
end)
