-- pprof output, read back by the real `go tool pprof` (Debian's golang-go):
-- the samples it counts, the frames and labels it shows, from a session and
-- from the command line.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")
local collapsed = require("spec.support.collapsed")
local zone = require("jit.zone")

-- A loop of its own, so its frame can be looked for by file and line.
local function spin(n)
  local s = 0
  for i = 1, n do s = (s + i * 7) % 65521 end
  return s
end
local SPIN = debug.getinfo(spin, "S")
local SPIN_FILE = SPIN.short_src

-- `go tool pprof -raw`: samples (counts, time, location ids, labels) and
-- locations (id -> function name, file, line).
local function pprof_raw(path)
  local rc, out = run.run("go tool pprof -raw " .. run.quote(path))
  assert.equal(0, rc, out)
  local raw = { samples = {}, locations = {}, text = out }
  raw.period = tonumber(out:match("\nPeriod: (%d+)"))
  raw.period_type = out:match("PeriodType: ([^\n]+)")
  local section
  for line in out:gmatch("[^\n]+") do
    if line == "Samples:" or line == "Locations" or line == "Mappings" then
      section = line
    elseif section == "Samples:" then
      local count, ns, ids = line:match("^%s+(%d+)%s+(%d+): ([%d ]+)$")
      if count then
        local ids_list = {}
        for id in ids:gmatch("%d+") do ids_list[#ids_list + 1] = tonumber(id) end
        raw.samples[#raw.samples + 1] = { count = tonumber(count), ns = tonumber(ns), ids = ids_list, labels = {} }
      else
        -- Label lines: `key:[value] key:[value]`.
        if #raw.samples > 0 then
          for key, value in line:gmatch("(%w+):%[([^%]]*)%]") do raw.samples[#raw.samples].labels[key] = value end
        end
      end
    elseif section == "Locations" then
      local id, name, file, lineno = line:match("^%s*(%d+): 0x%x+ M=%d+ (.-) (%S*):(%d+) s=%d+$")
      if id then raw.locations[tonumber(id)] = { name = name, file = file, line = tonumber(lineno) } end
    end
  end
  return raw
end

local function total(raw)
  local n = 0
  for _, s in ipairs(raw.samples) do n = n + s.count end
  return n
end

describe("pprof output", function()
  local dir
  before_each(function() dir = run.tmpdir() end)
  after_each(function()
    sessions.stop_all()
    os.execute("rm -rf " .. run.quote(dir))
  end)

  it("a session's .pb.gz file is read by go tool pprof with the same samples as its collapsed text", function()
    local s = profile.sample()
    sampling.for_cpu(0.5, function() zone("update") spin(20000) zone() end)
    s:stop()
    s:write(dir .. "/p.pb.gz")
    local rows = collapsed.parse(s:collapsed())
    local raw = pprof_raw(dir .. "/p.pb.gz")
    assert.equal(collapsed.sum(rows), total(raw))
    assert.is_true(total(raw) >= sampling.least_samples(s, 0.5), raw.text)
    assert.equal(1000000, raw.period, "1 ms in nanoseconds")
    assert.equal("cpu nanoseconds", raw.period_type)
    -- Each sample's time is its count times the period.
    for _, smp in ipairs(raw.samples) do assert.equal(smp.count * raw.period, smp.ns) end
    -- The workload's own loop is a location in its file, inside the update zone.
    local in_spin = 0
    for _, smp in ipairs(raw.samples) do
      local leaf = raw.locations[smp.ids[1]]
      assert.is_table(leaf, "sample without a known leaf location")
      assert.matches("^[NICGJ]$", smp.labels.vmstate)
      if leaf.file == SPIN_FILE and leaf.line >= SPIN.linedefined and leaf.line <= SPIN.lastlinedefined then
        in_spin = in_spin + smp.count
        assert.equal("update", smp.labels.zone)
      end
    end
    assert.is_true(in_spin > total(raw) / 2, "samples in spin: " .. in_spin .. " of " .. total(raw))
  end)

  it("go tool pprof ranks the profile (-top) and filters it by zone label (-tagfocus)", function()
    local s = profile.sample()
    sampling.for_cpu(0.4, function() zone("a") spin(20000) zone() zone("b") spin(5000) zone() end)
    s:stop(dir .. "/p.pb.gz")
    local rc, top = run.run("go tool pprof -top -sample_index=samples " .. run.quote(dir .. "/p.pb.gz"))
    assert.equal(0, rc, top)
    assert.matches("Showing nodes accounting for", top)
    local all = tonumber(top:match("Total samples = (%d+)")) or tonumber(top:match("of (%d+) total"))
    assert.is_number(all, top)
    local rc2, only_a = run.run("go tool pprof -top -sample_index=samples -tagfocus=zone=a " ..
      run.quote(dir .. "/p.pb.gz"))
    assert.equal(0, rc2, only_a)
    local a = tonumber(only_a:match("accounting for (%d+),"))
    assert.is_number(a, only_a)
    assert.is_true(a > 0 and a < all, only_a)
  end)

  it("the command line converts a collapsed file to pprof", function()
    local s = profile.sample()
    sampling.for_cpu(0.3, function() spin(20000) end)
    local text = s:stop(dir .. "/p.collapsed")
    local rc, out = run.run(run.luajit .. " bin/tecs-profile flamegraph -f pprof -o " .. run.quote(dir .. "/c.pb.gz") ..
      " " .. run.quote(dir .. "/p.collapsed"))
    assert.equal(0, rc, out)
    local raw = pprof_raw(dir .. "/c.pb.gz")
    assert.equal(collapsed.sum(collapsed.parse(text)), total(raw))
  end)
end)
