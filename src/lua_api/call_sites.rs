//! The lines of C functions' call sites, corrected by the Lua layer's
//! resolver: a C-state leaf's line is the one the VM had reached, which
//! the resolver may move to the line of the call.

use std::collections::{HashMap, HashSet};

use mlua::Lua;

use crate::record::sampler::Sampler;
use crate::sys::SamplerBox;

/// The call-site resolution of a session: the Lua resolver, the leaves it
/// was asked about, and the lines it corrected.
pub(super) struct CallSites<'a> {
    pub(super) resolver: &'a Option<mlua::Function>,
    pub(super) checked: &'a mut HashSet<Vec<u8>>,
    pub(super) lines: &'a mut HashMap<Vec<u8>, Vec<u8>>,
}

impl CallSites<'_> {
    /// Asks the resolver for the call line of every C-state leaf `sampler`
    /// recorded that was not checked yet; returns whether a line changed.
    pub(super) fn resolve(self, lua: &Lua, sampler: &SamplerBox<Sampler>) -> bool {
        let Some(resolver) = self.resolver.clone() else { return false };
        let checked = &*self.checked;
        let pending: Vec<(Vec<u8>, i32)> = sampler.with(|s| {
            s.call_sites.iter().filter(|(k, _)| !checked.contains(*k)).map(|(k, &v)| (k.clone(), v)).collect()
        });
        let mut changed = false;
        for (site, slot) in pending {
            self.checked.insert(site.clone());
            let (state, leaf) = (site[0], &site[1..]);
            let Some(colon) = leaf.iter().rposition(|&b| b == b':') else { continue };
            let Some(line) = std::str::from_utf8(&leaf[colon + 1..]).ok().and_then(|t| t.parse::<i64>().ok()) else {
                continue;
            };
            let Ok(func) = sampler.with(|s| s.functions.slots()).get(lua, slot) else { continue };
            let state = (state as char).to_string();
            if let Ok(Some(fixed_line)) = resolver.call::<Option<i64>>((func, line, state)) {
                if fixed_line > 0 && fixed_line != line {
                    let mut fixed = leaf[..=colon].to_vec();
                    fixed.extend_from_slice(fixed_line.to_string().as_bytes());
                    self.lines.insert(site, fixed);
                    changed = true;
                }
            }
        }
        changed
    }
}
