"""The module under LuaJIT 2.0, which has no profiler API (luaJIT_profile_*).

PyPI's lupa ships LuaJIT 2.0 as the extension lupa.luajit20. Loading it with
RTLD_GLOBAL makes its lua_* symbols visible to tecs.profile.native, as they are
in a luajit executable. Prints TAP; run from the repository root with the
native module built (make build).
"""
import os
import sys

sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)
import lupa.luajit20 as luajit20  # noqa: E402

root = os.getcwd()
lua = luajit20.LuaRuntime()
lua.execute(
    "local root = ...\n"
    "package.path = root .. '/lua/?.lua;' .. package.path\n"
    "package.cpath = root .. '/build/lib/?.so;' .. package.cpath",
    root,
)

# Each check is Lua code run as a chunk named "=caller"; it returns true or an
# explanation of what went wrong.
CHECKS = [
    ("runs on LuaJIT 2.0", r"""
        return jit.version:match("^LuaJIT 2%.0") ~= nil or jit.version
    """),
    ("tecs.profile and its native module load", r"""
        local profile = require("tecs.profile")
        if require("tecs.utils.profile") ~= profile then return "alias differs" end
        local native = require("tecs.profile.native")
        local ok, why = native.available()
        if ok then return "native.available() said yes on 2.0" end
        if not why:find("2.1", 1, true) then return "reason: " .. tostring(why) end
        return true
    """),
    ("profile.sample() raises a clear error at the caller's line", r"""
        local profile = require("tecs.profile")
        local ok, err = pcall(function()
            local s = profile.sample()  -- line 3 of this chunk
            return s
        end)
        if ok then return "sample() succeeded" end
        local want = "^caller:3: profile%.sample: this LuaJIT has no profiler API %(luaJIT_profile_start needs LuaJIT 2%.1 or later%)$"
        return err:match(want) ~= nil or err
    """),
    ("a failed start leaves no session behind, and options are still checked", r"""
        local profile = require("tecs.profile")
        local ok, err = pcall(profile.sample)
        if ok or err:find("already active") then return tostring(err) end
        if require("tecs.profile.sample").active() then return "a session is active" end
        ok, err = pcall(profile.sample, { intervalMs = "fast" })
        return (not ok and err:find("option 'intervalMs'", 1, true) ~= nil) or tostring(err)
    """),
    ("zones fall back to the built-in stack (2.0 has no jit.zone)", r"""
        local profile = require("tecs.profile")
        local zone = profile.zone()
        if zone ~= require("tecs.profile.zone") then return "not the fallback" end
        zone("update") zone("physics")
        local top = zone:get()
        zone() zone()
        return top == "physics" and #zone == 0 or tostring(top)
    """),
]

run = lua.eval("function(code) local f = assert(loadstring(code, '=caller')) "
               "local ok, res = pcall(f) if not ok then return 'error: ' .. tostring(res) end "
               "return res end")
failed = 0
print("1..%d" % len(CHECKS))
for i, (name, code) in enumerate(CHECKS, 1):
    result = run(code.strip("\n"))
    if result is True:
        print("ok %d - %s" % (i, name))
    else:
        failed += 1
        print("not ok %d - %s" % (i, name))
        print("# got: %s" % (result,))
sys.exit(1 if failed else 0)
