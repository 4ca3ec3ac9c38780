-- Default LÖVE configuration: every module on, audio included. LÖVE's audio
-- module starts with all signals blocked on the main thread, which is the
-- case tecs-profile has to handle (jit.p gets no samples there).
function love.conf(t)
  t.identity = "tecs-profile-example" -- the save directory's name
  t.window.title = "tecs-profile LÖVE example"
  t.window.width = 640
  t.window.height = 360
end
