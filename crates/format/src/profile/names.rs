//! The name table of a profile: every distinct frame and zone name, stored
//! once, numbered by a `u32` id. Rows refer to names by id, so equal frames
//! compare and hash as integers and each name's bytes exist once.

#[derive(Clone)]
pub struct Names {
    /// Every name back to back.
    text: String,
    /// Name `id` lies in `text` from `ends[id]` to `ends[id + 1]` (one
    /// offset per name, not two: half the memory to fill).
    ends: Vec<usize>,
    /// Open addressing with linear probing, at most half full: each slot is
    /// (high half of the name's hash, id + 1), 0 marking a free slot. A
    /// slot holds both, so a lookup of a new name (the common case while a
    /// profile is built) costs one cache line, not a control byte and a
    /// separate entry.
    index: Vec<(u32, u32)>,
    hasher: ahash::RandomState,
}

impl Default for Names {
    fn default() -> Self {
        Names::with_capacity(0, 0)
    }
}

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries((0..self.len() as u32).map(|i| self.get(i))).finish()
    }
}

impl Names {
    /// Room for `names` names of `bytes` bytes in all.
    pub fn with_capacity(names: usize, bytes: usize) -> Names {
        let slots = (names * 2).max(16).next_power_of_two();
        // Zeroed by the allocator: fresh pages are zero already, and are
        // only filled where names land (asked for as huge pages first).
        let mut index = vec![(0, 0); slots];
        super::host::advise_huge_pages(&mut index);
        let mut ends = super::large_vec(names + 1);
        ends.push(0);
        Names {
            text: String::from_utf8(super::large_vec(bytes)).unwrap_or_default(),
            ends,
            index,
            // Fixed seeds: the same input always gives the same ids.
            hasher: ahash::RandomState::with_seeds(0x6e61, 0x6d65, 0x7374, 0x6162),
        }
    }

    pub fn len(&self) -> usize {
        self.ends.len() - 1
    }

    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name numbered `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &str {
        let id = id as usize;
        &self.text[self.ends[id]..self.ends[id + 1]]
    }

    /// The bytes of name `id` (no check of `str` boundaries, for copying).
    #[inline]
    pub fn bytes(&self, id: u32) -> &[u8] {
        let id = id as usize;
        &self.text.as_bytes()[self.ends[id]..self.ends[id + 1]]
    }

    /// The hash [`Names::intern_hashed`] takes.
    #[inline]
    pub fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name.as_bytes())
    }

    /// Reads the first slot a name of hash `hash` would be looked up in, and
    /// returns what it holds. Called ahead of [`Names::intern_hashed`] for a
    /// batch of names, so that the cache misses of their lookups overlap
    /// instead of coming one after another.
    #[inline]
    pub fn touch(&self, hash: u64) -> u32 {
        self.index[hash as usize & (self.index.len() - 1)].1
    }

    /// The slot holding `name`, or the free slot where it would go.
    #[inline]
    fn slot(&self, name: &str, hash: u64) -> (usize, u32) {
        let tag = (hash >> 32) as u32;
        let mask = self.index.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let (t, id1) = self.index[i];
            if id1 == 0 || (t == tag && self.bytes(id1 - 1) == name.as_bytes()) {
                return (i, tag);
            }
            i = (i + 1) & mask;
        }
    }

    /// The id of `name`, if the table holds it.
    pub fn find(&self, name: &str) -> Option<u32> {
        let (i, _) = self.slot(name, self.hash(name));
        self.index[i].1.checked_sub(1)
    }

    /// The id of `name`, added when new. The second value says whether the
    /// name was already there.
    #[inline]
    pub fn intern(&mut self, name: &str) -> (u32, bool) {
        self.intern_hashed(name, self.hash(name))
    }

    /// [`Names::intern`] with `hash` = [`Names::hash`] of `name`.
    #[inline]
    pub fn intern_hashed(&mut self, name: &str, hash: u64) -> (u32, bool) {
        let (i, tag) = self.slot(name, hash);
        if let Some(id) = self.index[i].1.checked_sub(1) {
            return (id, true);
        }
        let id = self.len() as u32;
        self.text.push_str(name);
        self.ends.push(self.text.len());
        self.index[i] = (tag, id + 1);
        if self.len() * 2 > self.index.len() {
            self.grow();
        }
        (id, false)
    }

    /// Doubles the index (hashing every name again: sizes given to
    /// [`Names::with_capacity`] make this rare).
    fn grow(&mut self) {
        let size = self.index.len() * 2;
        self.index = vec![(0, 0); size];
        for id in 0..self.len() as u32 {
            let name = self.get(id);
            let (i, tag) = self.slot(name, self.hash(name));
            self.index[i] = (tag, id + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_each_name_once() {
        let mut n = Names::default();
        let words = ["b", "a", "a\0", "", "/home/dev/game/src/module_1.lua:10", "a", "b"];
        let ids: Vec<(u32, bool)> = words.iter().map(|s| n.intern(s)).collect();
        assert_eq!(n.len(), 5);
        assert_eq!(ids[5], (ids[1].0, true));
        assert_eq!(ids[6], (ids[0].0, true));
        assert!(!ids[2].1);
        for (s, (id, _)) in words.iter().zip(&ids) {
            assert_eq!(n.get(*id), *s);
            assert_eq!(n.find(s), Some(*id));
        }
        assert_eq!(n.find("c"), None);
    }
}
