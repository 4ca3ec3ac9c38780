--- Penlight (Debian's lua-penlight) on text and tables: CSV lines split and
-- converted, grouped and sorted with pl.tablex / pl.List, rendered with
-- pl.pretty and a pl.template, ROUNDS times.
local stringx = require("pl.stringx")
local tablex = require("pl.tablex")
local List = require("pl.List")
local pretty = require("pl.pretty")
local template = require("pl.template")
local rounds = tonumber(arg and arg[1]) or 50
local lines = {}
for i = 1, 3000 do
  lines[i] = string.format("%d, item %d , %s, %.2f, %s", i, i, ("abc"):rep(i % 5 + 1), i * 0.37, i % 4 == 0 and "yes" or "no")
end
local csv = table.concat(lines, "\n")
local tpl = "# for _, r in ipairs(rows) do\n$(r.id): $(r.name) [$(r.kind)] $(r.value)\n# end\n"
local total = 0
for _ = 1, rounds do
  local rows = List()
  for line in stringx.lines(csv) do
    local f = stringx.split(line, ",")
    f = tablex.map(stringx.strip, f)
    rows:append({ id = tonumber(f[1]), name = f[2], kind = f[3], value = tonumber(f[4]), flag = f[5] == "yes" })
  end
  rows:sort(function(a, b) return a.value > b.value end)
  local groups = {}
  for r in rows:iter() do
    groups[r.kind] = groups[r.kind] or List()
    groups[r.kind]:append(r)
  end
  local text = pretty.write(tablex.map(function(g) return g:slice(1, 20) end, groups))
  local out = template.substitute(tpl, { rows = rows:slice(1, 500), ipairs = ipairs })
  total = total + #text + #out
end
io.stderr:write("penlight_text ", total, "\n")
