-- Native frames below C functions (`nativeFrames`): the tick handler walks
-- the machine stack of the C code a Lua frame called, with the loaded
-- objects' unwind tables, and the frames are named from their symbol
-- tables after the session. Checked against the truth on a C library of
-- known split (spec/fixtures/native_split.c: `heavy` and `light` below one
-- entry, both static, the frame pointer cleared in the entry), called three
-- ways: through the FFI from compiled code, through the FFI from the
-- interpreter, and as a Lua C function. The truth is each part timed alone
-- in the session's pauses.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local sampling = require("spec.support.sampling")
local run = require("spec.support.run")
local ffi = require("ffi")

local native_ok = ffi.os == "Linux" and ffi.arch == "x64"

-- The fixture built as a shared object that is both an FFI library and a
-- Lua C module.
local dir = run.tmpdir()
local so = dir .. "/native_split.so"
local rc, out = run.run(string.format("cc -O2 -fomit-frame-pointer -fPIC -shared -I/usr/include/luajit-2.1 -o %s %s",
  run.quote(so), run.quote(run.root .. "/spec/fixtures/native_split.c")))
assert(rc == 0, "building spec/fixtures/native_split.c:\n" .. out)
ffi.cdef([[
double native_split_entry(long n);
double native_split_heavy(long n);
double native_split_light(long n);
]])
local lib = ffi.load(so)
local module = package.loadlib(so, "luaopen_native_split")()

-- Which part a row's native frames are in: the frame nearest the root
-- named heavy or light below the entry.
local function part_of(frames)
  local entry
  for i = 1, #frames do
    if frames[i] == "[native:native_split_entry]" then entry = i end
  end
  if not entry then return nil end
  local below = frames[entry + 1]
  if below == "[native:heavy]" then return "heavy" end
  if below == "[native:light]" then return "light" end
  return "entry"
end

local ways = {
  ffi_compiled = function(n) return lib.native_split_entry(n) end,
  ffi_interpreted = function(n) return lib.native_split_entry(n) end,
  lua_c_function = function(n) return module.entry(n) end,
}
jit.off(ways.ffi_interpreted)

