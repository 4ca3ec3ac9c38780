//! Interactive SVG flamegraphs, rendered by the `inferno` crate from the
//! profile's collapsed lines.
//!
//! Colours say what a frame is: zone frames are aqua, leaf frames are
//! coloured by their VM state (compiled green, interpreted pink, C code
//! yellow-grey, garbage collector purple, JIT compiler blue), and the other
//! Lua frames use the classic red-yellow palette. Colours of Lua frames are
//! derived from their names, so the same input always gives the same SVG.

use std::collections::BTreeSet;

use inferno::flamegraph::color::{BasicPalette, Color, PaletteMap};
use inferno::flamegraph::{self as fg, Palette};

use crate::profile::collapsed;
use crate::profile::Profile;
use crate::record::stack_table::state_index;

pub const ZONE_COLOR: Color = Color { r: 0x6c, g: 0xcf, b: 0xd6 };

/// Fill colour of a leaf frame in VM state `state`.
pub fn state_color(state: u8) -> Color {
    match state {
        b'N' => Color { r: 0x5f, g: 0xc4, b: 0x5f },
        b'I' => Color { r: 0xee, g: 0x6f, b: 0xb0 },
        b'C' => Color { r: 0xc8, g: 0xbe, b: 0x8c },
        b'G' => Color { r: 0xa0, g: 0x7c, b: 0xe0 },
        _ => Color { r: 0x5a, g: 0x93, b: 0xe6 },
    }
}

#[derive(Clone, Debug)]
pub struct FlameOptions {
    pub title: String,
    /// Unit of the counts, shown on hover ("samples").
    pub count_name: String,
    /// Icicle graph: roots at the top.
    pub inverted: bool,
    /// Frames narrower than this many pixels are left out.
    pub min_width: f64,
}

impl Default for FlameOptions {
    fn default() -> Self {
        FlameOptions { title: "tecs-profile".into(), count_name: "samples".into(), inverted: false, min_width: 0.1 }
    }
}

const LEGEND: &str =
    "leaf VM state: green compiled, pink interpreted, sand C, purple GC, blue JIT compiler; aqua: zones";

/// The collapsed text inferno reads. Inferno adds the counts up in a plain
/// u64; when they overflow one, each row (in profile order) keeps only what
/// is left below `u64::MAX`, so the graph's total saturates the way every
/// other view's does (see `profile::sum_counts`).
fn inferno_input(profile: &Profile) -> String {
    if profile.rows.iter().try_fold(0u64, |a, r| a.checked_add(r.total())).is_some() {
        return collapsed::write(profile);
    }
    let mut clipped = profile.clone();
    let mut room = u64::MAX;
    for row in clipped.rows.iter_mut() {
        let n = row.total().min(room);
        room -= n;
        let state = row.dominant_state();
        row.counts = [0; 5];
        row.counts[state_index(state)] = n;
    }
    clipped.rows.retain(|r| r.total() > 0);
    collapsed::write(&clipped)
}

/// Renders `profile` as an SVG document.
pub fn render(profile: &Profile, opts: &FlameOptions) -> Result<String, String> {
    let text = inferno_input(profile);
    let mut palette = PaletteMap::default();
    let mut zones: BTreeSet<&str> = BTreeSet::new();
    for z in 0..profile.zone_path_count() as u32 {
        zones.extend(profile.zone_path(z).iter().map(|&id| profile.name(id)));
    }
    for z in &zones {
        palette.insert(*z, ZONE_COLOR);
    }
    // The leaf frame, VM-state marker included, is what inferno looks up.
    let mut leaf = String::new();
    for row in &profile.rows {
        let state = row.dominant_state();
        leaf.clear();
        leaf.push_str(profile.stack(row).last().map_or("<root>", |&id| profile.name(id)));
        leaf.push_str("_[");
        leaf.push(state as char);
        leaf.push(']');
        palette.insert(&leaf, state_color(state));
    }
    let mut o = fg::Options::default();
    o.colors = Palette::Basic(BasicPalette::Hot);
    o.hash = true;
    o.deterministic = true;
    o.title = opts.title.clone();
    o.subtitle = Some(LEGEND.to_string());
    o.count_name = opts.count_name.clone();
    o.min_width = opts.min_width;
    if opts.inverted {
        o.direction = fg::Direction::Inverted;
    }
    o.palette_map = Some(&mut palette);
    let mut svg = Vec::with_capacity(64 * 1024);
    if text.is_empty() {
        // inferno refuses empty input; draw one empty root instead.
        fg::from_lines(&mut o, ["[no samples] 1"], &mut svg).map_err(|e| e.to_string())?;
    } else {
        fg::from_lines(&mut o, text.lines(), &mut svg).map_err(|e| e.to_string())?;
    }
    String::from_utf8(svg).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_zones_and_states() {
        let p = collapsed::parse("render;sprites;main.lua:3;a.lua:5_[N] 70\nrender;main.lua:4_[I] 30\n").unwrap();
        let svg = render(&p, &FlameOptions::default()).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("rgb(108,207,214)"), "zone colour");
        assert!(svg.contains("rgb(95,196,95)"), "compiled leaf colour");
        assert!(svg.contains("rgb(238,111,176)"), "interpreted leaf colour");
        assert!(svg.contains("a.lua:5_[N] (70 samples, 70.00%)"));
        assert_eq!(svg, render(&p, &FlameOptions::default()).unwrap(), "deterministic");
    }

    #[test]
    fn counts_that_overflow_a_u64_saturate() {
        let p = collapsed::parse("a.lua:1_[N] 18446744073709551615\nb.lua:2_[N] 18446744073709551615\n").unwrap();
        let svg = render(&p, &FlameOptions::default()).unwrap();
        assert!(svg.contains("all (18,446,744,073,709,551,615 samples, 100%)"), "{}", svg);
    }

    #[test]
    fn empty_profile_still_renders() {
        let svg = render(&Profile::default(), &FlameOptions::default()).unwrap();
        assert!(svg.contains("no samples"));
    }
}
