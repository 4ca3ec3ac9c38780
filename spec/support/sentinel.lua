-- A tree of files a client of the control channel must not be able to
-- touch, and the paths a hostile client names to try: files outside the
-- directory the program lets clients write in, links out of it, a FIFO, a
-- link to a device, files already in it; and a digest of the whole tree
-- (every name, its type, mode and link target, every regular file's
-- SHA-256), to check byte for byte that nothing changed.
local run = require("spec.support.run")

local q = run.quote

local M = {}

--- Makes, in `dir`, `outside/` (files no client may touch) and `out/`
-- (the program's outputDir), holding links out of it, a FIFO and files
-- the channel did not write. Returns `{ out = path, outside = path }`.
function M.make(dir)
  local t = { out = dir .. "/out", outside = dir .. "/outside" }
  local script = table.concat({
    "set -e",
    "mkdir -p " .. q(t.outside .. "/nested") .. " " .. q(t.out),
    "printf 'precious\\n' > " .. q(t.outside .. "/victim.svg"),
    "printf 'precious\\n' > " .. q(t.outside .. "/victim.csv"),
    "printf 'x 1\\n' > " .. q(t.outside .. "/nested/deep.collapsed"),
    "printf 'the user s own\\n' > " .. q(t.out .. "/theirs.svg"),
    "printf 'the user s own\\n' > " .. q(t.out .. "/theirs.collapsed"),
    "printf 'the user s own\\n' > " .. q(t.out .. "/theirs.csv"),
    "printf '{}\\n' > " .. q(t.out .. "/side.collapsed.functions.json"),
    "ln -s " .. q(t.outside .. "/victim.svg") .. " " .. q(t.out .. "/link.svg"),
    "ln -s " .. q(t.outside .. "/victim.csv") .. " " .. q(t.out .. "/link.csv"),
    "ln -s " .. q(t.outside .. "/absent.collapsed") .. " " .. q(t.out .. "/dangling.collapsed"),
    "ln -s /dev/null " .. q(t.out .. "/devnull.svg"),
    "ln -s " .. q(t.outside) .. " " .. q(t.out .. "/sub"),
    "mkfifo " .. q(t.out .. "/fifo.svg"),
    "mkdir " .. q(t.out .. "/dir.collapsed"),
  }, "\n")
  local rc, out = run.run(script)
  assert(rc == 0, out)
  return t
end

--- Every name under `dir` (sockets aside: their inodes change nothing)
-- with its type, mode and link target, and the SHA-256 of every regular
-- file, one per line, sorted.
function M.digest(dir)
  local rc, out = run.run("cd " .. q(dir) .. " && { find . -mindepth 1 ! -type s -printf '%p %y %m %l\\n'; "
    .. "find . -type f -exec sha256sum {} +; } | LC_ALL=C sort")
  assert(rc == 0, out)
  return out
end

--- The paths a hostile client names for a file ending in `ending`
-- (".svg" or ".csv"), with what each tries; none may be written.
function M.paths(t, ending)
  local out, outside = t.out, t.outside
  return {
    { outside .. "/victim" .. ending, "a file outside" },
    { outside .. "/new" .. ending, "a new file outside" },
    { out .. "/../outside/victim" .. ending, ".. out of the directory" },
    { out .. "/sub/victim" .. ending, "a link to a directory outside" },
    { out .. "/sub/new" .. ending, "a new file through a link to a directory outside" },
    { out .. "/link" .. ending, "a link to a file outside" },
    { out .. "/dangling.collapsed", "a link to a file outside not there yet" },
    { out .. "/devnull.svg", "a link to a device" },
    { out .. "/fifo.svg", "a FIFO" },
    { out .. "/dir.collapsed", "a directory" },
    { out .. "/theirs" .. ending, "a file already there" },
    { out .. "/side.collapsed", "a new name whose functions file is there already" },
    { "theirs" .. ending, "a file already there, by its bare name" },
    { "/dev/null", "a device" },
    { "/proc/self/fd/1", "a process's file" },
    { out .. "/victim", "no format's ending" },
    { out .. "/profile.sh", "another ending" },
    { out .. "/profile" .. ending .. ".sh", "an ending after the format's" },
    { out .. "/", "a directory's path" },
    { out .. "/..", "the parent" },
    { "../outside/new" .. ending, "a relative path" },
    { "sub/new" .. ending, "a relative path through a link" },
    { "", "an empty path" },
    { "new\n" .. ending, "a name with a newline" },
    { "new\0" .. ending, "a name with a NUL byte" },
    { string.rep("n", 300) .. ending, "a name too long" },
    { out .. "/" .. string.rep("n", 5000) .. ending, "a path of 5000 bytes" },
    { string.rep("/", 200000) .. "x" .. ending, "a request line of 200 kB" },
  }
end

return M
