--- The option tables of the docs, made from the options' declarations in
-- the native module (`native.options`: names, defaults, what each accepts
-- and what it does), so that no copy of a default or a range can drift.
-- The docs hold each table between `<!-- options: NAME -->` and
-- `<!-- /options: NAME -->`; `scripts/options_doc.lua` writes them there and
-- a spec fails when one differs from what this module makes.
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

--- `text` with the table of every marked function made again; returns the
-- new text and how many tables it holds.
function M.refresh(text)
  local n = 0
  local out = text:gsub("(<!%-%- options: ([%w]+) %-%->\n)(.-)(<!%-%- /options: %2 %-%->)",
    function(open, name, _, close)
      n = n + 1
      return open .. M.markdown(name) .. close
    end)
  return out, n
end

return M
