//! The order of a profile's rows: count descending, then zone path, then
//! stack, where names compare as text and lists of names element by
//! element (what comparing `Vec<String>`s gives).
//!
//! Comparing two stacks means finding the first frame where their ids
//! differ and comparing those two names, which are anywhere in memory. So
//! each row carries a sort key that settles most comparisons without
//! touching its stack: the frames every stack starts with are skipped, and
//! the key holds 15 bytes of the name at the first frame where stacks can
//! differ, from the first byte where those names can differ. The key is 32
//! bytes, and comparing two is three integer comparisons. Most keys are
//! not compared at all: a 64-bit digest of each orders them first (a radix
//! sort), and only keys with equal digests are compared.

use std::cmp::Ordering;

use super::Profile;

#[derive(Clone, Copy)]
struct SortKey {
    /// 15 bytes of the name at frame `shared`, from byte `lcp`, zero padded,
    /// then one byte: how many bytes the name has from `lcp`, capped at 16
    /// (meaning "more than the chunk holds"). Zero for a stack without
    /// frame `shared`.
    chunk: u128,
    total: u64,
    /// Zone path rank, times two, plus one when the stack has frame `shared`
    /// (stacks that end before it come first).
    zone: u32,
    row: u32,
}

/// The [`SortKey::chunk`] of `name`, from byte `at`.
fn chunk_key(name: &[u8], at: usize) -> u128 {
    let tail = &name[at.min(name.len())..];
    let mut buf = [0u8; 16];
    let n = tail.len().min(15);
    buf[..n].copy_from_slice(&tail[..n]);
    buf[15] = tail.len().min(16) as u8;
    u128::from_be_bytes(buf)
}

/// Sorts (digest, row) pairs by digest, keeping the order of equal ones:
/// least significant byte first, skipping bytes every digest shares.
pub(super) fn radix_sort(items: &mut Vec<(u64, u32)>) {
    // How many digests have each value of each byte: the same in every
    // order, so counted for all eight bytes in one pass.
    let mut counts = vec![[0usize; 256]; 8];
    for &(d, _) in items.iter() {
        for (byte, c) in counts.iter_mut().enumerate() {
            c[(d >> (byte * 8)) as usize & 0xff] += 1;
        }
    }
    // Every pass stores to every place of `other`, so it is never cleared.
    let mut other: Vec<(u64, u32)> = Vec::new();
    for (byte, c) in counts.iter_mut().enumerate() {
        if c.contains(&items.len()) {
            continue;
        }
        if other.is_empty() {
            // Fresh zero pages from the allocator, huge once touched.
            other = vec![(0, 0); items.len()];
            super::host::advise_huge_pages(&mut other);
        }
        let mut sum = 0;
        for slot in c.iter_mut() {
            let here = *slot;
            *slot = sum;
            sum += here;
        }
        let shift = byte * 8;
        for &item in items.iter() {
            let slot = &mut c[(item.0 >> shift) as usize & 0xff];
            other[*slot] = item;
            *slot += 1;
        }
        std::mem::swap(items, &mut other);
    }
}

fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Profile {
    /// Sorts the rows: count descending, then zone path, then stack. Rows
    /// equal in all three keep their order.
    pub fn sort(&mut self) {
        let mut zone_order: Vec<u32> = (0..self.zone_paths.len() as u32).collect();
        zone_order.sort_by(|&a, &b| self.cmp_names(&self.zone_paths[a as usize], &self.zone_paths[b as usize]));
        let mut zone_rank = vec![0u32; zone_order.len()];
        for (r, &z) in zone_order.iter().enumerate() {
            zone_rank[z as usize] = r as u32;
        }

        // Frames every stack starts with, and bytes every name at the next
        // frame starts with.
        let mut stacks = self.rows.iter().map(|r| self.stack(r));
        let first = stacks.next().unwrap_or(&[]);
        let shared =
            stacks.fold(first.len(), |n, s| if s.starts_with(&first[..n]) { n } else { common_prefix(&first[..n], s) });
        let mut names_at = self.rows.iter().filter_map(|r| self.stack(r).get(shared).map(|&id| self.name(id)));
        let first = names_at.next().unwrap_or("").as_bytes();
        let lcp = names_at.fold(first.len(), |n, s| {
            if s.as_bytes().starts_with(&first[..n]) {
                n
            } else {
                common_prefix(&first[..n], s.as_bytes())
            }
        });

        let n = self.rows.len();
        let mut keys: Vec<SortKey> = super::large_vec(n);
        keys.extend(self.rows.iter().enumerate().map(|(i, r)| {
            let (chunk, present) = match self.stack(r).get(shared) {
                Some(&id) => (chunk_key(self.name(id).as_bytes(), lcp), 1),
                None => (0, 0),
            };
            SortKey { chunk, total: r.total(), zone: zone_rank[r.zone as usize] * 2 + present, row: i as u32 }
        }));

        // First by a 64-bit digest of each key: the rank of its count among
        // the distinct counts (descending), its zone, and as many leading
        // bits of its chunk as are left. Digests order like the keys they
        // come from, so a radix sort of (digest, row) pairs (a few passes
        // over 16-byte items, no comparisons) leaves only keys with equal
        // digests to compare, in runs that are mostly short.
        let mut totals: Vec<u64> = keys.iter().map(|k| k.total).collect();
        totals.sort_unstable_by(|a, b| b.cmp(a));
        totals.dedup();
        let bits = |values: usize| usize::BITS - values.saturating_sub(1).leading_zeros();
        let (total_bits, zone_bits) = (bits(totals.len()), bits(zone_rank.len() * 2));
        // (Never more than 64 bits for the count and the zone in practice;
        // if so, every digest is 0 and the keys are compared.)
        let fits = total_bits + zone_bits <= 64;
        let chunk_bits = 64u32.saturating_sub(total_bits + zone_bits);
        let mut digests: Vec<(u64, u32)> = super::large_vec(n);
        digests.extend(keys.iter().map(|k| {
            let rank = totals.binary_search_by(|t| k.total.cmp(t)).unwrap_or(0) as u128;
            let chunk = k.chunk.checked_shr(128 - chunk_bits).unwrap_or(0);
            let digest = (rank << (zone_bits + chunk_bits)) | ((k.zone as u128) << chunk_bits) | chunk;
            (if fits { digest as u64 } else { 0 }, k.row)
        }));
        drop(totals);
        radix_sort(&mut digests);
        let full = |a: &SortKey, b: &SortKey| {
            (b.total, a.zone, a.chunk)
                .cmp(&(a.total, b.zone, b.chunk))
                .then_with(|| {
                    // Equal keys: the names at `shared` are equal unless
                    // they go on past the chunk; compare from there on.
                    let sa = self.stack(&self.rows[a.row as usize]);
                    let sb = self.stack(&self.rows[b.row as usize]);
                    let from = shared.min(sa.len());
                    self.cmp_names(&sa[from..], &sb[from.min(sb.len())..])
                })
                .then(a.row.cmp(&b.row))
        };
        // A run's keys are copied out once, not looked up per comparison.
        let mut run: Vec<SortKey> = Vec::new();
        let mut at = 0;
        while at < n {
            let end = at + digests[at..].iter().take_while(|d| d.0 == digests[at].0).count();
            if end - at > 1 {
                run.clear();
                run.extend(digests[at..end].iter().map(|d| keys[d.1 as usize]));
                run.sort_unstable_by(full);
                for (d, key) in digests[at..end].iter_mut().zip(&run) {
                    d.1 = key.row;
                }
            }
            at = end;
        }
        drop(keys);

        // Row `digests[k].1` goes to place `k`: gathered into a new list in
        // a loop of nothing but these reads, whose cache misses overlap
        // (moving rows in place, cycle by cycle, waits for each in turn).
        let mut sorted: Vec<super::Row> = super::large_vec(n);
        sorted.extend(digests.iter().map(|d| self.rows[d.1 as usize]));
        self.rows = sorted;
    }

    /// Compares two lists of name ids as lists of names.
    fn cmp_names(&self, a: &[u32], b: &[u32]) -> Ordering {
        for (&x, &y) in a.iter().zip(b) {
            if x != y {
                // Ids are equal exactly when names are.
                return self.name(x).cmp(self.name(y));
            }
        }
        a.len().cmp(&b.len())
    }
}

