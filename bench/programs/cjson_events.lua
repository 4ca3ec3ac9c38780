--- lua-cjson (Debian's lua-cjson) on a stream of game-server events: each
-- event arrives as a JSON message, is decoded (in C), applied to a small
-- world state (players' positions and scores) and answered with a JSON
-- delta, which is dropped, as an OpenResty or game-server handler does per
-- message. Decoding and encoding allocate a table or a string per value,
-- and the live set stays small (the world): most of the time goes to
-- allocating and collecting. MESSAGES messages (default 160000).
local cjson = require("cjson")
local messages = tonumber(arg and arg[1]) or 160000

local KINDS = { "move", "move", "move", "shoot", "chat", "pickup" }
local players = {}
for p = 1, 64 do players[p] = { id = p, x = 0, y = 0, score = 0, hp = 100 } end

-- The i-th message as a client sends it.
local function message(i)
  local kind = KINDS[i % #KINDS + 1]
  local m = { seq = i, kind = kind, player = i % 64 + 1, t = i * 16 }
  if kind == "move" then
    m.to = { x = (i * 37) % 1000 - 500, y = (i * 91) % 1000 - 500 }
    m.path = { { (i * 3) % 100, (i * 7) % 100 }, { (i * 11) % 100, (i * 13) % 100 } }
  elseif kind == "shoot" then
    m.target = (i * 5) % 64 + 1
    m.weapon = "blaster-" .. i % 3
  elseif kind == "chat" then
    m.text = "gg wp " .. i % 1000 .. " see you at the next checkpoint"
  else
    m.item = { kind = "medkit", amount = i % 50 }
  end
  return cjson.encode(m)
end

local sent = 0
for i = 1, messages do
  local m = cjson.decode(message(i))
  local p = players[m.player]
  local delta = { seq = m.seq, player = p.id }
  if m.kind == "move" then
    p.x, p.y = m.to.x, m.to.y
    delta.pos = { p.x, p.y }
  elseif m.kind == "shoot" then
    local target = players[m.target]
    target.hp = target.hp > 10 and target.hp - 10 or 100
    p.score = p.score + 1
    delta.hit = { target = target.id, hp = target.hp }
  elseif m.kind == "chat" then
    delta.say = m.text:sub(1, 32)
  else
    p.hp = math.min(100, p.hp + m.item.amount)
    delta.hp = p.hp
  end
  sent = sent + #cjson.encode(delta)
end
io.stderr:write("cjson_events ", sent, "\n")
