//! What a text view's counts are, and how it shows them: samples, whose
//! shares carry their sampling error, or bytes (the `unit` option).

use super::{pct, share_error};

/// What a profile's counts are (the `unit` option of the text views).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Unit {
    #[default]
    Samples,
    Bytes,
}

impl Unit {
    /// The names the `unit` option takes, in the order of the enum.
    pub const NAMES: &'static [&'static str] = &["samples", "bytes"];

    pub fn parse(name: &str) -> Option<Unit> {
        match name {
            "samples" => Some(Unit::Samples),
            "bytes" => Some(Unit::Bytes),
            _ => None,
        }
    }

    /// The name, as the header of a view says it (`# 512 bytes; ...`).
    pub fn name(self) -> &'static str {
        Unit::NAMES[self as usize]
    }
}

/// A count as a view shows it: the count itself (`raw`), its share, and
/// the share's sampling error when the counts are samples.
pub(super) fn fmt_value(v: u64, of: u64, raw: bool, unit: Unit) -> String {
    if raw {
        format!("{}", v)
    } else if unit == Unit::Bytes {
        format!("{:.1}%", pct(v, of))
    } else {
        format!("{:.1}% ±{:.1}", pct(v, of), share_error(v, of))
    }
}
