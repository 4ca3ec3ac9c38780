--- A `jit.zone` compatible zone stack, for LuaJIT builds that ship without
-- `jit/zone.lua` (some LÖVE builds). `zone(name)` pushes, `zone()` pops and
-- returns the popped name, `zone:get()` reads the top, `zone:flush()` clears.
-- The stack is the table's array part, which is what the sampler reads.
-- @module tecs.profile.zone

local remove = table.remove

local methods = {}

--- The zone on top of the stack, or nil.
function methods.get(t) return t[#t] end

--- Remove every zone.
function methods.flush(t)
  for i = #t, 1, -1 do t[i] = nil end
end

return setmetatable(methods, {
  __call = function(t, name)
    if name ~= nil then
      t[#t + 1] = name
    else
      local top = remove(t)
      if top == nil then error("empty zone stack", 2) end
      return top
    end
  end,
})
