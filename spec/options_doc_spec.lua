-- Options are declared once, in the native module: the docs' option tables
-- are made from the declarations and must equal what they make now, and the
-- LDoc of the session functions names exactly the declared options.
local options_doc = require("tecs.profile.options_doc")
local native = require("tecs.profile.native")
local run = require("spec.support.run")

local function ldoc_option_names(path, fn_pattern)
  local text = assert(run.read(path))
  local block = assert(text:match("@tparam%[opt%] table opts(.-)%-%- @treturn [%w]+\n" .. fn_pattern), path)
  local names = {}
  for name in block:gmatch("`([%w]+)`") do names[#names + 1] = name end
  table.sort(names)
  return names
end

describe("options declared once", function()
  it("every docs option table and command-line help is the one the declarations make", function()
    local seen, helps = {}, {}
    local files = {}
    for path in io.popen("ls docs/*.md README.md 2>/dev/null"):lines() do files[#files + 1] = path end
    for _, path in ipairs(files) do
      local text = assert(run.read(path))
      local fresh = options_doc.refresh(text)
      assert.equal(fresh, text, path .. " has a generated block that drifted: run luajit scripts/options_doc.lua " .. path)
      for name in text:gmatch("<!%-%- options: ([%w]+) %-%->") do seen[name] = true end
      for name in text:gmatch("<!%-%- help: ([%w]+) %-%->") do helps[name] = true end
    end
    for _, name in ipairs(options_doc.functions()) do
      assert.is_true(seen[name], "no option table for " .. name .. " in the docs")
    end
    assert.is_true(helps.main, "no help of the command line in the docs")
    for _, c in ipairs(require("tecs.profile.cli.options").COMMANDS) do
      assert.is_true(helps[c.name], "no help of tecs-profile " .. c.name .. " in the docs")
    end
  end)

  it("the LDoc of profile.sample and profile.allocations names exactly the declared options", function()
    local function declared(fn)
      local names = {}
      for _, n in ipairs(native.options[fn].names) do names[#names + 1] = n end
      table.sort(names)
      return names
    end
    assert.same(declared("sample"), ldoc_option_names("lua/tecs/profile/sample.lua", "function M%.start"))
    assert.same(declared("allocations"), ldoc_option_names("lua/tecs/profile/allocations.lua", "function M%.start"))
  end)

  it("refuses a function with no declared options, naming the argument", function()
    local ok, err = pcall(options_doc.markdown, "nosuch")
    assert.is_false(ok)
    assert.matches("bad argument #1 'function_name': no options declared for 'nosuch'", err)
  end)
end)

describe("the command line's options", function()
  local cli_options = require("tecs.profile.cli.options")

  it("show the defaults declared for the options they set, and none of their own", function()
    local checked = 0
    for _, c in ipairs(cli_options.COMMANDS) do
      for _, section in ipairs(c.sections or {}) do
        for _, o in ipairs(section.options or {}) do
          assert.is_nil(o.help:find("default", 1, true),
            "--" .. o[1] .. " of " .. c.name .. " states a default in its help: declare it (declared, default)")
          if o.declared then
            local v = native.options[o.declared].defaults[o.key]
            assert.is_not_nil(v, "--" .. o[1] .. ": " .. o.declared .. " declares no default for " .. o.key)
            assert.equal(type(v) == "number" and string.format("%.14g", v) or tostring(v),
              cli_options.declared_default(o))
            checked = checked + 1
          end
        end
      end
    end
    assert.is_true(checked >= 8, "options with declared defaults: " .. checked)
  end)
end)
