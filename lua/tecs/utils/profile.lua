--- Alias of `tecs.profile` under the name the tecs engine documentation uses.
-- @module tecs.utils.profile
return require("tecs.profile")
