//! An allocation session's objects and live blocks as profiles: the
//! objects estimated per stack (all, or since a mark `delta` keeps), and
//! the bytes, objects and sample points of the tracked blocks not freed.
//! No Lua: `lua_api` turns them into its values.

use tecs_profile_format::profile::stack_table::StackTable;
use tecs_profile_format::profile::Profile;

use super::timed::{in_bytes, SessionView};
use crate::record::alloc_live::LiveBlock;

/// The objects estimated per entry of an allocation session's table.
pub type ObjectsMark = Vec<[f64; 5]>;

/// The objects of `table`'s entries since `mark` (`objects(i)` is entry
/// `i`'s now; entries past the mark's end count from zero), rounded to
/// whole objects, and the mark of now.
pub fn objects_since(
    table: &StackTable,
    objects: impl Fn(usize) -> [f64; 5],
    mark: &[[f64; 5]],
) -> (StackTable, ObjectsMark) {
    let mut out = StackTable::new(table.len().max(1));
    let mut now = Vec::with_capacity(table.len());
    for (i, (key, _)) in table.iter().enumerate() {
        let weights = objects(i);
        let then = mark.get(i).copied().unwrap_or_default();
        for (state, (w, t)) in weights.iter().zip(then).enumerate() {
            let n = (w - t).round().clamp(0.0, u32::MAX as f64) as u32;
            if n > 0 {
                out.add(key, state, n);
            }
        }
        now.push(weights);
    }
    (out, now)
}

/// The sample points and the objects (rounded) of the live `blocks`, by
/// `table`'s stacks; blocks of no entry of it are left out.
pub fn live_tables(table: &StackTable, blocks: &[LiveBlock]) -> (StackTable, StackTable) {
    let n = table.len().max(1);
    let mut per = vec![([0u64; 5], [0f64; 5]); table.len()];
    for b in blocks {
        if let Some(p) = per.get_mut(b.entry as usize) {
            let state = (b.state as usize).min(4);
            p.0[state] += u64::from(b.points);
            p.1[state] += b.objects;
        }
    }
    let (mut points, mut objects) = (StackTable::new(n), StackTable::new(n));
    for ((key, _), (counts, weights)) in table.iter().zip(&per) {
        for state in 0..5 {
            if counts[state] > 0 {
                points.add(key, state, counts[state].min(u32::MAX as u64) as u32);
            }
            let w = weights[state].round().min(u32::MAX as f64) as u32;
            if w > 0 {
                objects.add(key, state, w);
            }
        }
    }
    (points, objects)
}

impl SessionView<'_> {
    /// `t` with the call-site correction applied, named as the profile
    /// names frames.
    fn named(&self, t: StackTable) -> Profile {
        let t = if self.call_site_lines.is_empty() { t } else { t.with_leaves_replaced(self.call_site_lines) };
        Profile::from_table(&t, &mut self.namer())
    }

    /// The estimated objects allocated per stack since `mark` (see
    /// [`objects_since`]), and the mark of now; None for a sampling
    /// session.
    pub fn objects_since(&self, mark: &[[f64; 5]]) -> Option<(Profile, ObjectsMark)> {
        self.session.alloc_hook()?;
        let (table, now) = self.session.sampler().with(|s| {
            let objects = s.objects.as_ref()?;
            Some(objects_since(&s.table, |i| objects.entry(i), mark))
        })?;
        Some((self.named(table), now))
    }

    /// The bytes, the objects and the sample points of the tracked blocks
    /// not freed (at the stop, or now), per stack; None for a sampling
    /// session or one that tracks no block.
    pub fn live_profiles(&self) -> Option<(Profile, Profile, Profile)> {
        let (blocks, _) = self.session.alloc_hook()?.live()?;
        let (points, objects) = self.session.sampler().with(|s| live_tables(&s.table, &blocks));
        let points = self.named(points);
        let bytes = in_bytes(points.clone(), self.session.bytes_per_sample().unwrap_or(1));
        Some((bytes, self.named(objects), points))
    }
}

#[cfg(test)]
mod tests {
    use tecs_profile_format::profile::stack_table::{Key, StackTable};

    use super::{live_tables, objects_since, LiveBlock};

    fn table(stacks: &[&str]) -> StackTable {
        let mut t = StackTable::new(16);
        for s in stacks {
            let mut key = Vec::new();
            Key::begin(&mut key);
            Key::end_path(&mut key);
            key.extend_from_slice(s.as_bytes());
            t.add(&key, 0, 1);
        }
        t
    }

    /// Each entry's counts by state, in table order.
    fn counts(t: &StackTable) -> Vec<(String, Vec<u64>)> {
        t.iter()
            .map(|(k, e)| {
                (String::from_utf8_lossy(Key::stack(k)).into_owned(), e.counts.iter().map(|&c| c as u64).collect())
            })
            .collect()
    }

    #[test]
    fn objects_since_count_from_the_mark_and_round() {
        let t = table(&["a.lua:1", "b.lua:2"]);
        let now = [[2.6, 0.0, 0.0, 0.0, 1.0], [4.0, 0.4, 0.0, 0.0, 0.0]];
        let (all, mark) = objects_since(&t, |i| now[i], &[]);
        assert_eq!(mark, now.to_vec());
        assert_eq!(
            counts(&all),
            vec![("a.lua:1".into(), vec![3, 0, 0, 0, 1]), ("b.lua:2".into(), vec![4, 0, 0, 0, 0])]
        );
        // Since a mark of the first entry only: the second counts from zero.
        let (since, _) = objects_since(&t, |i| now[i], &[[1.0, 0.0, 0.0, 0.0, 1.0]]);
        assert_eq!(
            counts(&since),
            vec![("a.lua:1".into(), vec![2, 0, 0, 0, 0]), ("b.lua:2".into(), vec![4, 0, 0, 0, 0])]
        );
        // Nothing new: an empty table.
        let (none, _) = objects_since(&t, |i| now[i], &mark);
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn live_blocks_sum_by_stack_and_state() {
        let t = table(&["a.lua:1", "b.lua:2"]);
        let block = |entry, state, points, objects| LiveBlock { entry, state, points, objects };
        let blocks = [block(0, 0, 2, 1.5), block(0, 0, 1, 1.0), block(1, 9, 4, 0.2), block(7, 0, 5, 5.0)];
        let (points, objects) = live_tables(&t, &blocks);
        // A state past the last is the last's; an entry the table lacks is left out.
        assert_eq!(
            counts(&points),
            vec![("a.lua:1".into(), vec![3, 0, 0, 0, 0]), ("b.lua:2".into(), vec![0, 0, 0, 0, 4])]
        );
        assert_eq!(counts(&objects), vec![("a.lua:1".into(), vec![3, 0, 0, 0, 0])]);
    }
}
