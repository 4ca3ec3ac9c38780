//! Millions of distinct stacks cannot grow the stack table past its cap: the
//! entry count and the byte size stop growing, and every further sample is
//! counted as overflow.

use tecs_profile::profile::stack_table::{Key, StackTable};

fn key(buf: &mut Vec<u8>, i: u64) {
    Key::begin(buf);
    buf.extend_from_slice(b"zone/path");
    Key::end_path(buf);
    buf.extend_from_slice(format!("generated/{}.lua:1\x1fmain.lua:10", i).as_bytes());
}

#[test]
fn two_million_distinct_stacks_stay_within_the_cap() {
    let cap = 100_000;
    let mut t = StackTable::new(cap);
    let mut buf = Vec::new();
    let mut mem_at_cap = 0;
    for i in 0..2_000_000u64 {
        key(&mut buf, i);
        t.add(&buf, 0, 1);
        if i as usize == cap {
            mem_at_cap = t.memory_bytes();
        }
    }
    assert_eq!(t.len(), cap);
    assert_eq!(t.overflow_total(), 2_000_000 - cap as u64);
    assert_eq!(t.memory_bytes(), mem_at_cap, "no growth after the cap");
    assert!(t.memory_bytes() < 32 << 20, "table bytes: {}", t.memory_bytes());
    // Stacks seen before the cap keep counting.
    key(&mut buf, 7);
    t.add(&buf, 1, 5);
    let e = t.iter().nth(7).unwrap().1;
    assert_eq!(e.counts, [1, 5, 0, 0, 0]);
}

#[test]
fn the_byte_budget_bounds_huge_keys() {
    let mut t = StackTable::new(4);
    let mut buf = Vec::new();
    for i in 0..1000u64 {
        Key::begin(&mut buf);
        Key::end_path(&mut buf);
        buf.extend_from_slice(&vec![b'a' + (i % 26) as u8; 400 * 1024]);
        buf.extend_from_slice(&i.to_le_bytes());
        t.add(&buf, 2, 1);
    }
    assert!(t.len() <= 4);
    assert!(t.memory_bytes() <= StackTable::byte_budget(4) + (1 << 20));
    assert_eq!(t.len() as u64 + t.overflow_total(), 1000);
}
