--- The MCP revisions `tecs-profile mcp` answers, and what each one's
-- messages carry: the one place a revision is added or told apart. The
-- server (`tecs.profile.mcp`) answers requests; this module says which
-- revision a request is in, whether its method exists there, and what the
-- revision adds to or leaves out of the answer.
--
-- Two eras (the specification's versioning page): handshake revisions
-- (2025-11-25 and earlier: `initialize` picks the revision for the rest of
-- the stdio process) and the stateless 2026-07-28 (no handshake; every
-- request names its revision and the client's capabilities in `_meta`,
-- every result carries `resultType`, and the cacheable ones `ttlMs` and
-- `cacheScope`). A request that names a revision in `_meta` is served in it;
-- any other in the one `initialize` chose, else the newest handshake one.
-- @module tecs.profile.mcp.protocol

local M = {}

--- The revisions answered, newest first. `stateless`: the 2026-07-28 era.
-- `structured`: tool results may carry `structuredContent` and
-- `resource_link` content, tools an `outputSchema` (2025-06-18 on).
M.REVISIONS = {
  { version = "2026-07-28", stateless = true, structured = true },
  { version = "2025-11-25", structured = true },
  { version = "2025-06-18", structured = true },
  { version = "2025-03-26" },
  { version = "2024-11-05" },
}

--- The revisions' names, newest first.
M.VERSIONS = {}
local by_version = {}
for i, r in ipairs(M.REVISIONS) do
  M.VERSIONS[i] = r.version
  by_version[r.version] = r
end

-- The newest handshake revision: what `initialize` answers a client that
-- asks for one it does not know, and how a request is served before any
-- `initialize` (a client that skipped it).
local NEWEST_HANDSHAKE
for _, r in ipairs(M.REVISIONS) do
  if not r.stateless then
    NEWEST_HANDSHAKE = r
    break
  end
end

--- `_meta` keys of the stateless era.
M.KEYS = {
  version = "io.modelcontextprotocol/protocolVersion",
  capabilities = "io.modelcontextprotocol/clientCapabilities",
  serverInfo = "io.modelcontextprotocol/serverInfo",
}

--- JSON-RPC error codes.
M.ERRORS = {
  parse = -32700,
  invalid_request = -32600,
  method_not_found = -32601,
  invalid_params = -32602,
  unsupported_version = -32022,
}

-- How long a client may keep a cacheable result (stateless era): the tools
-- and the server's capabilities change only with tecs-profile itself; the
-- profiles written change at any time.
local STATIC = { ttlMs = 3600 * 1000, cacheScope = "public" }
local FRESH = { ttlMs = 0, cacheScope = "private" }

--- The methods answered: the era that has each one ("handshake",
-- "stateless", or both when nil) and, for a cacheable result, how long it
-- may be cached. The server gives each its function.
M.METHODS = {
  initialize = { era = "handshake" },
  ping = { era = "handshake" },
  ["server/discover"] = { era = "stateless", cache = STATIC },
  ["tools/list"] = { cache = STATIC },
  ["tools/call"] = {},
  ["resources/list"] = { cache = FRESH },
  ["resources/templates/list"] = { cache = STATIC },
  ["resources/read"] = { cache = FRESH },
}

--- The revision `initialize` settles on when a client asks for `asked`:
-- that one if it is a handshake revision answered here, else the newest.
-- @treturn table a row of `REVISIONS`
function M.negotiate(asked)
  local r = by_version[asked]
  if r and not r.stateless then return r end
  return NEWEST_HANDSHAKE
end

local function error_of(code, message, data)
  return { code = code, message = message, data = data }
end

--- The revision `params` puts a request in, or nil and a JSON-RPC error.
-- @param params the request's params
-- @tparam[opt] table chosen the row `initialize` chose for this process
-- @treturn table a row of `REVISIONS`
function M.revision_of(params, chosen)
  local meta = type(params) == "table" and params._meta
  local asked = type(meta) == "table" and meta[M.KEYS.version] or nil
  if asked == nil then return chosen or NEWEST_HANDSHAKE end
  local r = by_version[asked]
  if not (r and r.stateless) then
    -- The specification's own message and data for this error.
    return nil, error_of(M.ERRORS.unsupported_version, "Unsupported protocol version",
      { supported = M.VERSIONS, requested = tostring(asked) })
  end
  if type(meta[M.KEYS.capabilities]) ~= "table" then
    return nil, error_of(M.ERRORS.invalid_params, string.format("_meta must carry %s (an object) with %s",
      M.KEYS.capabilities, M.KEYS.version))
  end
  return r
end

--- Whether `method` is answered in revision `r` (a row of `REVISIONS`).
function M.has(method, r)
  local m = M.METHODS[method]
  if not m then return false end
  return m.era == nil or (m.era == "stateless") == (r.stateless == true)
end

-- Content items of kinds revision `r` has.
local function content_for(content, r)
  if r.structured or type(content) ~= "table" then return content end
  local kept = {}
  for _, c in ipairs(content) do
    if c.type ~= "resource_link" then kept[#kept + 1] = c end
  end
  return kept
end

-- A copy of the tool `t` without the fields revision `r` lacks.
local function tool_for(t, r)
  if r.structured then return t end
  local copy = {}
  for k, v in pairs(t) do
    if k ~= "outputSchema" then copy[k] = v end
  end
  return copy
end

--- `result`, the answer to `method` in revision `r`, as that revision has
-- it: the fields it adds (`resultType`, `ttlMs`, `cacheScope`, the server's
-- name in `_meta`) and without those it lacks.
-- @tparam table server_info `{ name, version }`
function M.shape(result, method, r, server_info)
  if not r.structured then
    result.structuredContent = nil
    result.content = content_for(result.content, r)
    if method == "tools/list" then
      local tools = {}
      for i, t in ipairs(result.tools) do tools[i] = tool_for(t, r) end
      result.tools = tools
    end
  end
  if r.stateless then
    result.resultType = "complete"
    local cache = M.METHODS[method].cache
    if cache then result.ttlMs, result.cacheScope = cache.ttlMs, cache.cacheScope end
    result._meta = result._meta or {}
    result._meta[M.KEYS.serverInfo] = server_info
  end
  return result
end

return M
