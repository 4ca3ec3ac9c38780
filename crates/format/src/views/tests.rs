//! Tests of the text views.

use super::*;
use crate::profile::collapsed;
use crate::profile::frames::FuncRange;

fn sample_profile() -> Profile {
    collapsed::parse(
        "update;physics;main.lua:10;phys.lua:5_[N] 60\n\
         update;physics;main.lua:10;phys.lua:7_[I] 20\n\
         render;main.lua:11;draw.lua:3;string.format_[I] 15\n\
         main.lua:12_[G] 5\n",
    )
    .unwrap()
}

fn funcs() -> FunctionMap {
    let mut m = FunctionMap::default();
    m.add_file(
        "phys.lua",
        vec![FuncRange { first: 4, last: 9, label: "step (phys.lua:4)".into() }],
        "(main chunk) phys.lua".into(),
    );
    m.add_file(
        "main.lua",
        vec![FuncRange { first: 9, last: 13, label: "frame (main.lua:9)".into() }],
        "(main chunk) main.lua".into(),
    );
    m
}

#[test]
fn self_and_total_by_function() {
    let p = sample_profile();
    let t = aggregate(&p, &funcs(), &ReportOptions::default());
    assert_eq!(t.samples, 100);
    assert_eq!(t.entries["step (phys.lua:4)"].self_samples, 80);
    assert_eq!(t.entries["frame (main.lua:9)"].total_samples, 100);
    assert_eq!(t.entries["frame (main.lua:9)"].self_samples, 5);
    assert_eq!(t.entries["string.format"].self_samples, 15);
    assert_eq!(t.entries["draw.lua:3"].total_samples, 15, "unknown files fall back to lines");
}

