-- Writes are atomic (temporary file, then rename) and a failed write names
-- the path and the system's reason, removes its temporary file, leaves any
-- previous file untouched and loses nothing: the text stays retrievable.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local fs = require("tecs.profile.fs")
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")

local LUAJIT = run.luajit
local read, write_plain, mktempdir = run.read, run.write, run.tmpdir

local sampling = require("spec.support.sampling")

local function list(dir)
  local names = {}
  for n in io.popen("ls -A '" .. dir .. "'"):lines() do names[#names + 1] = n end
  return names
end

-- A stopped session with a non-empty profile.
local function stopped_session()
  local s = profile.sample()
  sampling.for_cpu(0.2)
  s:stop()
  local text = s:collapsed()
  assert.is_true(#collapsed.parse(text) > 0, "the workload was sampled")
  return s, text
end

-- Asserts that writing to `path` fails with `reason`, names the path, keeps
-- the text and leaves no temporary file in `dir`.
local function assert_write_fails(path, reason, dir)
  local s = profile.sample()
  sampling.for_cpu(0.2)
  local ok, err = pcall(s.stop, s, path)
  assert.is_false(ok)
  assert.is_truthy(err:find("SampleSession:stop: cannot write '" .. path .. "': " .. reason, 1, true), err)
  assert.is_truthy(err:find("nothing is lost", 1, true), err)
  assert.is_false(s:isRunning(), "the session is stopped")
  local text = s:collapsed()
  assert.is_true(#collapsed.parse(text) > 0, "the profile is still there")
  local ok2, err2 = pcall(s.write, s, path)
  assert.is_false(ok2)
  assert.is_truthy(err2:find("SampleSession:write: cannot write '" .. path .. "': " .. reason, 1, true), err2)
  if dir then
    for _, n in ipairs(list(dir)) do assert.is_nil(n:find("%.tmp%-"), "temporary file left: " .. n) end
  end
  -- and it can be written elsewhere
  local good = os.tmpname()
  assert.equal(text, s:write(good))
  assert.equal(text, read(good))
  os.remove(good)
end

describe("writes", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("are never seen half-written by a concurrent reader", function()
    local dir = mktempdir()
    local target = dir .. "/out.collapsed"
    local a = ("a;b;c_[N] 1\n"):rep(200000)   -- 2.4 MB
    local b = ("x;y_[I] 2\n"):rep(300000)     -- 3 MB
    assert(fs.write_atomic(target, a))
    local writer = string.format(
      "%s -e \"package.path='lua/?.lua;'..package.path local fs=require('tecs.profile.fs') " ..
      "local a=('a;b;c_[N] 1\\n'):rep(200000) local b=('x;y_[I] 2\\n'):rep(300000) " ..
      "for i=1,60 do assert(fs.write_atomic('%s', i%%2==1 and b or a)) end " ..
      "io.open('%s/done','w'):close()\"", LUAJIT, target, dir)
    -- two writers at once: their temporary files must not collide either
    local proc = io.popen(writer .. " & " .. writer:gsub("/done", "/done2") .. "; wait", "r")
    local reads, saw_a, saw_b = 0, 0, 0
    while not (read(dir .. "/done") and read(dir .. "/done2")) and reads < 100000 do
      local t = read(target)
      reads = reads + 1
      if t == a then saw_a = saw_a + 1
      elseif t == b then saw_b = saw_b + 1
      else error(string.format("read %d saw a partial file (%d bytes)", reads, t and #t or -1)) end
    end
    proc:close()
    assert.is_true(reads > 5, "reads during the writes: " .. reads)
    assert.is_true(saw_b > 0, "the reader saw the writer's files (a=" .. saw_a .. ", b=" .. saw_b .. ")")
    local names = list(dir)
    table.sort(names)
    assert.same({ "done", "done2", "out.collapsed" }, names)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("go into a device in place: /dev/null stays the device", function()
    local run = require("spec.support.run")
    assert.equal(0, (run.run("test -c /dev/null")), "/dev/null is a character device to begin with")
    assert(fs.write_atomic("/dev/null", "a;b_[N] 1\n"))
    assert.equal(0, (run.run("test -c /dev/null")), "fs.write_atomic replaced /dev/null")
    local rc, out = run.run(run.cli .. " run -q -o /dev/null spec/fixtures/cli_script.lua normal 0.05")
    assert.equal(0, rc, out)
    assert.equal(0, (run.run("test -c /dev/null")), "tecs-profile run -o /dev/null replaced /dev/null")
  end)

  it("replace an existing file and return the same text", function()
    local dir = mktempdir()
    local path = dir .. "/p.collapsed"
    write_plain(path, "old\n")
    local s = profile.sample()
    sampling.for_cpu(0.2)
    local text = s:stop(path)
    assert.equal(text, read(path))
    -- No temporary file left; the functions the session named go beside it.
    local files = list(dir)
    if files[2] then assert.equal("p.collapsed.functions.json", files[2]) end
    assert.equal("p.collapsed", files[1])
    assert.is_nil(files[3])
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("fail on a missing directory", function()
    assert_write_fails("/nonexistent-tecs-dir/sub/out.collapsed", "No such file or directory")
  end)

  it("fail on a path under a regular file", function()
    local file = os.tmpname()
    assert_write_fails(file .. "/out.collapsed", "Not a directory")
    os.remove(file)
  end)

  it("fail when the target is a directory, keeping the directory", function()
    local dir = mktempdir()
    local target = dir .. "/sub"
    assert(os.execute("mkdir '" .. target .. "'") == 0)
    assert_write_fails(target, "Is a directory", dir)
    assert.same({ "sub" }, list(dir))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("fail without permission (sysfs refuses new files, even to root)", function()
    assert_write_fails("/sys/tecs-profile-test.collapsed", "Permission denied")
  end)

  it("fail on an immutable directory (chattr +i)", function()
    local dir = "build/immutable-test-dir"
    os.execute("chattr -i " .. dir .. " 2>/dev/null; rm -rf " .. dir)
    assert(os.execute("mkdir -p " .. dir) == 0)
    if os.execute("chattr +i " .. dir .. " 2>/dev/null") ~= 0 then
      os.execute("rm -rf " .. dir)
      pending("chattr +i is not supported on this file system")
      return
    end
    local ok, err = pcall(assert_write_fails, dir .. "/out.collapsed", "Operation not permitted", dir)
    os.execute("chattr -i " .. dir .. "; rm -rf " .. dir)
    assert(ok, err)
  end)

  it("fail on a full disk (file size limit), leaving the old file and no temporary", function()
    local dir = mktempdir()
    write_plain(dir .. "/profile.collapsed", "previous profile\n")
    local cmd = string.format("bash -c 'trap \"\" XFSZ; ulimit -f 1; exec %s spec/fixtures/write_full_disk.lua %s' 2>&1",
      LUAJIT, dir)
    local p = io.popen(cmd, "r")
    local out = p:read("*a")
    p:close()
    local head, text = out:match("^(.-)\n%-%-%-\n(.*)$")
    assert.is_truthy(head, out)
    assert.matches("ok=false", head)
    local path = dir .. "/profile.collapsed"
    assert.is_truthy(head:find("err=[^\n]*SampleSession:stop: cannot write '" .. path .. "': File too large"), head)
    assert.is_truthy(head:find("retry_err=[^\n]*SampleSession:write: cannot write '" .. path .. "': File too large"), head)
    assert.matches("leftovers=0", head)
    assert.matches("target=previous profile", head)
    assert.is_true(#text > 1024, "the profile is larger than the limit: " .. #text)
    assert.is_true(#collapsed.parse(text) > 10, "the profile was retrieved after the failure")
    assert.equal("previous profile\n", read(path))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
