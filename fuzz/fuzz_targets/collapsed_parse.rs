//! The strict collapsed-stack reader on arbitrary bytes: it must return a
//! profile or an error naming a line, never panic; what it accepts must
//! write back to text that reads again to the same rows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tecs_profile::profile::collapsed;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match collapsed::parse(&text) {
        Ok(p) => {
            let written = collapsed::write(&p);
            let again = collapsed::parse(&written).expect("written text reads back");
            assert_eq!(again.total(), p.total());
            assert_eq!(again.rows.len(), p.rows.len());
            assert_eq!(collapsed::write(&again), written, "write/parse is stable");
        }
        Err(e) => {
            assert!(e.line >= 1 && e.line <= text.lines().count().max(1));
            assert!(!e.message.is_empty());
        }
    }
});
