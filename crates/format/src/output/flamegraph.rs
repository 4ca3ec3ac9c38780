//! Interactive SVG flamegraphs, rendered by the `inferno` crate.
//!
//! A frame is one box whatever VM state its samples were in: the state is
//! shown by colour and in the tooltip, never as part of the frame's name (a
//! `_[C]` box beside its own line would split the line's time in two).
//! Colours say what a frame is: zone frames are aqua; a frame with self time
//! takes the colour of the VM state most of that self time was in (compiled
//! green, interpreted pink, C code sand, garbage collector purple, JIT
//! compiler blue), and its tooltip gives the share of each state; frames
//! without self time use the classic red-yellow palette, derived from their
//! names, so the same input always gives the same SVG. Colours and shares
//! belong to a frame name (a line or a function), summed over every box of
//! that name: inferno keys both by name.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use inferno::flamegraph::color::{BasicPalette, Color, PaletteMap};
use inferno::flamegraph::{self as fg, Palette};

use crate::profile::VM_STATES;
use crate::profile::{add_counts, dominant_state, sum_counts, Profile};

pub const ZONE_COLOR: Color = Color { r: 0x6c, g: 0xcf, b: 0xd6 };

/// Fill colour of a frame whose self time is mostly in VM state `state`.
pub fn state_color(state: u8) -> Color {
    match state {
        b'N' => Color { r: 0x5f, g: 0xc4, b: 0x5f },
        b'I' => Color { r: 0xee, g: 0x6f, b: 0xb0 },
        b'C' => Color { r: 0xc8, g: 0xbe, b: 0x8c },
        b'G' => Color { r: 0xa0, g: 0x7c, b: 0xe0 },
        _ => Color { r: 0x5a, g: 0x93, b: 0xe6 },
    }
}

