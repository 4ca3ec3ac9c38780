--- The loading functions a coverage session replaces: `require` (through a
-- searcher placed before Lua's file searcher), `loadfile`, `dofile`, `load`
-- and `loadstring`. Each one rewrites the chunk it is given through
-- `prepare`, and falls back to the original function, with the original
-- arguments, whenever the chunk is not to be rewritten or its rewrite does
-- not load, so errors and results stay exactly those of the original.
-- @module tecs.profile.coverage.loaders

local loaders = {}

local searchers = package.loaders or package.searchers

--- Install the replacements.
-- @param prepare function(source, chunkname) returning the text to load, or
-- nil to load the original; and `loaded(chunkname, ok, err)` told whether
-- the rewritten text loaded
-- @return a function that restores everything
function loaders.install(prepare, loaded)
  local orig = { load = load, loadstring = loadstring, loadfile = loadfile, dofile = dofile }
  local orig_load, orig_loadstring = orig.load, orig.loadstring

  -- The rewritten text, loaded under the original chunk name; nil when the
  -- caller must use the original function.
  local function try(source, chunkname)
    if source:byte(1) == 27 then return nil end -- bytecode
    local text = prepare(source, chunkname)
    if not text then return nil end
    local f, err = orig_loadstring(text, chunkname)
    loaded(chunkname, f ~= nil, err)
    return f
  end

  local function read(path)
    local fh = io.open(path, "rb")
    if not fh then return nil end
    local source = fh:read("*a")
    fh:close()
    return source
  end

  local replaced = {}

  function replaced.loadstring(s, chunkname)
    if type(s) == "string" and (chunkname == nil or type(chunkname) == "string") then
      local f = try(s, chunkname or s)
      if f then return f end
    end
    return orig_loadstring(s, chunkname)
  end

  function replaced.load(chunk, chunkname, mode, env)
    if env ~= nil or (mode ~= nil and mode ~= "t" and mode ~= "bt")
        or (chunkname ~= nil and type(chunkname) ~= "string") then
      return orig_load(chunk, chunkname, mode, env)
    end
    if type(chunk) == "string" then
      local f = try(chunk, chunkname or chunk)
      if f then return f end
      return orig_load(chunk, chunkname, mode)
    elseif type(chunk) ~= "function" then
      return orig_load(chunk, chunkname, mode, env)
    end
    -- A reader is called once: collect its pieces, then load the text (the
    -- original `load` gets it as a string under the reader's default name).
    local pieces = {}
    while true do
      local ok, piece = pcall(chunk)
      if not ok or (piece ~= nil and type(piece) ~= "string") then
        -- The original load gets the same pieces and the same failure.
        local i = 0
        return orig_load(function()
          i = i + 1
          if pieces[i] then return pieces[i] end
          if not ok then error(piece, 0) end
          return piece
        end, chunkname, mode)
      end
      if piece == nil or piece == "" then break end
      pieces[#pieces + 1] = piece
    end
    local source, name = table.concat(pieces), chunkname or "=(load)"
    local f = try(source, name)
    if f then return f end
    return orig_load(source, name, mode)
  end

  function replaced.loadfile(filename, mode, env)
    if type(filename) == "string" and env == nil and (mode == nil or mode == "t" or mode == "bt") then
      local source = read(filename)
      local f = source and try(source, "@" .. filename)
      if f then return f end
    end
    return orig.loadfile(filename, mode, env)
  end

  function replaced.dofile(filename)
    if type(filename) ~= "string" then return orig.dofile(filename) end
    local f, err = replaced.loadfile(filename)
    if not f then error(err, 0) end
    return f()
  end

  -- Finds modules on package.path as Lua's file searcher does; a module it
  -- does not rewrite is left to that searcher, which also reports errors.
  local function searcher(name)
    if type(name) ~= "string" or not package.searchpath then return nil end
    local path = package.searchpath(name, package.path)
    local source = path and read(path)
    return source and try(source, "@" .. path) or nil
  end

  for k, f in pairs(replaced) do rawset(_G, k, f) end
  table.insert(searchers, 2, searcher)

  return function()
    for k, f in pairs(replaced) do
      if rawget(_G, k) == f then rawset(_G, k, orig[k]) end
    end
    for i = #searchers, 1, -1 do
      if searchers[i] == searcher then table.remove(searchers, i) end
    end
  end
end

return loaders
