-- The LÖVE zip of `make dist` (scripts/dist.sh) dropped into a game, as a
-- game developer would: a game folder with the package beside main.lua, and
-- a .love archive, whose native library LÖVE can only load from the game's
-- save directory (a library inside an archive cannot be loaded). Debian's
-- `love` under `xvfb-run -a`. The game samples until its session holds 100
-- samples, then writes the profile to its save directory and quits.
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")

local q = run.quote

local GAME = [[
local profile = require("tecs.profile")
local session
local function burn(n) local t = 0 for i = 1, n do t = t + math.sin(i) end return t end
function love.load()
  love.filesystem.write("started", "") -- makes the save directory
  session = profile.sample()
end
function love.update()
  burn(2e5)
  if session:stats().samples >= 100 then
    session:stop(love.filesystem.getSaveDirectory() .. "/game.collapsed")
    love.event.quit()
  end
end
]]
local CONF = [[function love.conf(t) t.identity = "tecsdist"; t.window.width = 64; t.window.height = 64 end]]

describe("LÖVE: the zip of make dist in a game", function()
  local base, zip, unpacked

  setup(function()
    base = run.tmpdir()
    local rc, out = run.run("DIST_TARGETS=love DIST_LOVE_PLATFORMS=linux-x86_64 bash scripts/dist.sh")
    assert.equal(0, rc, out)
    zip = out:match("(dist/tecs%-profile%-[%d.]+%-love%.zip)")
    assert.is_string(zip, out)
    unpacked = base .. "/zip"
    rc, out = run.run("unzip -q " .. q(zip) .. " -d " .. q(unpacked))
    assert.equal(0, rc, out)
  end)

  teardown(function()
    if base then os.execute("rm -rf " .. q(base)) end
  end)

  -- Runs love on `target` with the save directories under `data`; returns
  -- the profile the game wrote, or fails with love's output.
  local function play(target, data)
    local rc, out = run.run("env XDG_DATA_HOME=" .. q(data) .. " timeout 60 xvfb-run -a -f " .. q(data .. "/xauth")
      .. " love " .. q(target))
    assert.equal(0, rc, out)
    local text = run.read(data .. "/love/tecsdist/game.collapsed")
    assert.is_string(text, "no profile written:\n" .. out)
    return text
  end

  -- Samples whose stack holds the game's burning loop, and all.
  local function in_burn(text)
    local rows = collapsed.parse(text)
    return collapsed.sum(rows, function(r) return collapsed.has_frame(r, "^main%.lua:3$") end), collapsed.sum(rows)
  end

  it("holds the Lua package and the library where LÖVE's C loader looks (tecs/profile/native.so)", function()
    assert.is_string(run.read(unpacked .. "/tecs/profile.lua"))
    assert.is_string(run.read(unpacked .. "/tecs/utils/profile.lua"))
    assert.is_string(run.read(unpacked .. "/platforms/linux-x86_64/tecs/profile/native.so"))
  end)

  it("profiles a game folder with the package and its platform's library copied beside main.lua", function()
    local game, data = base .. "/folder", base .. "/folder-data"
    assert.equal(0, os.execute("mkdir -p " .. q(game) .. " " .. q(data) .. " && cp -r " .. q(unpacked .. "/tecs") .. " "
      .. q(game) .. "/ && cp -r " .. q(unpacked .. "/platforms/linux-x86_64/tecs") .. " " .. q(game) .. "/"))
    run.write(game .. "/main.lua", GAME)
    run.write(game .. "/conf.lua", CONF)
    local burn, all = in_burn(play(game, data))
    assert.is_true(all >= 100 and burn > 0, ("%d of %d samples in the game's loop"):format(burn, all))
  end)

  it("profiles a .love archive of the game and the package, the library in the game's save directory", function()
    local game, data = base .. "/archive", base .. "/archive-data"
    local save = data .. "/love/tecsdist"
    assert.equal(0, os.execute("mkdir -p " .. q(game) .. " " .. q(save) .. " && cp -r " .. q(unpacked .. "/tecs") .. " "
      .. q(game) .. "/ && cp -r " .. q(unpacked .. "/platforms/linux-x86_64/tecs") .. " " .. q(save) .. "/"))
    run.write(game .. "/main.lua", GAME)
    run.write(game .. "/conf.lua", CONF)
    local rc, out = run.run("cd " .. q(game) .. " && zip -qr ../game.love .")
    assert.equal(0, rc, out)
    local burn, all = in_burn(play(base .. "/game.love", data))
    assert.is_true(all >= 100 and burn > 0, ("%d of %d samples in the game's loop"):format(burn, all))
  end)
end)
