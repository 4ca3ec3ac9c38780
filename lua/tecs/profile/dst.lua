--- The old name of `tecs.profile.new_profiler` (the `newProfiler` object
-- API), kept for code that requires it to call `install()`.
-- @module tecs.profile.dst

return require("tecs.profile.new_profiler")
