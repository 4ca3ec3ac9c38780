-- Abort reasons worded like -jv: from this VM's jit.vmdef, and from the
-- built-in tables when jit.vmdef cannot be loaded.
local reasons = require("tecs.profile.trace.reasons")
local vmdef = require("jit.vmdef")
local t = require("spec.support.trace")

describe("profile.trace", function()
  describe("reasons", function()
    local fmt = reasons.new(vmdef)

    it("fill in opcode names, builtin names, numbers and pass error values through", function()
      local code = {}
      for i = 0, #vmdef.traceerr do code[vmdef.traceerr[i]:gsub("%%[ds]$", "")] = i end
      local fnew = (vmdef.bcnames:find("FNEW ", 1, true) - 1) / 6
      assert.equal("NYI: bytecode FNEW", fmt:reason(code["NYI: bytecode "], fnew))
      assert.equal("NYI: unsupported variant of FastFunc string.rep",
        fmt:reason(code["NYI: unsupported variant of FastFunc "], string.rep))
      assert.equal("NYI: unsupported variant of FastFunc string.format",
        fmt:reason(code["NYI: unsupported variant of FastFunc "], string.format))
      assert.equal("NYI: cannot assemble IR instruction " .. vmdef.irnames:sub(1, 6):gsub("%s+$", ""),
        fmt:reason(code["NYI: cannot assemble IR instruction "], 0))
      assert.equal('a "string", error', fmt:reason('a "string", error'))
      assert.equal("blacklisted", fmt:reason(code["blacklisted"]))
      assert.is_true(fmt:is_blacklisted_reason(code["blacklisted"]))
      assert.is_true(fmt:is_benign(code["leaving loop in root trace"]))
      assert.is_true(fmt:is_benign(code["inner loop in root trace"]))
      assert.is_true(fmt:is_benign(code["down-recursion, restarting"]))
      assert.is_false(fmt:is_benign(code["trace too long"]))
      assert.is_false(fmt:is_benign("leaving loop in root trace")) -- only codes
    end)

    it("built-in tables agree with this VM's jit.vmdef", function()
      local fallback = reasons.new(nil)
      for i = 0, #vmdef.traceerr do
        local function template(t) return (t:gsub("%%[dsp]", "%%?")) end
        assert.equal(template(vmdef.traceerr[i]), template(fallback.messages[i]))
      end
      assert.is_true(fallback:knows_opcodes(), "no built-in opcode list matched this VM")
      assert.is_string(fallback.opcode_list)
      for op = 0, #vmdef.bcnames / 6 - 1 do
        assert.equal(fmt:opname(op), fallback:opname(op))
      end
      -- Zones are shown in brackets after a reason: the note is not.
      assert.not_matches("[%[%]]", reasons.FALLBACK_NOTE)
      assert.equal("NYI: bytecode FNEW" .. reasons.FALLBACK_NOTE,
        fallback:reason(7, (vmdef.bcnames:find("FNEW ", 1, true) - 1) / 6))
    end)

    it("work without jit.vmdef and say so", function()
      -- The hiding works on this VM: jit.vmdef and jit.zone cannot be
      -- loaded, while the package can.
      local probe = io.popen(t.LUAJIT .. " " .. t.HIDE_JIT_DIR .. [[ -e "print(pcall(require, 'jit.vmdef'),]] ..
        [[ pcall(require, 'jit.zone'), pcall(require, 'tecs.profile.trace.reasons'))"]])
      local out = probe:read("*a")
      probe:close()
      assert.matches("^false\tfalse\ttrue\t", out)
      for _, name in ipairs({ "nyi", "cfunc" }) do
        local with = t.sites_of((t.run_fixture(name)))
        local without = t.sites_of((t.run_fixture(name, { hide_vmdef = true })))
        assert.is_true(#with > 0, "no aborts in trace_" .. name .. ".lua")
        assert.equal(#with, #without)
        for i, s in ipairs(without) do
          assert.equal(with[i].reason .. reasons.FALLBACK_NOTE, s.reason)
          assert.equal(with[i].count, s.count)
          assert.equal(with[i].location, s.location)
        end
      end
    end)
  end)

end)
