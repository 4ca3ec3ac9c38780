--- The profiles a program's control channel wrote, as MCP resources: what
-- lets an agent whose files are not this machine's (another sandbox, a
-- remote host) read them through `tecs-profile mcp`.
--
-- A resource is a file directly in the control directory, where the channel
-- writes a profile when the client names no path, or directly in the
-- `outputDir` of a program listening (its discovery entry names it), with a
-- profile's ending (`.collapsed`, `.aborts.csv`, or one of the output
-- formats'): nothing else on the machine is readable this way. It is read
-- as a write is made (`native.raw.clientFile`): looked up in its directory
-- without following a link, a regular file of this user with one name,
-- never waited on (a FIFO); a URI with a NUL byte is refused before
-- anything is looked up. Its URI is its `file://` URL, so an agent on the
-- same machine may open the file instead. A read returns the whole file or
-- refuses it: past `MAX_BYTES` it says how large the file is and what else
-- gives its views.
-- @module tecs.profile.mcp.resources

local native = require("tecs.profile.native")

local M = {}

--- The largest file a read returns, in bytes.
M.MAX_BYTES = 4 * 1024 * 1024

-- The endings of the files a resource may be, and their media types; the
-- output formats' come from the native registry.
local TEXT_ENDINGS = { { ".collapsed", "text/plain" }, { ".csv", "text/csv" } }
local MEDIA_TYPES = { svg = "image/svg+xml", html = "text/html", pprof = "application/gzip" }
local BINARY = { ["application/gzip"] = true }

local ENDINGS = {}
for _, e in ipairs(native.formatExtensions or {}) do
  ENDINGS[#ENDINGS + 1] = { e[1], MEDIA_TYPES[e[2]] or "application/json" }
end
for _, e in ipairs(TEXT_ENDINGS) do ENDINGS[#ENDINGS + 1] = e end

-- The media type of a file named `name`, or nil for a name no profile has.
local function media_type(name)
  for _, e in ipairs(ENDINGS) do
    if #name > #e[1] and name:sub(-#e[1]) == e[1] then return e[2] end
  end
  return nil
end

-- The directories whose profiles are resources: the control directory,
-- then the outputDir of each program listening; or nil and why not.
local function directories()
  local ok, dir = native.call(native.raw.controlDirectory, nil)
  if not ok then return nil, dir end
  local dirs = { dir }
  local listed, targets = false, nil
  if native.raw.controlTargets then listed, targets = native.call(native.raw.controlTargets, nil) end
  for _, t in ipairs(listed and targets or {}) do
    if type(t.outputDir) == "string" and t.outputDir ~= "" then dirs[#dirs + 1] = t.outputDir end
  end
  return dirs
end

--- The `file://` URI of `path`.
function M.uri(path)
  return "file://" .. path:gsub("[^%w/%-%._~]", function(c) return string.format("%%%02X", c:byte()) end)
end

-- The path a `file://` URI names, or nil and why not (a NUL byte, which
-- no path holds, is refused here: a name checked with it would be cut
-- short where the file is opened).
local function path_of(uri)
  local p = type(uri) == "string" and uri:match("^file://(/.*)$")
  if not p then
    return nil, string.format("not a resource of tecs-profile: %s (its resources are file:// URIs)", tostring(uri))
  end
  p = p:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
  if p:find("\0", 1, true) then return nil, "not a resource of tecs-profile: a URI with a NUL byte (%00)" end
  return p
end

-- The name of `path` if it lies directly in `dir`, else nil.
local function name_in(dir, path)
  local name = path:sub(#dir + 2)
  if path:sub(1, #dir + 1) ~= dir .. "/" or name == "" or name:find("/", 1, true) or name:sub(1, 1) == "." then
    return nil
  end
  return name
end

-- The media type of `path` if it is a resource, and its directory and
-- name; else nil and why not.
local function resource_type(path)
  local dirs, err = directories()
  if not dirs then return nil, err end
  local name, dir
  for _, d in ipairs(dirs) do
    if not name then name, dir = name_in(d, path), d end
  end
  if not name then
    return nil, string.format("only the profiles in the control directory (%s) and in the outputDir of a program "
      .. "listening are resources", dirs[1])
  end
  local media = media_type(name)
  if not media then
    return nil, string.format("%s is not a profile (a profile's name ends in .collapsed, .aborts.csv or an output "
      .. "format's ending)", name)
  end
  return media, dir, name
end

--- A `resource_link` content item for the file at `path`, or nil when it
-- is not a resource (written outside the control directory and the
-- programs' outputDirs).
function M.link(path, description)
  if type(path) ~= "string" then return nil end
  local media, dir, name = resource_type(path)
  if not media then return nil end
  local ok, size = native.call(native.raw.clientFile, dir, name)
  if not ok then return nil end
  return { type = "resource_link", uri = M.uri(path), name = name, mimeType = media, size = size,
    description = description }
end

--- The resource listing of `files` (`{ { path, title, description }, ... }`):
-- those that are resources and exist.
function M.list(files)
  local list = {}
  for _, f in ipairs(files) do
    local link = M.link(f.path, f.description)
    if link then
      list[#list + 1] = { uri = link.uri, name = link.name, title = f.title, mimeType = link.mimeType,
        size = link.size, description = f.description }
    end
  end
  return list
end

-- Base64 (RFC 4648), for a binary file's contents.
local ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local quad = {}
    for j = 1, 4 do
      local k = math.floor(n / 64 ^ (4 - j)) % 64
      quad[j] = ALPHABET:sub(k + 1, k + 1)
    end
    if not b then quad[3] = "=" end
    if not c then quad[4] = "=" end
    out[#out + 1] = table.concat(quad)
  end
  return table.concat(out)
end

-- Whether `s` is UTF-8 (JSON text carries nothing else).
local function is_utf8(s)
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    local len = c < 0x80 and 1 or c >= 0xC2 and c < 0xE0 and 2 or c >= 0xE0 and c < 0xF0 and 3
      or c >= 0xF0 and c < 0xF5 and 4 or nil
    if not len or i + len - 1 > n then return false end
    for j = i + 1, i + len - 1 do
      local d = s:byte(j)
      if d < 0x80 or d > 0xBF then return false end
    end
    i = i + len
  end
  return true
end

--- The contents of the resource `uri` (`resources/read`), or nil and a
-- message saying why it is not given.
function M.read(uri)
  local path, bad = path_of(uri)
  if not path then return nil, bad end
  local media, dir, name = resource_type(path)
  if not media then return nil, dir end
  local too_big = function(size)
    return string.format("%s is %d bytes, more than the %d a read returns: its views come from the report tool "
      .. "(or read the file on the machine the program runs on)", path, size, M.MAX_BYTES)
  end
  local ok, size = native.call(native.raw.clientFile, dir, name)
  if not ok then return nil, size end
  if size > M.MAX_BYTES then return nil, too_big(size) end
  local data
  ok, size, data = native.call(native.raw.clientFile, dir, name, M.MAX_BYTES)
  if not ok then return nil, size end
  local contents = { uri = uri, mimeType = media }
  -- A text file whose bytes are not UTF-8 (a source file named in another
  -- encoding) goes as bytes too.
  if BINARY[media] or not is_utf8(data) then contents.blob = base64(data) else contents.text = data end
  return { contents }
end

return M