describe("native frames", function()
  after_each(function()
    sessions.stop_all()
  end)

  for _, way in ipairs({ "ffi_compiled", "ffi_interpreted", "lua_c_function" }) do
    it("split a C library's two functions as their costs do (" .. way .. ")", function()
      if not native_ok then
        pending("native frames are read on Linux x86-64 only")
        return
      end
      local call = ways[way]
      -- An entry call of about half a millisecond, in steps of random
      -- length (no step falls in with the interval).
      local n = sampling.calibrate(function(k) lib.native_split_entry(k) end, 0.0005)
      local s = profile.sample({ nativeFrames = true })
      local st0 = s:stats()
      if st0.nativeFramesNote then
        -- Only where the handler reads no C function's stack.
        assert.is_not_nil(st0.cFunctionLeavesNote or st0.compiledNote, st0.nativeFramesNote)
        pending(st0.nativeFramesNote)
        return
      end
      local want, again = sampling.interleaved(s, 6, function()
        local t = sampling.time_parts({
          heavy = function() lib.native_split_heavy(n) end,
          light = function() lib.native_split_light(n) end,
        }, 0.1)
        return t
      end, function()
        sampling.until_samples(s, 300, function() call(sampling.jitter(n)) end)
      end)
      local text = s:stop()
      local st = s:stats()
      local counts, under, total = { heavy = 0, light = 0, entry = 0 }, 0, 0
      for _, r in ipairs(collapsed.parse(text)) do
        total = total + r.count
        local p = part_of(r.frames)
        if p then
          counts[p] = counts[p] + r.count
          under = under + r.count
        end
      end
      -- Nearly every sample is in the C library, and named there.
      assert.is_true(under >= 0.8 * total, string.format("%d of %d samples under the entry:\n%s", under, total, text))
      assert.is_true(st.nativeFrames.stacks >= under, text)
      local n2 = counts.heavy + counts.light
      local msg = string.format("heavy %.1f%% (truth %.1f%% / %.1f%%) of %d samples", 100 * counts.heavy / n2,
        100 * want.heavy, 100 * again.heavy, n2)
      print(way .. ": " .. msg)
      sampling.check_share("heavy (" .. msg .. ")", counts.heavy / n2, (want.heavy + again.heavy) / 2, n2,
        math.abs(want.heavy - again.heavy))
      -- The native frames begin right below the frame the Lua stack ends
      -- at: the C function the VM called (the builtin that makes an FFI
      -- call from the interpreter, or the Lua C function), or the Lua line
      -- whose compiled code made the call (the builtin until the loop is
      -- compiled).
      local call_builtin = "ffi.meta.__call"
      local above = {
        ffi_compiled = function(f) return f:match("^spec/native_frames_spec%.lua:%d+$") or f == call_builtin end,
        ffi_interpreted = function(f) return f == call_builtin end,
        lua_c_function = function(f) return f == "[C:l_entry]" end,
      }
      local compiled = 0
      for _, r in ipairs(collapsed.parse(text)) do
        for i = 2, #r.frames do
          if r.frames[i] == "[native:native_split_entry]" then
            assert.is_truthy(above[way](r.frames[i - 1]), table.concat(r.frames, ";"))
            if r.frames[i - 1] ~= call_builtin then compiled = compiled + r.count end
          end
        end
      end
      if way == "ffi_compiled" then
        assert.is_true(compiled >= 0.5 * under, string.format("%d of %d from compiled code", compiled, under))
      end
    end)
  end

  it("are named in every output format, and appear only when asked for", function()
    if not native_ok then
      pending("native frames are read on Linux x86-64 only")
      return
    end
    local n = sampling.calibrate(function(k) lib.native_split_entry(k) end, 0.0005)
    local s = profile.sample({ nativeFrames = true })
    if s:stats().nativeFramesNote then
      pending(s:stats().nativeFramesNote)
      return
    end
    sampling.until_samples(s, 100, function() ways.ffi_compiled(sampling.jitter(n)) end)
    s:stop()
    local text = s:collapsed()
    assert.truthy(text:find("[native:heavy]", 1, true), text)
    assert.is_nil(text:find("[native@", 1, true), text)
    local json = s:write(dir .. "/p.speedscope.json")
    local written = run.read(dir .. "/p.speedscope.json")
    assert.truthy(written:find("[native:heavy]", 1, true), tostring(json))
    -- Without the option, the stack ends at the Lua line or the C function.
    local plain = profile.sample({})
    sampling.until_samples(plain, 100, function() ways.lua_c_function(sampling.jitter(n)) end)
    local ptext = plain:stop()
    assert.is_nil(ptext:find("[native", 1, true), ptext)
    assert.is_nil(plain:stats().nativeFrames)
    -- The Lua C function, static in its library, named from its symbol
    -- table (the dynamic linker knows only exported names).
    assert.truthy(ptext:find("[C:l_entry]", 1, true), ptext)
  end)

  it("are walked in a library loaded after the start and named after it is unloaded (tecs-profile run)", function()
    if not native_ok then
      pending("native frames are read on Linux x86-64 only")
      return
    end
    -- The command line's session runs where this process's does.
    local probe = profile.sample({ nativeFrames = true })
    local note = probe:stats().nativeFramesNote
    probe:stop()
    if note then
      pending(note)
      return
    end
    local outfile = dir .. "/run.collapsed"
    local code, output = run.run(string.format("%s run --native-frames -q -o %s spec/fixtures/native_split_program.lua %s",
      run.cli, run.quote(outfile), run.quote(so)))
    assert.equal(0, code, output)
    local text = run.read(outfile)
    local rows = collapsed.parse(text)
    local total = collapsed.sum(rows)
    local named = collapsed.sum(rows, function(r) return part_of(r.frames) == "heavy" or part_of(r.frames) == "light" end)
    assert.is_true(total >= 50 and named >= 0.6 * total, string.format("%d of %d samples named:\n%s", named, total, text))
    assert.is_nil(text:find("[native:0x", 1, true), text)
  end)

  it("leave a child forked while they run free to stop its copy of the session", function()
    if not native_ok then
      pending("native frames are read on Linux x86-64 only")
      return
    end
    ffi.cdef([[int fork(void); void _exit(int); int waitpid(int pid, int *status, int options);]])
    local s = profile.sample({ nativeFrames = true })
    local pid = ffi.C.fork()
    if pid == 0 then
      s:stop()
      ffi.C._exit(7)
    end
    local status = ffi.new("int[1]")
    assert.equal(pid, ffi.C.waitpid(pid, status, 0))
    s:stop()
    assert.equal(7, bit.rshift(status[0], 8))
  end)

  it("are refused, with the reason, at a precision the handler does not read", function()
    local s = profile.sample({ nativeFrames = true, precision = "function" })
    local st = s:stats()
    s:stop()
    assert.is_nil(st.nativeFrames)
    assert.truthy(st.nativeFramesNote and st.nativeFramesNote:find("exact", 1, true), tostring(st.nativeFramesNote))
  end)

  it("reject a value that is not a boolean, naming the option", function()
    local ok, err = pcall(profile.sample, { nativeFrames = "yes" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("nativeFrames", 1, true), tostring(err))
  end)
end)
