-- profile.coverage: counts by source rewriting, checked against a line hook
-- with the JIT off, against unmodified code, and against genhtml.
local profile = require("tecs.profile")
local native = require("tecs.profile.native")
local run = require("spec.support.run")
local util = require("jit.util")

local fixtures = "spec/fixtures/"

--- Lines a line hook sees in `path` with the JIT off, and the results.
local function hooked(path)
  local f = assert(loadfile(path))
  local lines, src = {}, "@" .. path
  jit.off()
  debug.sethook(function(_, line)
    if debug.getinfo(2, "S").source == src then lines[line] = (lines[line] or 0) + 1 end
  end, "l")
  local res = { pcall(f) }
  debug.sethook()
  jit.on()
  return lines, res
end

--- Runs `path` loaded by `loader` under a coverage session.
local function covered(path, loader)
  local cov = profile.coverage({ include = "cover_" })
  local ok, f = pcall(loader or function(p) return loadfile(p) end, path)
  local res = ok and { pcall(f) } or {}
  cov:stop()
  assert(ok, f)
  return cov:files()[path], res, cov
end

local function source_lines(path)
  local lines = {}
  for l in io.lines(path) do lines[#lines + 1] = l end
  return lines
end

--- The lines the hook and the counters must agree on: every counted line
-- except `do` (no bytecode of its own) and the first line of a function
-- definition (a multi-line one's closure is created on the `end` line; a
-- one-line function's line counts its body's statements, while the hook
-- also stops there for the closure's creation).
local function comparable(path, file)
  local src, out = source_lines(path), {}
  local defs = {}
  for _, fn in ipairs(file.functions) do defs[fn.line] = true end
  for line in pairs(file.lines) do
    if not defs[line] and not src[line]:match("^%s*do%s*$") then out[#out + 1] = line end
  end
  table.sort(out)
  return out
end

describe("profile.coverage", function()
  after_each(function()
    assert.is_nil(rawget(_G, native.coverGlobal))
  end)

  it("covers exactly the lines a line hook sees with the JIT off", function()
    for _, name in ipairs({ "cover_oracle.lua", "cover_syntax.lua" }) do
      local path = fixtures .. name
      local hook = hooked(path)
      local file = covered(path)
      local lines = comparable(path, file)
      assert.is_true(#lines > 20, name)
      local hit, missed = 0, 0
      for _, line in ipairs(lines) do
        assert.are.equal(hook[line] ~= nil, file.lines[line] > 0, name .. ":" .. line)
        if file.lines[line] > 0 then hit = hit + 1 else missed = missed + 1 end
      end
      assert.is_true(hit > 0 and missed > 0, name)
      -- Every line the hook saw that holds a statement start is counted.
      for line in pairs(hook) do
        if file.lines[line] then assert.is_true(file.lines[line] > 0, name .. ":" .. line) end
      end
    end
  end)

  it("counts exactly: a loop body 1000 times, fib entered 21891 times for fib(20)", function()
    local path = fixtures .. "cover_oracle.lua"
    local file, res = covered(path)
    assert.are.same({ true, 6765, 500500, 2, 7 }, res)
    local src = source_lines(path)
    local function line_of(text)
      for i, l in ipairs(src) do if l:find(text, 1, true) then return i end end
    end
    assert.are.equal(1000, file.lines[line_of("sum = sum + i")])
    assert.are.equal(7, file.lines[line_of("i = i + 1")])
    assert.are.equal(1, file.lines[line_of("break")])
    assert.are.equal(0, file.lines[line_of('return "not run"')])
    local fns = {}
    for _, fn in ipairs(file.functions) do fns[fn.name] = fn end
    assert.are.equal(21891, fns.fib.count)
    assert.are.equal(30, fns.classify.count)
    assert.are.equal(0, fns.never.count)
    assert.are.equal(line_of("local function fib"), fns.fib.line)
    -- fib's `if n < 2` line runs on every entry; its return on 10946.
    assert.are.equal(21891, file.lines[line_of("if n < 2 then")])
    assert.are.equal(10946, file.lines[line_of("return n")])
  end)

  it("keeps results, error messages, debug.getinfo and tracebacks of unmodified code", function()
    local path = fixtures .. "cover_syntax.lua"
    local _, plain = hooked(path)
    for _, loader in ipairs({ function(p) return loadfile(p) end, function(p) return loadstring(io.open(p):read("*a"), "@" .. p) end,
      function(p) return load(io.lines(p, 64), "@" .. p) end }) do
      local file, res, cov = covered(path, loader)
      assert.is_truthy(file, "the fixture was not rewritten")
      assert.are.equal(1, cov:stats().chunks)
      assert.is_true(plain[1] and res[1])
      assert.are.equal(plain[2], res[2])
      assert.is_truthy(res[2]:find("cover_syntax.lua:%d+: attempt to index local 'x'"))
    end
  end)

  it("keeps every function's linedefined and lastlinedefined", function()
    local function shape(f)
      local out = {}
      local function walk(fn)
        local info = util.funcinfo(fn)
        out[#out + 1] = info.linedefined .. "-" .. info.lastlinedefined
        local i = -1
        while true do
          local k = util.funck(fn, i)
          if k == nil then break end
          if type(k) == "proto" then walk(k) end
          i = i - 1
        end
      end
      walk(f)
      return table.concat(out, " ")
    end
    for _, name in ipairs({ "cover_syntax.lua", "cover_oracle.lua" }) do
      local src = io.open(fixtures .. name):read("*a")
      local code = native.coverRewrite(src, 1)
      assert.are_not.equal(src, code)
      assert.are.equal(shape(loadstring(src, name)), shape(loadstring(code, name)))
    end
  end)

  it("rewrites string chunks with a shebang or a byte order mark, named by their chunk name", function()
    local cov = profile.coverage()
    local f = loadstring("#!/bin/luajit\nlocal x = 1\nreturn x + 1\n", "=shebang")
    local g = loadstring("\239\187\191local y = 2\nreturn y\n", "=bom")
    assert.are.equal(2, f()); assert.are.equal(2, g())
    cov:stop()
    local files = cov:files()
    assert.are.same({ [2] = 1, [3] = 1 }, files.shebang.lines)
    assert.are.same({ [1] = 1, [2] = 1 }, files.bom.lines)
  end)

  it("runs chunks it cannot rewrite unchanged and reports them", function()
    local cov = profile.coverage()
    -- 200 locals is LuaJIT's limit: the counters' local makes 201.
    local names = {}
    for i = 1, 200 do names[i] = "v" .. i end
    local full = "local " .. table.concat(names, ", ") .. " = 1\nreturn v1\n"
    local f = loadstring(full, "=full")
    local bad, bad_err = loadstring("x = = 1", "=bad")
    cov:stop()
    assert.are.equal(1, f())
    local plain_bad, plain_err = loadstring("x = = 1", "=bad")
    assert.is_nil(bad); assert.is_nil(plain_bad)
    assert.are.equal(plain_err, bad_err)
    local st = cov:stats()
    assert.are.equal(0, st.chunks)
    -- The chunk that does not compile as it is ran nowhere: it is not listed.
    assert.are.equal(1, #st.skipped)
    assert.are.equal("full", st.skipped[1].name)
    assert.is_truthy(st.skipped[1].reason:find("does not load", 1, true))
  end)

  it("keeps what load, loadstring and dofile return and raise", function()
    local function outcomes()
      local out = {}
      local function show(v) return type(v) == "function" and "function" or tostring(v) end
      local function add(...) out[#out + 1] = table.concat({ tostring(select("#", ...)), show((...)),
        show((select(2, ...))) }, "|") end
      add(pcall(load, function() error("reader failed") end))
      local n = 0
      add(load(function() n = n + 1; if n == 1 then return "return 7, ..." end end, "=reader"))
      add(loadstring("return 1 +", "=broken"))
      add(loadstring("return ...", "=va"))
      add(pcall(dofile, "/nonexistent/cover_missing.lua"))
      add(load("return 2", "=mode", "t"))
      add(load("return 3", "=binary only", "b"))
      return table.concat(out, "\n")
    end
    local plain = outcomes()
    local cov = profile.coverage()
    local covered = outcomes()
    cov:stop()
    assert.are.equal(plain, covered)
    assert.is_true(cov:stats().chunks >= 3)
  end)

  it("keeps the JIT on: a hot loop under coverage compiles", function()
    local traces = 0
    local cov = profile.coverage()
    local f = loadstring("local s = 0\nfor i = 1, 100000 do\n  s = s + i % 7\nend\nreturn s\n", "=hot")
    local function on_trace(what) if what == "stop" then traces = traces + 1 end end
    jit.attach(on_trace, "trace")
    local s = f()
    jit.attach(on_trace)
    cov:stop()
    local expected = 0
    for i = 1, 100000 do expected = expected + i % 7 end
    assert.are.equal(expected, s)
    assert.is_true(traces >= 1)
    assert.are.equal(100000, cov:files().hot.lines[3])
  end)

  it("covers modules loaded by require and restores every loader at stop", function()
    local before = { loadstring, load, loadfile, dofile, #package.loaders }
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. run.quote(dir))
    local fh = io.open(dir .. "/cover_mod.lua", "w")
    fh:write("local M = {}\nfunction M.twice(x)\n  return 2 * x\nend\nreturn M\n")
    fh:close()
    local saved_path = package.path
    package.path = dir .. "/?.lua;" .. package.path
    local cov = profile.coverage({ include = "cover_mod", exclude = "nothing" })
    local m = require("cover_mod")
    assert.are.equal(8, m.twice(4))
    cov:stop()
    package.loaded.cover_mod = nil
    package.path = saved_path
    assert.are.same(before, { loadstring, load, loadfile, dofile, #package.loaders })
    local file = cov:files()[dir .. "/cover_mod.lua"]
    assert.are.same({ [1] = 1, [2] = 1, [3] = 1, [5] = 1 }, file.lines)
    assert.are.equal(1, file.functions[1].count)
    assert.are.equal("M.twice", file.functions[1].name)
    os.remove(dir .. "/cover_mod.lua")
    os.remove(dir)
  end)

  it("writes lcov that genhtml accepts and luacov stats", function()
    local path = fixtures .. "cover_oracle.lua"
    local _, _, cov = covered(path)
    local out = os.tmpname()
    cov:write(out .. ".info")
    local text = io.open(out .. ".info"):read("*a")
    assert.is_truthy(text:find("SF:" .. path .. "\n", 1, true))
    assert.is_truthy(text:find("FN:3,fib\n", 1, true))
    assert.is_truthy(text:find("FNDA:21891,fib\n", 1, true))
    assert.is_truthy(text:find("DA:12,1000\n", 1, true))
    assert.is_truthy(text:find("end_of_record\n", 1, true))
    local html = out .. "-html"
    local ok = os.execute(string.format("genhtml -q -o %s %s >/dev/null 2>&1", run.quote(html), run.quote(out .. ".info")))
    assert.is_true(ok == 0 or ok == true, "genhtml refused the lcov file (is lcov installed? scripts/deps.sh)")
    assert.is_truthy(io.open(html .. "/index.html"))
    os.execute("rm -rf " .. run.quote(html))
    cov:write(out .. ".stats.out")
    local stats = io.open(out .. ".stats.out")
    local max, name = stats:read("*l"):match("^(%d+):(.*)$")
    assert.are.equal(path, name)
    local counts = {}
    for c in stats:read("*l"):gmatch("%d+") do counts[#counts + 1] = tonumber(c) end
    stats:close()
    assert.are.equal(tonumber(max), #counts)
    assert.are.equal(1000, counts[12])
    os.remove(out); os.remove(out .. ".info"); os.remove(out .. ".stats.out")
  end)

  it("rejects bad options and calls at the caller's level", function()
    local function err_of(f, ...)
      local ok, e = pcall(f, ...)
      assert.is_false(ok)
      return e
    end
    local e = err_of(function() profile.coverage({ bogus = 1 }) end)
    assert.is_truthy(e:find("coverage_spec.lua:%d+: profile.coverage: unknown option string \"bogus\""))
    e = err_of(function() profile.coverage({ include = { "[" } }) end)
    assert.is_truthy(e:find("coverage_spec.lua:%d+: .*'include' entry 1 must be a valid Lua pattern"))
    e = err_of(function() profile.coverage(5) end)
    assert.is_truthy(e:find("coverage_spec.lua:%d+: .*'opts' %(table or nil expected, got number 5%)"))
    local cov = profile.coverage()
    e = err_of(function() profile.coverage() end)
    assert.is_truthy(e:find("already running", 1, true))
    e = err_of(function() cov:write("x.info", "xml") end)
    assert.is_truthy(e:find("coverage_spec.lua:%d+: .*'format' %(one of lcov, luacov expected"))
    e = err_of(function() cov.stop() end)
    assert.is_truthy(e:find("use a colon", 1, true))
    cov:stop()
  end)

  describe("from the command line and busted", function()
    local env = string.format("LUA_PATH=%s LUA_CPATH=%s",
      run.quote(run.root .. "/lua/?.lua;" .. (os.getenv("LUA_PATH") or ";")),
      run.quote(run.root .. "/build/lib/?.so;" .. (os.getenv("LUA_CPATH") or ";")))

    it("tecs-profile cover runs a script and writes lcov or luacov stats", function()
      local dir = run.tmpdir()
      run.write(dir .. "/lib.lua", "local M = {}\nfunction M.f(x)\n  return x + 1\nend\nreturn M\n")
      run.write(dir .. "/main.lua", "package.path = arg[1] .. '/?.lua;' .. package.path\n" ..
        "local lib = require('lib')\nprint(lib.f(41), arg[2])\nos.exit(3)\n")
      local rc, out, err = run.run3(string.format("%s %s cover -o %s %s %s extra", env, run.cli,
        run.quote(dir .. "/c.info"), run.quote(dir .. "/main.lua"), run.quote(dir)))
      assert.are.equal(3, rc, err)
      assert.are.equal("42\textra\n", out)
      assert.is_truthy(err:find("tecs-profile cover: 8 of 8 lines", 1, true), err)
      local info = run.read(dir .. "/c.info")
      assert.is_truthy(info:find("SF:" .. dir .. "/lib.lua\nFN:2,M.f\nFNDA:1,M.f\n", 1, true), info)
      rc, _, err = run.run3(string.format("%s %s cover -o %s %s %s", env, run.cli,
        run.quote(dir .. "/luacov.stats.out"), run.quote(dir .. "/main.lua"), run.quote(dir)))
      assert.are.equal(3, rc, err)
      local expected = "5:" .. dir .. "/lib.lua\n1 1 1 0 1 \n"
      assert.are.equal(expected, run.read(dir .. "/luacov.stats.out"):sub(1, #expected))
      rc, _, err = run.run3(string.format("%s %s cover --format xml x.lua", env, run.cli))
      assert.are.equal(2, rc)
      assert.is_truthy(err:find("--format must be lcov or luacov", 1, true), err)
      os.execute("rm -rf " .. run.quote(dir))
    end)

    it("the busted helper's cover= argument covers the code a run requires, not the specs", function()
      local dir = run.tmpdir()
      os.execute("mkdir -p " .. run.quote(dir .. "/spec") .. " " .. run.quote(dir .. "/src"))
      run.write(dir .. "/src/calc.lua", "local M = {}\nfunction M.add(a, b)\n  return a + b\nend\n" ..
        "function M.unused()\n  return 0\nend\nreturn M\n")
      run.write(dir .. "/spec/calc_spec.lua", "package.path = 'src/?.lua;' .. package.path\n" ..
        "describe('calc', function()\n  it('adds', function() assert.are.equal(3, require('calc').add(1, 2)) end)\nend)\n")
      local rc, out = run.run(string.format("cd %s && %s %s %s --helper=tecs.profile.busted -Xhelper cover=cov.info spec",
        run.quote(dir), env, run.quote(run.luajit:find("^[^/].*/") and (run.root .. "/" .. run.luajit) or run.luajit), run.quote(io.popen("command -v busted"):read("*l"))))
      assert.are.equal(0, rc, out)
      local info = run.read(dir .. "/cov.info")
      assert.are.equal(1, select(2, info:gsub("SF:", "")), info)
      assert.is_truthy(info:find("SF:src/calc.lua\n", 1, true))
      assert.is_truthy(info:find("FNDA:1,M.add\nFNDA:0,M.unused\n", 1, true))
      assert.is_truthy(info:find("LF:6\nLH:5\n", 1, true))
      os.execute("rm -rf " .. run.quote(dir))
    end)

    it("coverPreloaded=yes counts the Penlight modules busted loads before the helper", function()
      -- A project's own Penlight first on the path: busted's runner loads
      -- its pl.utils before any helper or spec, and the spec uses that copy.
      local dir = run.tmpdir()
      os.execute("mkdir -p " .. run.quote(dir .. "/spec") .. " " .. run.quote(dir .. "/lua"))
      assert.is_true(os.execute("cp -r /usr/share/lua/5.1/pl " .. run.quote(dir .. "/lua/")) == 0)
      run.write(dir .. "/spec/utils_spec.lua", "describe('pl.utils', function()\n" ..
        "  it('binds', function()\n    local utils = require('pl.utils')\n" ..
        "    for i = 1, 3 do assert.are.equal(i + 1, utils.bind1(function(a, b) return a + b end, 1)(i)) end\n" ..
        "  end)\nend)\n")
      local with_path = string.format("LUA_PATH=%s LUA_CPATH=%s",
        run.quote("lua/?.lua;" .. run.root .. "/lua/?.lua;" .. (os.getenv("LUA_PATH") or ";")),
        run.quote(run.root .. "/build/lib/?.so;" .. (os.getenv("LUA_CPATH") or ";")))
      local jit_bin = run.quote(run.luajit:find("^[^/].*/") and (run.root .. "/" .. run.luajit) or run.luajit)
      local function busted(helper_args)
        return run.run3(string.format("cd %s && %s %s %s busted -Xhelper %s spec", run.quote(dir), with_path, jit_bin,
          run.quote(run.root .. "/bin/tecs-profile"), helper_args))
      end
      local rc, out, err = busted("cover=early.info,coverPreloaded=yes")
      assert.are.equal(0, rc, out .. err)
      local info = run.read(dir .. "/early.info")
      local utils_record = info:match("SF:lua/pl/utils%.lua\n(.-)end_of_record")
      assert.is_truthy(utils_record, info)
      -- Exact counts: the spec's three calls (busted never calls bind1).
      assert.is_truthy(utils_record:find("\nFNDA:3,utils.bind1\n", 1, true), utils_record)
      assert.is_truthy(info:find("SF:lua/pl/path.lua\n", 1, true))
      assert.is_falsy(err:find("pl/utils.lua: loaded before the session", 1, true), err)
      -- Without it the module is named as not counted, and why.
      rc, out, err = busted("cover=late.info")
      assert.are.equal(0, rc, out .. err)
      assert.is_falsy(run.read(dir .. "/late.info"):find("SF:lua/pl/utils.lua", 1, true))
      assert.is_truthy(err:find("not counted: lua/pl/utils.lua: loaded before the session (module pl.utils;", 1, true),
        err)
      -- The helper alone cannot start before busted: it says so.
      rc, out, err = run.run3(string.format("cd %s && %s %s %s --helper=tecs.profile.busted -Xhelper %s spec",
        run.quote(dir), with_path, jit_bin,
        run.quote(io.popen("command -v busted"):read("*l")), "cover=x.info,coverPreloaded=yes"))
      assert.are_not.equal(0, rc)
      assert.is_truthy((out .. err):find("coverPreloaded=yes needs tecs-profile busted", 1, true), out .. err)
      rc, out, err = busted("cover=x.info,coverPreloaded=maybe")
      assert.are.equal(2, rc)
      assert.is_truthy(err:find("coverPreloaded must be yes or no", 1, true), err)
      os.execute("rm -rf " .. run.quote(dir))
    end)
  end)

  describe("on Debian's Lua libraries", function()
    local files = {}
    for _, dir in ipairs({ "/usr/share/lua/5.1/pl", "/usr/share/lua/5.1" }) do
      local p = io.popen("ls " .. dir .. "/*.lua 2>/dev/null")
      for f in p:lines() do files[#files + 1] = f end
      p:close()
    end

    it("rewrites and loads every file, keeping its functions' lines", function()
      local checked = 0
      for _, path in ipairs(files) do
        local src = io.open(path, "rb"):read("*a")
        local plain = loadstring(src, "@" .. path)
        if plain then
          local code, info = native.coverRewrite(src, 1)
          assert.is_truthy(code, path .. ": " .. tostring(info))
          local f, err = loadstring(code, "@" .. path)
          assert.is_truthy(f, err)
          assert.are.equal(util.funcinfo(plain).lastlinedefined, util.funcinfo(f).lastlinedefined)
          checked = checked + 1
        end
      end
      assert.is_true(checked >= 40, "only " .. checked .. " library files found")
    end)

    it("counts on Penlight's and dkjson's sources the lines luacov's line hook sees, driven by real programs", function()
      -- luacov's executed lines are those its line hook reports; its
      -- executable lines come from a textual scanner, whose differences
      -- from statement starts docs/coverage.md lists. The programs run one
      -- round each, the same work under the hook and under the counters.
      local programs = { "bench/programs/json_api.lua", "bench/programs/penlight_text.lua" }
      local function libraries(name) return name:find("/pl/[%w_]+%.lua$") or name:find("/dkjson%.lua$") end
      local saved = {}
      local function forget()
        for k, v in pairs(package.loaded) do
          if k:match("^pl%.") or k == "pl" or k == "dkjson" then
            saved[k] = saved[k] or v
            package.loaded[k] = nil
          end
        end
      end
      -- The programs read the global `arg` (busted gives a spec its own
      -- environment).
      local function run_programs()
        local saved_arg, saved_stderr = rawget(_G, "arg"), io.stderr
        for _, path in ipairs(programs) do
          rawset(_G, "arg", { [0] = path, "1" })
          io.stderr = assert(io.open("/dev/null", "w")) -- their one-line summaries
          local ok, err = pcall(assert(loadfile(path)))
          io.stderr:close()
          rawset(_G, "arg", saved_arg)
          io.stderr = saved_stderr
          assert(ok, err)
        end
      end
      forget()
      local hook = {}
      jit.off()
      debug.sethook(function(_, line)
        local src = debug.getinfo(2, "S").source
        if libraries(src) then
          local name = src:sub(2)
          hook[name] = hook[name] or {}
          hook[name][line] = true
        end
      end, "l")
      local ok, err = pcall(run_programs)
      debug.sethook()
      jit.on()
      assert(ok, err)
      forget()
      local cov = profile.coverage({ include = { "/pl/", "/dkjson%.lua$" } })
      ok, err = pcall(run_programs)
      cov:stop()
      forget()
      for k, v in pairs(saved) do package.loaded[k] = v end
      assert(ok, err)
      local compared, hit, files = 0, 0, 0
      for name, file in pairs(cov:files()) do
        if libraries(name) then
          files = files + 1
          local seen = hook[name] or {}
          for _, line in ipairs(comparable(name, file)) do
            assert.are.equal(seen[line] == true, file.lines[line] > 0, name .. ":" .. line)
            compared = compared + 1
            if file.lines[line] > 0 then hit = hit + 1 end
          end
        end
      end
      assert.is_true(files >= 8, "files " .. files)
      assert.is_true(hit > 300 and compared - hit > 300, hit .. " of " .. compared)
    end)

    it("gives the same results from Penlight, dkjson and inspect under coverage", function()
      local function drive()
        local pretty = require("pl.pretty")
        local stringx = require("pl.stringx")
        local List = require("pl.List")
        local tablex = require("pl.tablex")
        local json = require("dkjson")
        local ok_inspect, inspect = pcall(require, "inspect")
        local doc = { name = "x", list = { 3, 1, 2 }, nested = { a = { b = true } } }
        local l = List({ 5, 3, 9, 1 }):sort()
        return table.concat({
          pretty.write(doc, ""), stringx.join(",", stringx.split("a b  c")), tostring(l),
          json.encode(json.decode('{"k":[1,2,{"z":null}],"s":"\\u00e9"}'), { keyorder = { "k", "s" } }),
          tostring(tablex.reduce("+", { 1, 2, 3, 4 })), ok_inspect and inspect(doc) or "no inspect",
        }, "\n")
      end
      local saved = {}
      local function forget()
        for k, v in pairs(package.loaded) do
          if k:match("^pl%.") or k == "pl" or k == "dkjson" or k == "inspect" then
            saved[k] = saved[k] or v
            package.loaded[k] = nil
          end
        end
      end
      forget()
      local plain = drive()
      forget()
      local cov = profile.coverage({ include = { "/pl/", "dkjson", "inspect" } })
      local ok, with = pcall(drive)
      cov:stop()
      forget()
      for k, v in pairs(saved) do package.loaded[k] = v end
      assert.is_true(ok, with)
      assert.are.equal(plain, with)
      local st = cov:stats()
      assert.is_true(st.chunks >= 6, "chunks " .. st.chunks)
      assert.are.same({}, st.skipped)
      assert.is_true(st.linesHit > 100)
    end)
  end)
end)
