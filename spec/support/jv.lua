-- Runs LuaJIT with -jv and reads back its abort lines,
-- `[TRACE --- [(parent/exit) ]start -- reason[ at location]]`.
local jv = {}

local vmdef = require("jit.vmdef")

-- Opcode name for "NYI: bytecode <n>" (older -jv prints the number).
local function normalise_reason(reason)
  reason = reason:gsub("%s+$", "")
  local op = reason:match("^NYI: bytecode (%d+)$")
  if op then
    op = tonumber(op)
    return "NYI: bytecode " .. (vmdef.bcnames:sub(op * 6 + 1, op * 6 + 6):gsub("%s+$", ""))
  end
  return (reason:gsub("^(NYI: bytecode %S+)%s+$", "%1"))
end

--- Parse -jv output into a list of aborts `{ reason =, location = }`, the
-- location being where the abort happened (the "at" part, else the start).
function jv.aborts(text)
  local list = {}
  for line in text:gmatch("[^\n]+") do
    local head, tail = line:match("^%[TRACE %-%-%- (.-) %-%- (.*)%]$")
    if head then
      local start = head:gsub("^%(%S+%) ", "")
      local reason, at = tail:match("^(.*) at (%S+)$")
      list[#list + 1] = { reason = normalise_reason(reason or tail), location = at or start }
    end
  end
  return list
end

--- Count aborts by "reason @ location".
function jv.count(list)
  local counts = {}
  for _, a in ipairs(list) do
    local key = a.reason .. " @ " .. a.location
    counts[key] = (counts[key] or 0) + 1
  end
  return counts
end

--- Run `luajit -jv=<tmp> <args>`; returns the -jv text, and the command's
-- success flag.
function jv.run(luajit, args)
  local out = os.tmpname()
  local cmd = string.format("%s -jv=%s %s", luajit, out, args)
  local ok = os.execute(cmd)
  local f = assert(io.open(out, "rb"))
  local text = f:read("*a")
  f:close()
  os.remove(out)
  return text, ok == 0 or ok == true
end

return jv