#[test]
fn zones_by_path_and_component() {
    let p = sample_profile();
    let o = ReportOptions { by: Group::Zone, ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    assert_eq!(t.entries["update/physics"].self_samples, 80);
    assert_eq!(t.entries["update"].total_samples, 80);
    assert_eq!(t.entries["update"].self_samples, 0);
    assert_eq!(t.entries["(no zone)"].self_samples, 5);
    let o = ReportOptions { by: Group::ZoneComponent, ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    assert_eq!(t.entries["physics"].self_samples, 80);
    assert_eq!(t.entries["update"].total_samples, 80);
}

#[test]
fn vm_state_by_function_and_lines_in_function() {
    let p = sample_profile();
    let o = ReportOptions { by: Group::VmState, then: Some(Group::Function), ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    assert_eq!(t.entries["Interpreted"].self_samples, 35);
    assert_eq!(t.entries["Interpreted"].children["step (phys.lua:4)"], 20);
    assert_eq!(t.entries["Interpreted"].children["string.format"], 15);
    let o = ReportOptions { by: Group::Function, then: Some(Group::Line), ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    let step = &t.entries["step (phys.lua:4)"];
    assert_eq!(step.children["phys.lua:5"], 60);
    assert_eq!(step.children["phys.lua:7"], 20);
}

#[test]
fn callers_and_callees() {
    let p = sample_profile();
    let o = ReportOptions { by: Group::Function, then: Some(Group::Caller), ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    assert_eq!(t.entries["step (phys.lua:4)"].children["frame (main.lua:9)"], 80);
    let o = ReportOptions { by: Group::Function, then: Some(Group::Callee), sort: Metric::Total, ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    let f = &t.entries["frame (main.lua:9)"];
    assert_eq!(f.children["step (phys.lua:4)"], 80);
    assert_eq!(f.children["draw.lua:3"], 15);
    assert_eq!(f.children["(self)"], 5);
}

#[test]
fn depth_joins_callers() {
    let p = sample_profile();
    let o = ReportOptions { by: Group::Line, depth: 2, ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    assert_eq!(t.entries["phys.lua:5 < main.lua:10"].self_samples, 60);
    let o = ReportOptions { by: Group::Line, depth: -2, ..Default::default() };
    let t = aggregate(&p, &funcs(), &o);
    assert_eq!(t.entries["main.lua:10 > phys.lua:5"].self_samples, 60);
}

#[test]
fn threshold_hides_small_rows() {
    let p = sample_profile();
    let o = ReportOptions { by: Group::Line, min_percent: 10.0, ..Default::default() };
    let text = render(&p, &funcs(), &o);
    assert!(text.contains("phys.lua:5"));
    // By line, the builtin's time is the line that called it.
    assert!(text.contains("draw.lua:3") && !text.contains("string.format"), "{}", text);
    assert!(!text.contains("main.lua:12"), "{}", text);
}

#[test]
fn bytes_are_said_and_their_shares_carry_no_sampling_error() {
    let p = sample_profile();
    let o = ReportOptions { unit: Unit::Bytes, then: Some(Group::Caller), ..Default::default() };
    let text = render(&p, &funcs(), &o);
    assert!(text.starts_with(&format!("# {} bytes; by function, then caller;", p.total())), "{}", text);
    assert!(!text.contains('±') && !text.contains("samples"), "{}", text);
    let samples = render(&p, &funcs(), &ReportOptions::default());
    assert!(samples.starts_with(&format!("# {} samples; by function;", p.total())) && samples.contains('±'));
}

#[test]
fn annotates_hot_lines_with_context() {
    let p = sample_profile();
    let src: String = (1..=20).map(|i| format!("code{}\n", i)).collect();
    let o = ReportOptions { min_percent: 1.0, ..Default::default() };
    let text = annotate(&p, &o, Annotate::Excerpts(1), &mut |_| Ok(src.clone()));
    assert!(text.contains("====== phys.lua ======"));
    assert!(text.contains("  60.0%   60.0% |     5 | code5"), "{}", text);
    assert!(text.contains("|     4 | code4"));
    assert!(!text.contains("code15\n"));
}

#[test]
fn hot_aborts_rank_by_time_at_location() {
    let p = sample_profile();
    let sites = vec![
        AbortSite {
            severity: "warn".into(),
            count: 50,
            reason: "NYI".into(),
            location: "draw.lua:3".into(),
            zone: String::new(),
        },
        AbortSite {
            severity: "blacklist".into(),
            count: 1,
            reason: "blacklisted".into(),
            location: "phys.lua:5".into(),
            zone: "update/physics".into(),
        },
        AbortSite {
            severity: "warn".into(),
            count: 9,
            reason: "cold".into(),
            location: "cold.lua:1".into(),
            zone: String::new(),
        },
    ];
    let r = hot_aborts(&p, &funcs(), &sites);
    assert_eq!(r.iter().map(|h| h.site).collect::<Vec<_>>(), vec![1, 0, 2]);
    assert_eq!(r[0].line_self, 60);
    assert_eq!(r[0].func_total, 80);
    assert_eq!(r[1].line_total, 15);
    assert_eq!(r[2].line_total, 0);
    // A loop header with no samples of its own still ranks by its function.
    let sites = vec![
        AbortSite { location: "draw.lua:3".into(), count: 50, ..Default::default() },
        AbortSite { location: "phys.lua:4".into(), count: 1, ..Default::default() },
    ];
    let r = hot_aborts(&p, &funcs(), &sites);
    assert_eq!(r[0].site, 1);
    assert_eq!((r[0].line_total, r[0].func_total), (0, 80));
}

/// Two rows of u64::MAX: every sum a view makes saturates (in a debug
/// build, one that does not panics here).
#[test]
fn count_sums_saturate() {
    const MAX: &str = "18446744073709551615";
    let p = collapsed::parse(&format!("a.lua:1_[N] {MAX}\nb.lua:2_[N] {MAX}\n")).unwrap();
    let text = render(&p, &FunctionMap::default(), &ReportOptions::default());
    assert!(text.starts_with(&format!("# {MAX} samples; by function;")), "{}", text);

    // Both rows through one frame, so per-key sums overflow too.
    let p = collapsed::parse(&format!("main.lua:10;a.lua:1_[N] {MAX}\nmain.lua:10;b.lua:2_[I] {MAX}\n")).unwrap();
    let m = funcs();
    for (by, then, sort) in [
        (Group::Function, None, Metric::SelfTime),
        (Group::Line, Some(Group::Caller), Metric::Total),
        (Group::Module, Some(Group::Callee), Metric::Total),
        (Group::VmState, Some(Group::Function), Metric::SelfTime),
        (Group::Zone, Some(Group::Module), Metric::Total),
    ] {
        let o = ReportOptions { by, then, sort, raw: true, min_percent: 0.0, ..Default::default() };
        let t = aggregate(&p, &m, &o);
        assert_eq!(t.samples, u64::MAX, "{:?}", o);
        let text = render(&p, &m, &o);
        assert!(text.starts_with(&format!("# {MAX} samples")), "{}", text);
    }
    let o = ReportOptions { then: Some(Group::Line), sort: Metric::Total, ..Default::default() };
    let t = aggregate(&p, &m, &o);
    assert_eq!(t.entries["frame (main.lua:9)"].total_samples, u64::MAX);
    assert_eq!(t.entries["frame (main.lua:9)"].children["main.lua:10"], u64::MAX);

    let o = ReportOptions { min_percent: 0.0, raw: true, ..Default::default() };
    let text = annotate(&p, &o, Annotate::Full, &mut |_| Ok("x\n".repeat(10)));
    assert!(text.starts_with(&format!("# {MAX} samples")), "{}", text);
    assert!(text.contains(&format!("{MAX} |    10 | x")), "{}", text);

    let sites = vec![AbortSite { location: "main.lua:10".into(), ..Default::default() }];
    let r = hot_aborts(&p, &m, &sites);
    assert_eq!((r[0].line_total, r[0].func_total), (u64::MAX, u64::MAX));
    let text = render_hot_aborts(&p, &m, &sites, true);
    assert!(text.starts_with(&format!("# {MAX} samples")), "{}", text);
}

#[test]
fn share_error_is_the_wilson_half_width() {
    // Worked by hand: p = 0.61, n = 1000 gives about ±3.0 points; a share of
    // 100% of 12 samples is still ±12.1 points, not ±0.
    assert!((share_error(610, 1000) - 3.02).abs() < 0.01, "{}", share_error(610, 1000));
    assert!((share_error(12, 12) - 12.13).abs() < 0.01, "{}", share_error(12, 12));
    assert!((worst_share_error(1000) - 3.09).abs() < 0.01);
    assert!(share_error(0, 0) == 0.0);
    assert!(error_note(12).starts_with("only 12 samples: too few to rank"));
    assert!(error_note(1000).starts_with("shares ±3.1 points at most"));
}

#[test]
fn annotates_abort_sites_and_compiled_shares_with_a_trace_report() {
    // Line 5: 6 samples, 4 of them compiled; line 7: none, but an abort.
    let p = crate::profile::collapsed::parse("main.lua:1;phys.lua:5_[N] 4\nmain.lua:1;phys.lua:5_[I] 2\n").unwrap();
    let src: String = (1..=20).map(|i| format!("code{}\n", i)).collect();
    let o = ReportOptions { min_percent: 1.0, ..Default::default() };
    let site = |count: u64, location: &str, reason: &str| AbortSite {
        severity: "warn".into(),
        count,
        reason: reason.into(),
        location: location.into(),
        zone: "update".into(),
    };
    let notes = LineNotes {
        trace: Some(TraceNotes {
            sites: vec![
                site(3, "phys.lua:7", "NYI: bytecode FNEW"),
                site(9, "phys.lua:7", "loop unroll limit reached"),
            ],
            counts: Some(TraceCounts { started: 20, completed: 8, aborted: 12, blacklistings: 1 }),
            lines: None,
            starts: Vec::new(),
        }),
        counts: None,
    };
    let text = annotate_with(&p, &o, Annotate::Excerpts(0), &notes, &mut |_| Ok(src.clone()));
    assert_eq!(crate::profile::VM_STATES[annotate::COMPILED], b'N');
    assert!(text.contains("# traces: 20 started, 8 completed, 12 aborted, 1 loops blacklisted"), "{}", text);
    assert!(text.contains(" 100.0%  100.0%   67% |     5 | code5"), "{}", text);
    // The abort line is shown though it has no samples; the most frequent reason first.
    let at7 = text.find("|     7 | code7\n").expect("line 7 shown");
    let many = text.find("^ trace aborted 9 times (warn): loop unroll limit reached [update]").unwrap();
    let few = text.find("^ trace aborted 3 times (warn): NYI: bytecode FNEW [update]").unwrap();
    assert!(at7 < many && many < few, "{}", text);
    assert!(!text.contains("code6"), "{}", text);
    // Without notes, the view is the sampled one alone.
    let plain = annotate(&p, &o, Annotate::Excerpts(0), &mut |_| Ok(src.clone()));
    assert!(plain.contains(" 100.0%  100.0% |     5 | code5"), "{}", plain);
    assert!(!plain.contains("code7"));
}

#[test]
fn annotates_the_traces_that_cover_each_line() {
    // Line 2 in two traces, line 3 in four, line 4 in none; line 3's abort
    // note keeps its place under the line.
    let p = crate::profile::collapsed::parse("./loop.lua:2_[N] 3\n./loop.lua:3_[I] 1\n").unwrap();
    let src = "a\nb\nc\nd\n";
    let o = ReportOptions { min_percent: 1.0, ..Default::default() };
    let lines: HashMap<u32, Vec<u32>> = [(2, vec![3, 7]), (3, vec![1, 3, 7, 12])].into_iter().collect();
    let notes = LineNotes {
        trace: Some(TraceNotes {
            sites: vec![AbortSite {
                severity: "warn".into(),
                count: 2,
                reason: "r".into(),
                location: "loop.lua:3".into(),
                ..Default::default()
            }],
            counts: None,
            lines: Some([("loop.lua".to_string(), lines)].into_iter().collect()),
            starts: Vec::new(),
        }),
        counts: None,
    };
    let text = annotate_with(&p, &o, Annotate::Full, &notes, &mut |_| Ok(src.to_string()));
    assert!(text.contains("# traces column: the completed traces that cover a line"), "{}", text);
    assert!(text.contains("   self   total   jit     traces |  line | source\n"), "{}", text);
    assert!(text.contains("  75.0%   75.0%  100%      T3 T7 |     2 | b\n"), "{}", text);
    assert!(text.contains("  25.0%   25.0%    0%   T1 T3 +2 |     3 | c\n"), "{}", text);
    assert!(text.contains("                                 |     4 | d\n"), "{}", text);
    assert!(
        text.contains("|     3 | c\n                                 |       | ^ trace aborted 2 times (warn): r\n"),
        "{}",
        text
    );
    // With exact counts too, `traces` comes after `count`.
    let counted = LineNotes {
        counts: Some([("loop.lua".to_string(), [(2, 5)].into_iter().collect())].into_iter().collect()),
        ..notes.clone()
    };
    let text = annotate_with(&p, &o, Annotate::Full, &counted, &mut |_| Ok(src.to_string()));
    assert!(text.contains("   jit     count     traces |"), "{}", text);
    assert!(text.contains("  100%         5      T3 T7 |     2 | b\n"), "{}", text);
    // A report without lines (read back from CSV) has no column.
    let no_lines = LineNotes { trace: Some(TraceNotes { lines: None, ..notes.trace.clone().unwrap() }), counts: None };
    let text = annotate_with(&p, &o, Annotate::Full, &no_lines, &mut |_| Ok(src.to_string()));
    assert!(!text.contains("traces |"), "{}", text);
    assert!(!text.contains("T3"), "{}", text);
}

#[test]
fn lists_the_traces_that_start_in_each_file() {
    let p = crate::profile::collapsed::parse("./loop.lua:2_[N] 3\n").unwrap();
    let mut trace = TraceNotes { lines: Some(HashMap::new()), ..Default::default() };
    trace.add_start(1, "loop.lua:9".into(), "loop".into(), 1, None);
    trace.add_start(2, "other.lua:1".into(), "return".into(), 0, None);
    trace.add_start(3, "./loop.lua:12".into(), "root".into(), 1, Some(1));
    trace.add_start(4, "[builtin#21]".into(), "".into(), 0, None);
    let notes = LineNotes { trace: Some(trace.clone()), counts: None };
    let o = ReportOptions { min_percent: 1.0, ..Default::default() };
    let text = annotate_with(&p, &o, Annotate::Full, &notes, &mut |_| Ok("a\nb\n".into()));
    assert!(
        text.ends_with("|     2 | b\n# traces starting here: T1 line 9 loop, T3 line 12 (side of T1) root -> T1\n"),
        "{}",
        text
    );
    // Past a dozen, the rest are counted.
    for n in 10..30 {
        trace.add_start(n, "loop.lua:1".into(), "loop".into(), n, None);
    }
    let notes = LineNotes { trace: Some(trace), counts: None };
    let text = annotate_with(&p, &o, Annotate::Full, &notes, &mut |_| Ok("a\nb\n".into()));
    assert!(text.contains(", T19 line 1 loop, +10 more\n"), "{}", text);
    // Without the report's lines, no list.
    let notes = LineNotes { trace: Some(TraceNotes { lines: None, ..notes.trace.unwrap() }), counts: None };
    let text = annotate_with(&p, &o, Annotate::Full, &notes, &mut |_| Ok("a\nb\n".into()));
    assert!(!text.contains("traces starting here"), "{}", text);
}