#[cfg(test)]
mod tests {
    use crate::profile::collapsed;

    fn sorted(text: &str) -> String {
        let mut p = collapsed::parse(text).unwrap();
        p.sort();
        collapsed::write(&p)
    }

    #[test]
    fn orders_names_as_text_and_stacks_as_lists() {
        // Long shared prefixes, names that are prefixes of others, a name
        // with a NUL and one with bytes past the 16 the key holds.
        let mut lines = vec![
            "m.lua:1;/very/long/shared/path/to/a/file.lua:1234567890123_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:1234567890124_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:123456789012_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:12;x.lua:2_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:12;x.lua:1_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:12_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:1\0_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:1_[N] 1",
            "m.lua:1_[N] 1",
            "m.lua:1;/very/long/shared/path/to/b/file.lua:1_[N] 1",
            "z;m.lua:1;/very/long/shared/path/to/a/file.lua:1_[N] 1",
            "m.lua:1;/very/long/shared/path/to/a/file.lua:1_[I] 2",
        ];
        let text: String = lines.iter().map(|l| format!("{}\n", l)).collect();
        let got = sorted(&text);
        // The reference order: counts descending, then lists of strings.
        lines.sort_by(|a, b| {
            let parse = |l: &str| -> (u64, Vec<String>, Vec<String>) {
                let (frames, n) = l.rsplit_once(' ').unwrap();
                let frames = &frames[..frames.len() - "_[N]".len()];
                let parts: Vec<String> = frames.split(';').map(str::to_string).collect();
                let nz = usize::from(parts[0] == "z");
                (n.parse().unwrap(), parts[..nz].to_vec(), parts[nz..].to_vec())
            };
            let (pa, pb) = (parse(a), parse(b));
            pb.0.cmp(&pa.0).then_with(|| (pa.1, pa.2).cmp(&(pb.1, pb.2)))
        });
        let want: String = lines.iter().map(|l| format!("{}\n", l)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn many_counts_and_zones_order_as_the_reference() {
        // Counts from 1 to past what 32 bits hold, four zone paths, stacks
        // that share frames and long name prefixes, and repeated rows.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let zones = ["", "z;", "z;y;", "w;"];
        let counts = [1u64, 2, 3, 7, 1 << 33, u64::MAX, 40];
        let lines: Vec<(u64, String, String)> = (0..3000)
            .map(|_| {
                let depth = 1 + next(4) as usize;
                let frames: Vec<String> =
                    (0..depth).map(|_| format!("/long/shared/dir/f{}.lua:{}", next(3), next(40))).collect();
                let zone = zones[next(4) as usize].to_string();
                (counts[next(7) as usize], zone, frames.join(";"))
            })
            .collect();
        let text: String = lines.iter().map(|(n, z, f)| format!("{}{}_[N] {}\n", z, f, n)).collect();
        let got = sorted(&text);
        let mut want = lines.clone();
        // Stable: equal rows keep their order, as the sort promises.
        want.sort_by(|a, b| {
            let list = |s: &str| s.split(';').filter(|p| !p.is_empty()).map(str::to_string).collect::<Vec<_>>();
            b.0.cmp(&a.0).then_with(|| (list(&a.1), list(&a.2)).cmp(&(list(&b.1), list(&b.2))))
        });
        let want: String = want.iter().map(|(n, z, f)| format!("{}{}_[N] {}\n", z, f, n)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn empty_and_single_row_profiles() {
        assert_eq!(sorted(""), "");
        assert_eq!(sorted("<root>_[C] 3\n"), "<root>_[C] 3\n");
        assert_eq!(sorted("a.lua:1_[N] 1\n<root>_[C] 1\n"), "<root>_[C] 1\na.lua:1_[N] 1\n");
    }
}
