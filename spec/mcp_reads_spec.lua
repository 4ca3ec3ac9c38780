-- What a client of `tecs-profile mcp` may have read, and what it may hold
-- up: hostile files planted where the server reads profiles (NUL bytes,
-- links, FIFOs, devices, hard links, another user's files) and a request
-- line of any length. Every read is refused with its reason, and the
-- server goes on answering.
local native = require("tecs.profile.native")
local mcp = require("spec.support.mcp")
local run = require("spec.support.run")

local q = run.quote
local META = mcp.STATELESS_META

describe("tecs-profile mcp reads", function()
  local place, dir
  before_each(function()
    place = mcp.place()
    dir = place.dir
    place.spawn()
  end)
  after_each(function() place.close() end)

  -- One run of the server given `lines` (strings) on stdin, under a time
  -- limit that a hang would hit; its answers decoded, by id.
  local function serve(lines, limit)
    run.write(dir .. "/in.jsonl", table.concat(lines, "\n") .. "\n")
    local rc, out, err = run.run3(string.format("%sTECS_PROFILE_DIR=%s timeout 60 %s mcp < %s", limit or "",
      q(place.ctl), run.cli, q(dir .. "/in.jsonl")))
    assert.equal(0, rc, "the server did not end by itself (a hang, or killed): " .. err)
    local by_id, all = {}, {}
    for line in out:gmatch("[^\n]+") do
      local v = assert(native.jsonDecode(line))
      all[#all + 1] = v
      if v.id ~= nil and v.id ~= native.null then by_id[v.id] = v end
    end
    return by_id, all, err
  end

  local function read(id, uri)
    return native.json({ jsonrpc = "2.0", id = id, method = "resources/read", params = { _meta = META, uri = uri } })
  end
  local function ping(id) return native.json({ jsonrpc = "2.0", id = id, method = "ping" }) end

  it("refuses a URI with a NUL byte before anything is looked up", function()
    run.write(dir .. "/secrets.env", "TOKEN=hunter2\n")
    local a = serve({
      read(1, "file://" .. dir .. "/secrets.env%00.collapsed"),
      read(2, "file://" .. place.ctl .. "/" .. place.child.pid .. ".json%00.collapsed"),
      ping(3),
    })
    for id = 1, 2 do
      assert.is_nil(a[id].result, native.json(a[id]))
      assert.matches("a URI with a NUL byte", a[id].error.message, 1, true)
    end
    assert.is_table(a[3].result)
  end)

  it("follows no link, reads no FIFO, device or hard link, and goes on answering", function()
    run.write(dir .. "/secret.txt", "not a profile\n")
    assert.equal(0, os.execute(table.concat({
      "cd " .. q(dir),
      "ln -s secret.txt leak.collapsed",
      "ln -s /proc/self/environ environ.collapsed",
      "ln -s /dev/zero zero.collapsed",
      "ln secret.txt hard.collapsed",
      "mkfifo hang.svg",
      "mknod null.svg c 1 3",
      "mkdir dir.collapsed",
    }, " && ")))
    local a = serve({
      read(1, "file://" .. dir .. "/leak.collapsed"),
      read(2, "file://" .. dir .. "/environ.collapsed"),
      read(3, "file://" .. dir .. "/zero.collapsed"),
      read(4, "file://" .. dir .. "/hard.collapsed"),
      read(5, "file://" .. dir .. "/hang.svg"),
      read(6, "file://" .. dir .. "/null.svg"),
      read(7, "file://" .. dir .. "/dir.collapsed"),
      ping(8),
    })
    local why = { "symbolic link", "symbolic link", "symbolic link", "hard link", "not a regular file",
      "not a regular file", "not a regular file" }
    for id, reason in ipairs(why) do
      assert.is_nil(a[id].result, native.json(a[id]))
      assert.matches(reason, a[id].error.message, 1, true)
    end
    assert.is_table(a[8].result, "the server answers after them")
  end)

  it("reads no file of another user in a directory others may write in", function()
    local rc, me = run.run3("id -u")
    if tonumber(me) ~= 0 or os.execute("command -v setpriv >/dev/null") ~= 0 then
      pending("needs root and setpriv to plant files as a second user")
      return
    end
    assert.equal(0, rc)
    -- A root program's shared outputDir, where `nobody` plants a profile
    -- of its own and a link to a file only root may read.
    run.write(dir .. "/root-only", "root's secret\n")
    assert.equal(0, os.execute("chmod 0600 " .. q(dir .. "/root-only") .. " && chmod 0777 " .. q(dir)))
    local planted = os.execute(string.format("setpriv --reuid=65534 --regid=65534 --clear-groups sh -c %s",
      q("cd " .. q(dir) .. " && printf 'main;x 1\\n' > theirs.collapsed && ln -s root-only link.collapsed")))
    assert.equal(0, planted)
    local a = serve({
      read(1, "file://" .. dir .. "/theirs.collapsed"),
      read(2, "file://" .. dir .. "/link.collapsed"),
      ping(3),
    })
    assert.matches("owned by user 65534, not by this user (0)", a[1].error.message, 1, true)
    assert.matches("symbolic link", a[2].error.message, 1, true)
    assert.is_table(a[3].result)
  end)

  it("reads a request line of any length in bounded memory, answering it with an error", function()
    local limit = native.raw.controlLimits.requestLine
    -- 100 MB without a newline, then a request: in 150 MB of address space
    -- a server that kept the line could not hold it.
    assert.equal(0, os.execute(string.format("head -c 100000000 /dev/zero | tr '\\0' x > %s && printf '\\n%%s\\n' %s "
      .. ">> %s", q(dir .. "/long"), q(ping(7)), q(dir .. "/long"))))
    local rc, out, err = run.run3(string.format("ulimit -v 150000; TECS_PROFILE_DIR=%s timeout 120 %s mcp < %s",
      q(place.ctl), run.cli, q(dir .. "/long")))
    assert.equal(0, rc, err)
    local answers = {}
    for line in out:gmatch("[^\n]+") do answers[#answers + 1] = assert(native.jsonDecode(line)) end
    assert.equal(2, #answers, out)
    assert.equal(-32600, answers[1].error.code)
    assert.matches(string.format("request line longer than %d bytes", limit), answers[1].error.message, 1, true)
    assert.equal(7, answers[2].id)
    assert.is_table(answers[2].result)
  end)
end)
