--- The busted helper under the name busted is given
-- (`busted --helper=tecs.profile.busted`): `tecs.profile.host.busted`.
-- @module tecs.profile.busted
return require("tecs.profile.host.busted")
