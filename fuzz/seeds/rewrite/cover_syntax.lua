#!/usr/bin/env luajit
-- Every syntax point the coverage rewriter must keep working, returning
-- what it computed, the errors it raised and what debug.getinfo said.
local out = {}
local function note(k, v) out[#out + 1] = k .. "=" .. tostring(v) end

local s = [==[ a ]] ]=] ]==] .. [[
x = 1]] --[=[ y = 2
]] ]=] note("long", s)
--[[ if then
]]
local n = 1ULL + 0x10LL + 2ll
note("cdata", tostring(n)) note("imag", tostring(1i))
note("hexfloat", 0x1p4 + 0x.8p-1 + 0xA.8P+1 + 1e+2 + .5)

local function vararg(...)
  local a, b = ...
  return select("#", ...), a, b
end
note("vararg", table.concat({ vararg(1, nil, 3) }, ",", 1, 2))

local obj = { v = 2 }
function obj:get(k)
  return self.v * k
end
function obj.static(a,
                    b)
  return a .. b
end
note("method", obj:get(21)) note("static", obj.static("x", "y"))

local total = 0
for i = 1, 20 do
  if i % 3 == 0 then goto continue end
  do
    local sq = i * i
    total = total + sq
  end
  ::continue::
end
note("goto", total)

local r = 0
while true do
  r = r + 1
  if r > 5 then break end
end
repeat local u = r; r = r - 1 until u < 3
note("loops", r)

local t = {}
local a = 1;
(function() t.x = a end)()
note("ambiguous", t.x)

local function early(x)
  if x then return "yes" elseif x == false then return "no" else return end
end
note("early", tostring(early(true)) .. tostring(early(false)) .. select("#", early()))

local function fails(x)
  local y = x.field
  return y
end
local ok, err = pcall(fails, nil)
note("error", err)
ok, err = pcall(error, "plain", 1)
note("error2", err)
ok, err = pcall(function() local q = {} return q.a.b end)
note("error3", err)

local function where()
  local info = debug.getinfo(1, "Sl")
  local info2 = debug.getinfo(obj.static, "S")
  return info.currentline .. ":" .. info.linedefined .. ":" .. info.lastlinedefined .. ":" ..
    info2.linedefined .. ":" .. info2.lastlinedefined .. ":" .. info.short_src
end
note("getinfo", where())
note("traceback", (debug.traceback("tb", 1):gsub("\n%s*%[C%].*$", "")))

local str = "abc"
note("calls", str:upper() .. #str .. (-#str) .. tostring(not nil) .. ("%d"):format(7))
note("ctor", #{ 1, 2; 3, [10] = 4, k = function() end })

return table.concat(out, "\n")
