//! The lines of C functions' call sites, corrected by the Lua layer's
//! resolver: a C-state leaf's line is the one the VM had reached, which
//! the resolver may move to the line of the call. Which leaves were asked
//! about and the lines corrected are the recorder's
//! (`session::state::CallSiteFixes`); asking needs the Lua state (the
//! resolver is a Lua function, called with the leaf's function).

use mlua::Lua;

use crate::record::sampler::Sampler;
use crate::session::state::CallSiteFixes;
use crate::sys::SamplerBox;

/// The call-site resolution of a session: the Lua resolver, and what it
/// was asked and answered.
pub(super) struct CallSites<'a> {
    pub(super) resolver: &'a Option<mlua::Function>,
    pub(super) fixes: &'a mut CallSiteFixes,
}

impl CallSites<'_> {
    /// Asks the resolver for the call line of every C-state leaf `sampler`
    /// recorded that was not checked yet; returns whether a line changed.
    pub(super) fn resolve(self, lua: &Lua, sampler: &SamplerBox<Sampler>) -> bool {
        let Some(resolver) = self.resolver.clone() else { return false };
        let fixes = &*self.fixes;
        let pending = sampler.with(|s| fixes.pending(&s.call_sites));
        let mut changed = false;
        for (site, slot) in pending {
            let Some((state, line)) = self.fixes.check(&site) else { continue };
            let Ok(func) = sampler.with(|s| s.functions.slots()).get(lua, slot) else { continue };
            if let Ok(Some(fixed_line)) = resolver.call::<Option<i64>>((func, line, state.to_string())) {
                changed |= self.fixes.fix(&site, fixed_line);
            }
        }
        changed
    }
}
