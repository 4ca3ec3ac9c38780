//! The name table of a profile: every distinct frame and zone name, stored
//! once, numbered by a `u32` id. Rows refer to names by id, so equal frames
//! compare and hash as integers and each name's bytes exist once.

use hashbrown::HashTable;

#[derive(Clone)]
pub struct Names {
    /// Every name back to back.
    text: String,
    /// Where name `id` lies in `text`.
    spans: Vec<(usize, usize)>,
    /// Hash of name `id`, kept so the index grows without rehashing text.
    hashes: Vec<u64>,
    index: HashTable<u32>,
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
        Names {
            text: String::with_capacity(bytes),
            spans: Vec::with_capacity(names),
            hashes: Vec::with_capacity(names),
            index: HashTable::with_capacity(names),
            // Fixed seeds: the same input always gives the same ids.
            hasher: ahash::RandomState::with_seeds(0x6e61, 0x6d65, 0x7374, 0x6162),
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The name numbered `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &str {
        let (start, end) = self.spans[id as usize];
        &self.text[start..end]
    }

    /// The bytes of name `id` (no check of `str` boundaries, for copying).
    #[inline]
    pub fn bytes(&self, id: u32) -> &[u8] {
        let (start, end) = self.spans[id as usize];
        &self.text.as_bytes()[start..end]
    }

    /// The id of `name`, if the table holds it.
    pub fn find(&self, name: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(name.as_bytes());
        let (text, spans) = (&self.text, &self.spans);
        self.index.find(hash, |&i| span_text(text, spans, i) == name).copied()
    }

    /// The id of `name`, added when new. The second value says whether the
    /// name was already there.
    #[inline]
    pub fn intern(&mut self, name: &str) -> (u32, bool) {
        let hash = self.hasher.hash_one(name.as_bytes());
        let (text, spans) = (&self.text, &self.spans);
        if let Some(&i) = self.index.find(hash, |&i| span_text(text, spans, i) == name) {
            return (i, true);
        }
        let id = self.spans.len() as u32;
        let start = self.text.len();
        self.text.push_str(name);
        self.spans.push((start, self.text.len()));
        self.hashes.push(hash);
        let hashes = &self.hashes;
        self.index.insert_unique(hash, id, |&i| hashes[i as usize]);
        (id, false)
    }
}

#[inline]
fn span_text<'a>(text: &'a str, spans: &[(usize, usize)], id: u32) -> &'a str {
    let (start, end) = spans[id as usize];
    &text[start..end]
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
