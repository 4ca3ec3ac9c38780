--- The option tables and the command-line help of the docs, made from the
-- declarations they come from. Option tables: from the options' declarations in
-- the native module (`native.options`: names, defaults, what each accepts
-- and what it does), so that no copy of a default or a range can drift.
-- The docs hold each table between `<!-- options: NAME -->` and
-- `<!-- /options: NAME -->`, and each command's `--help` (made from the
-- command line's own declarations, `tecs.profile.cli.options`) between
-- `<!-- help: COMMAND -->` and `<!-- /help: COMMAND -->`, and the bounds
-- of the control channel's requests between `<!-- bounds: control -->`
-- and `<!-- /bounds: control -->`; `scripts/options_doc.lua` writes them
-- there and a spec fails when one
-- differs from what this module makes.
-- @module tecs.profile.options_doc

local native = require("tecs.profile.native")

local M = {}

--- The functions whose options are declared, in the docs' order.
function M.functions()
  local list = {}
  for name in pairs(native.options) do list[#list + 1] = name end
  table.sort(list)
  return list
end

local function default_text(v)
  if v == nil then return "none" end
  if type(v) == "string" then return '`"' .. v .. '"`' end
  if type(v) == "number" then return "`" .. string.format("%.14g", v) .. "`" end
  return "`" .. tostring(v) .. "`"
end

-- A table cell: `|` would end it.
local function cell(s)
  return (tostring(s):gsub("|", "\\|"))
end

--- The options of `function_name` as a Markdown table.
-- @tparam string function_name a key of `native.options` ("sample", "report", ...)
-- @treturn string
function M.markdown(function_name)
  local o = native.options[function_name]
  if not o then
    error("options_doc.markdown: bad argument #1 'function_name': no options declared for '"
      .. tostring(function_name) .. "'", 2)
  end
  local out = { "| option | default | accepts | what it does |", "|---|---|---|---|" }
  for _, name in ipairs(o.names) do
    out[#out + 1] = string.format("| `%s` | %s | %s | %s |", name, default_text(o.defaults[name]),
      cell(o.accepts[name]), cell(o.help[name]))
  end
  return table.concat(out, "\n") .. "\n"
end

--- The markers around the table of `function_name` in the docs.
function M.markers(function_name)
  return "<!-- options: " .. function_name .. " -->\n", "<!-- /options: " .. function_name .. " -->"
end

--- The help the command line prints for `command` ("main": the list of
-- commands), as a Markdown code block of the session that prints it.
-- @tparam string command
-- @treturn string
function M.help(command)
  local cli_options = require("tecs.profile.cli.options")
  if command ~= "main" and not cli_options.command(command) then
    error("options_doc.help: bad argument #1 'command': no command '" .. tostring(command) .. "'", 2)
  end
  local text = command == "main" and cli_options.main_usage() or cli_options.usage(command)
  local shown = command == "main" and "tecs-profile --help" or ("tecs-profile " .. command .. " --help")
  return "```\n$ " .. shown .. "\n" .. text .. (text:sub(-1) == "\n" and "" or "\n") .. "```\n"
end

--- The bounds of the control channel's requests (`control::FIELDS` and
-- its limits in the native module) as a Markdown table and a sentence.
-- @treturn string
function M.control_bounds()
  local raw = native.raw
  if not raw.controlFieldList then return "(this build has no control channel)\n" end
  local lines = { "| command | field | accepts | what it is |", "|---|---|---|---|" }
  for _, f in ipairs(raw.controlFieldList) do
    lines[#lines + 1] = string.format("| `%s` | `%s` | %s | %s |", f.command, f.name, cell(f.expected), cell(f.what))
  end
  local limits = raw.controlLimits
  lines[#lines + 1] = ""
  lines[#lines + 1] = string.format("A request line is at most %d bytes; a client that sends no complete request "
    .. "for %g s is disconnected.", limits.requestLine, limits.idleSeconds)
  return table.concat(lines, "\n") .. "\n"
end

--- `text` with every marked option table, command-line help and table of
-- bounds made again (`<!-- options: NAME -->`, `<!-- help: COMMAND -->`,
-- `<!-- bounds: control -->`); returns the new text and how many blocks
-- it holds.
function M.refresh(text)
  local n = 0
  local out = text:gsub("(<!%-%- (%a+): ([%w]+) %-%->\n)(.-)(<!%-%- /%2: %3 %-%->)",
    function(open, kind, name, old, close)
      local made
      if kind == "options" then
        made = M.markdown(name)
      elseif kind == "help" then
        made = M.help(name)
      elseif kind == "bounds" and name == "control" then
        made = M.control_bounds()
      else
        return nil
      end
      n = n + 1
      return open .. made .. close
    end)
  return out, n
end

return M
