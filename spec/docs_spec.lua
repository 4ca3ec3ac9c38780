-- The documentation: a README short enough to read, links that lead
-- somewhere, and an architecture list that names files that exist.

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The lines of a Markdown text outside fenced code blocks, with their numbers.
local function prose_lines(text)
  local out, fenced, n = {}, false, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:match("^%s*```") or line:match("^%s*~~~") then
      fenced = not fenced
    elseif not fenced then
      out[#out + 1] = { n = n, text = line }
    end
  end
  return out
end

-- GitHub's anchor for a heading: the text as rendered (code spans and link
-- targets dropped), lower-cased, punctuation removed, spaces turned into
-- hyphens; a repeated anchor gets -1, -2, ...
local function slug(heading)
  local s = heading:gsub("%[([^%]]*)%]%([^)]*%)", "%1"):gsub("`", "")
  s = s:lower()
  -- Latin-1 capitals (U+00C0 to U+00DE, but not U+00D7) in UTF-8.
  s = s:gsub("\195([\128-\158])", function(b)
    if b == "\151" then return "\195" .. b end
    return "\195" .. string.char(b:byte() + 32)
  end)
  s = s:gsub("[%z\1-\127]", function(c)
    if c:match("[%w _%-]") then return c end
    return ""
  end)
  return (s:gsub(" ", "-"))
end

local anchor_cache = {}
local function anchors(path)
  if anchor_cache[path] then return anchor_cache[path] end
  local set, seen = {}, {}
  for _, l in ipairs(prose_lines(read(path))) do
    local title = l.text:match("^#+%s+(.-)%s*#*%s*$")
    if title then
      local base = slug(title)
      local a = base
      if seen[base] then a = base .. "-" .. seen[base] end
      seen[base] = (seen[base] or 0) + 1
      set[a] = true
    end
  end
  anchor_cache[path] = set
  return set
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

local function normalise(path)
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." and #parts > 0 and parts[#parts] ~= ".." then
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return table.concat(parts, "/")
end

-- Every relative link of a Markdown file: { line =, target = }.
local function relative_links(path)
  local out = {}
  for _, l in ipairs(prose_lines(read(path))) do
    local line = l.text:gsub("``.-``", ""):gsub("`[^`]*`", "")
    for target in line:gmatch("%]%(([^)%s]+)[^)]*%)") do
      if not target:match("^%a[%w+.-]*:") then
        out[#out + 1] = { line = l.n, target = target }
      end
    end
  end
  return out
end

local function doc_files()
  local files = { "README.md", "CONTRIBUTING.md" }
  local p = assert(io.popen("git ls-files --cached --others --exclude-standard -- 'docs/*.md'"))
  for name in p:lines() do files[#files + 1] = name end
  p:close()
  return files
end

local function tracked_files()
  local set = {}
  local p = assert(io.popen("git ls-files --cached --others --exclude-standard"))
  for name in p:lines() do set[name] = true end
  p:close()
  return set
end

describe("documentation", function()
  it("holds no merge conflict markers, in the docs or anywhere else", function()
    local p = assert(io.popen("git grep -n -I -E '^(<<<<<<<|>>>>>>>) ' -- . ':!spec/docs_spec.lua'"))
    local found = p:read("*a")
    p:close()
    assert.equal("", found)
  end)

  it("keeps the README to at most 300 lines", function()
    local n = select(2, read("README.md"):gsub("\n", "\n"))
    assert.is_true(n <= 300, "README.md has " .. n .. " lines")
  end)

  it("has docs pages to link to", function()
    local files = doc_files()
    assert.is_true(#files >= 8, "README, CONTRIBUTING and the docs/ pages: " .. #files)
  end)

  it("links only to files and headings that exist", function()
    local broken, checked = {}, 0
    for _, file in ipairs(doc_files()) do
      for _, link in ipairs(relative_links(file)) do
        checked = checked + 1
        local target_path, anchor = link.target:match("^([^#]*)#?(.*)$")
        local resolved = target_path == "" and file or normalise(dirname(file) .. "/" .. target_path)
        local where = ("%s:%d: %s"):format(file, link.line, link.target)
        if not exists(resolved) then
          broken[#broken + 1] = where .. " (no file " .. resolved .. ")"
        elseif anchor ~= "" then
          if not resolved:match("%.md$") then
            broken[#broken + 1] = where .. " (an anchor into a file that is not Markdown)"
          elseif not anchors(resolved)[anchor] then
            broken[#broken + 1] = where .. " (no heading #" .. anchor .. " in " .. resolved .. ")"
          end
        end
      end
    end
    assert.is_true(checked > 50, "relative links checked: " .. checked)
    assert.are.same({}, broken)
  end)

  it("computes anchors the way GitHub does", function()
    assert.equal("profilesampleopts---samplesession", slug("`profile.sample(opts?) -> SampleSession`"))
    assert.equal("löve", slug("LÖVE"))
    assert.equal("beside-a-sampling-session-what-allocated-before-a-gc-run",
      slug("Beside a sampling session: what allocated before a GC run"))
  end)

  it("names only files that exist in CONTRIBUTING's architecture", function()
    local text = read("CONTRIBUTING.md")
    local section = text:match("\n## Architecture\n(.-)\n## ")
    assert.is_string(section, "CONTRIBUTING.md has an Architecture section")
    local files = tracked_files()
    local function present(path)
      if path:sub(-1) ~= "/" then return files[path] end
      for name in pairs(files) do
        if name:sub(1, #path) == path then return true end
      end
      return false
    end
    local missing, checked = {}, 0
    local roots = { "src/", "crates/", "lua/", "bin/", "spec/", "platform_spec/", "scripts/", "examples/", "bench/",
      "tools/", "tests/", "fuzz/" }
    for token in section:gmatch("`([^`\n]+)`") do
      for _, root in ipairs(roots) do
        if token:sub(1, #root) == root and token:match("^[%w_./-]+$") then
          checked = checked + 1
          if not present(token) then missing[#missing + 1] = token end
          break
        end
      end
    end
    assert.is_true(checked >= 60, "paths checked: " .. checked)
    assert.are.same({}, missing)
  end)
end)
