//! The collapsed-stack text as a registered format (the text itself is
//! `profile::collapsed`, which sessions also hand out as `collapsed()`).

use super::{Source, Writer};

pub struct Collapsed;

impl Writer for Collapsed {
    fn write(&self, source: Source<'_>) -> Result<Vec<u8>, String> {
        match source {
            Source::Profile(p, _) => Ok(crate::profile::collapsed::write_bytes(p)),
            Source::Timeline(_) => Err(super::wrong_source("collapsed", false)),
        }
    }
}