/// The word for a VM state in tooltips.
fn state_word(state: u8) -> &'static str {
    match state {
        b'N' => "compiled",
        b'I' => "interpreted",
        b'C' => "C",
        b'G' => "GC",
        _ => "JIT compiler",
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

/// What the colours say, in two lines under the title: one line is wider
/// than a graph of 1200 pixels.
const LEGEND: [&str; 2] = [
    "colour: the VM state of a frame's self time (all its boxes): green compiled, pink interpreted,",
    "sand C, purple GC, blue JIT compiler; red-yellow: no self time; aqua: zones",
];

/// The legend's font size in pixels, and the baselines of its lines: below
/// the title (17 px, on 24), above the frames (from 60) or, inverted, the
/// details line (on 64), in the room inferno leaves for a subtitle.
const LEGEND_FONT_PX: usize = 11;
const LEGEND_BASELINES: [f64; 2] = [38.0, 51.0];

/// Advance of a monospace character, in ems, a little above the common
/// fonts' 0.6: the legend's font shrinks with a graph too narrow for it.
const MONOSPACE_ADVANCE: f64 = 0.62;

/// inferno's room left and right of the graph, in pixels.
const GRAPH_XPAD_PX: usize = 10;

/// Name of the frame of an empty stack outside any zone.
const ROOT_FRAME: &str = "<root>";

/// The collapsed lines inferno reads: frames without VM-state markers, so
/// the samples of one frame in several states make one box. Inferno adds
/// the counts up in a plain u64; when they overflow one, each row (in
/// profile order) keeps only what is left below `u64::MAX`, so the graph's
/// total saturates the way every other view's does (see `sum_counts`).
fn inferno_lines(profile: &Profile) -> Vec<String> {
    let mut room = u64::MAX;
    let mut lines = Vec::with_capacity(profile.rows.len());
    for row in &profile.rows {
        let n = row.total().min(room);
        room -= n;
        if n == 0 {
            continue;
        }
        let mut line = String::new();
        for &id in profile.zones(row).iter().chain(profile.stack(row)) {
            if !line.is_empty() {
                line.push(';');
            }
            line.push_str(profile.name(id));
        }
        if line.is_empty() {
            line.push_str(ROOT_FRAME);
        }
        let _ = write!(line, " {}", n);
        lines.push(line);
    }
    lines
}

/// Self samples per VM state of every frame name that ends a stack.
fn self_counts(profile: &Profile) -> HashMap<&str, [u64; 5]> {
    let mut out: HashMap<&str, [u64; 5]> = HashMap::new();
    for row in &profile.rows {
        let name = match profile.stack(row).last().or(profile.zones(row).last()) {
            Some(&id) => profile.name(id),
            None => ROOT_FRAME,
        };
        add_counts(out.entry(name).or_default(), row.counts);
    }
    out
}

/// `compiled 80%, C 20%`: the VM states of self samples, largest first.
fn state_shares(counts: &[u64; 5]) -> String {
    let total = sum_counts(*counts) as f64;
    let mut states: Vec<(u64, u8)> =
        counts.iter().zip(VM_STATES).filter(|(&n, _)| n > 0).map(|(&n, s)| (n, s)).collect();
    states.sort_by_key(|&(n, _)| std::cmp::Reverse(n));
    let mut out = String::new();
    for (n, s) in states {
        if !out.is_empty() {
            out.push_str(", ");
        }
        let _ = write!(out, "{} {:.0}%", state_word(s), n as f64 * 100.0 / total);
    }
    out
}

fn xml_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Adds the VM-state shares of each frame's self time to its tooltip:
/// `name (12 samples, 1.20%)` becomes
/// `name (12 samples, 1.20%; self time, all its boxes: compiled 75%, C 25%)`.
/// inferno keys colours and attributes by frame name, so a frame that ends
/// stacks at several places in the graph shows the shares of all of them,
/// in each of its boxes.
fn annotate_titles(svg: &str, selfs: &HashMap<&str, [u64; 5]>) -> String {
    let mut out = String::with_capacity(svg.len() + svg.len() / 8);
    let mut rest = svg;
    while let Some(open) = rest.find("<title>") {
        let body_at = open + "<title>".len();
        let Some(close) = rest[body_at..].find("</title>") else { break };
        let body = &rest[body_at..body_at + close];
        out.push_str(&rest[..body_at]);
        // The count part is the last " (" ... ")" of the title.
        match (body.rfind(" ("), body.ends_with(')')) {
            (Some(split), true) => {
                let name = xml_unescape(&body[..split]);
                out.push_str(&body[..body.len() - 1]);
                if let Some(counts) = selfs.get(name.as_str()) {
                    let _ = write!(out, "; self time, all its boxes: {}", xml_escape(&state_shares(counts)));
                }
                out.push(')');
            }
            _ => out.push_str(body),
        }
        rest = &rest[body_at + close..];
    }
    out.push_str(rest);
    out
}

/// Puts the legend in place of inferno's one-line subtitle (whose room it
/// takes): two centred lines in a group `legend`, whose font is at most
/// `LEGEND_FONT_PX` and small enough for the longest line to fit the width
/// of the graph (`vw`: the graph takes the width of its document).
fn legend_lines(svg: &str) -> String {
    let Some(at) = svg.find("<text id=\"subtitle\"") else { return svg.to_string() };
    let Some(len) = svg[at..].find("</text>").map(|n| n + "</text>".len()) else { return svg.to_string() };
    let longest = LEGEND.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64;
    let style = format!(
        "#legend text {{ text-anchor:middle; font-size:min({}px, calc((100vw - {}px) / {:.0})); }}\n",
        LEGEND_FONT_PX,
        2 * GRAPH_XPAD_PX,
        (longest * MONOSPACE_ADVANCE).ceil()
    );
    let mut group = String::from("<g id=\"legend\">");
    for (line, y) in LEGEND.iter().zip(LEGEND_BASELINES) {
        let _ = write!(group, "<text x=\"50.0000%\" y=\"{:.2}\">{}</text>", y, xml_escape(line));
    }
    group.push_str("</g>");
    let mut out = String::with_capacity(svg.len() + group.len() + style.len());
    out.push_str(&svg[..at]);
    out.push_str(&group);
    out.push_str(&svg[at + len..]);
    match out.find("</style>") {
        Some(end) => out.insert_str(end, &style),
        None => return svg.to_string(),
    }
    out
}

/// Renders `profile` as an SVG document.
pub fn render(profile: &Profile, opts: &FlameOptions) -> Result<String, String> {
    let lines = inferno_lines(profile);
    let selfs = self_counts(profile);
    let mut palette = PaletteMap::default();
    let mut zones: BTreeSet<&str> = BTreeSet::new();
    for z in 0..profile.zone_path_count() as u32 {
        zones.extend(profile.zone_path(z).iter().map(|&id| profile.name(id)));
    }
    for (name, counts) in &selfs {
        palette.insert(*name, state_color(dominant_state(counts)));
    }
    for z in &zones {
        palette.insert(*z, ZONE_COLOR);
    }
    let mut o = fg::Options::default();
    o.colors = Palette::Basic(BasicPalette::Hot);
    o.hash = true;
    o.deterministic = true;
    o.title = opts.title.clone();
    // A subtitle makes inferno leave the room the legend takes (see
    // `legend_lines`).
    o.subtitle = Some(LEGEND[0].to_string());
    o.count_name = opts.count_name.clone();
    o.min_width = opts.min_width;
    if opts.inverted {
        o.direction = fg::Direction::Inverted;
    }
    o.palette_map = Some(&mut palette);
    let mut svg = Vec::with_capacity(64 * 1024);
    if lines.is_empty() {
        // inferno refuses empty input; draw one empty root instead.
        fg::from_lines(&mut o, ["[no samples] 1"], &mut svg).map_err(|e| e.to_string())?;
    } else {
        fg::from_lines(&mut o, lines.iter().map(String::as_str), &mut svg).map_err(|e| e.to_string())?;
    }
    let svg = String::from_utf8(svg).map_err(|e| e.to_string())?;
    Ok(legend_lines(&annotate_titles(&svg, &selfs)))
}

/// The registry's SVG writer: [`render`] with the title, count name and
/// orientation of the caller's [`RenderMeta`](super::RenderMeta).
pub struct Svg;

impl super::Writer for Svg {
    fn write(&self, source: super::Source<'_>) -> Result<Vec<u8>, String> {
        let super::Source::Profile(p, meta) = source else { return Err(super::wrong_source("svg", false)) };
        let opts = FlameOptions {
            title: meta.title.clone(),
            count_name: meta.count_name.clone(),
            inverted: meta.inverted,
            ..FlameOptions::default()
        };
        render(p, &opts).map(String::into_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::collapsed;

    #[test]
    fn colours_zones_and_states() {
        let p = collapsed::parse("render;sprites;main.lua:3;a.lua:5_[N] 70\nrender;main.lua:4_[I] 30\n").unwrap();
        let svg = render(&p, &FlameOptions::default()).unwrap();
        assert!(svg.starts_with("<?xml"));
        assert!(svg.contains("rgb(108,207,214)"), "zone colour");
        assert!(svg.contains("rgb(95,196,95)"), "compiled leaf colour");
        assert!(svg.contains("rgb(238,111,176)"), "interpreted leaf colour");
        assert!(svg.contains("a.lua:5 (70 samples, 70.00%; self time, all its boxes: compiled 100%)"), "{}", svg);
        assert_eq!(svg, render(&p, &FlameOptions::default()).unwrap(), "deterministic");
    }

    #[test]
    fn one_box_per_frame_whatever_its_states() {
        // chain.draw runs callees and spends self time in C and compiled code.
        let text = "a.lua:1;chain.draw;b.lua:2_[N] 50\na.lua:1;chain.draw_[C] 30\na.lua:1;chain.draw_[N] 10\n";
        let p = collapsed::parse(text).unwrap();
        let svg = render(&p, &FlameOptions::default()).unwrap();
        assert!(!svg.contains("_[C]") && !svg.contains("_[N]"), "{}", svg);
        assert!(
            svg.contains(
                "<title>chain.draw (90 samples, 100.00%; self time, all its boxes: C 75%, compiled 25%)</title>"
            ),
            "{}",
            svg
        );
        assert!(svg.contains("<title>a.lua:1 (90 samples, 100.00%)</title>"), "no self time, no shares: {}", svg);
        assert!(svg.contains("rgb(200,190,140)"), "chain.draw in C's colour");
    }

    #[test]
    fn counts_that_overflow_a_u64_saturate() {
        let p = collapsed::parse("a.lua:1_[N] 18446744073709551615\nb.lua:2_[N] 18446744073709551615\n").unwrap();
        let svg = render(&p, &FlameOptions::default()).unwrap();
        assert!(svg.contains("all (18,446,744,073,709,551,615 samples, 100%)"), "{}", svg);
    }

    #[test]
    fn legend_in_two_lines_whose_font_fits_the_width() {
        let p = collapsed::parse("a.lua:1;b.lua:2_[N] 5\n").unwrap();
        for inverted in [false, true] {
            let svg = render(&p, &FlameOptions { inverted, ..FlameOptions::default() }).unwrap();
            assert!(!svg.contains("id=\"subtitle\""), "{}", svg);
            let group = &svg[svg.find("<g id=\"legend\">").expect("the legend")..];
            let group = &group[..group.find("</g>").unwrap()];
            let lines: Vec<&str> = group.split("<text ").skip(1).collect();
            assert_eq!(lines.len(), 2, "{}", group);
            for (line, text) in lines.iter().zip(LEGEND) {
                assert!(line.contains(&xml_escape(text)), "{}", line);
            }
            assert!(
                svg.contains("#legend text { text-anchor:middle; font-size:min(11px, calc((100vw - 20px) / 59)); }")
            );
            // Under the title, above the first row of boxes and, inverted,
            // the details line (a 12 px font rises about 9 px above its
            // baseline; the legend's descends about 3 px below its).
            let y_of =
                |from: &str| from[from.find(" y=\"").unwrap() + 4..].split('"').next().unwrap().parse::<f64>().unwrap();
            let first_box = svg.split("<rect x=\"0.0000%\"").skip(1).map(y_of).fold(f64::MAX, f64::min);
            let details = y_of(&svg[svg.find("<text id=\"details\"").unwrap()..]);
            let below = if inverted { details - 9.0 } else { first_box };
            assert!(LEGEND_BASELINES[1] + 3.0 < below, "{}", svg);
        }
    }

    #[test]
    fn empty_profile_still_renders() {
        let svg = render(&Profile::default(), &FlameOptions::default()).unwrap();
        assert!(svg.contains("no samples"));
    }
}
