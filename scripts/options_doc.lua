--- Makes the option tables and command-line help of the docs again from their declarations
-- (see tecs.profile.options_doc):
--
--   luajit scripts/options_doc.lua docs/*.md
--
-- Each table sits between `<!-- options: NAME -->` and `<!-- /options: NAME -->`.
local options_doc = require("tecs.profile.options_doc")

for _, path in ipairs(arg) do
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  local fresh, n = options_doc.refresh(text)
  if fresh ~= text then
    f = assert(io.open(path, "wb"))
    f:write(fresh)
    f:close()
  end
  io.write(string.format("%s: %d generated blocks%s\n", path, n, fresh ~= text and ", updated" or ""))
end
