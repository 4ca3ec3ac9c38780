//! The encoder checked with a small independent protobuf reader.

use super::*;

/// A decoded field: number and either a varint or bytes.
#[derive(Debug)]
enum Val {
    Int(u64),
    Bytes(Vec<u8>),
}

fn varint(buf: &[u8], pos: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn fields(buf: &[u8]) -> Vec<(u32, Val)> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let key = varint(buf, &mut pos);
        let (num, wire) = ((key >> 3) as u32, key & 7);
        match wire {
            0 => out.push((num, Val::Int(varint(buf, &mut pos)))),
            2 => {
                let n = varint(buf, &mut pos) as usize;
                out.push((num, Val::Bytes(buf[pos..pos + n].to_vec())));
                pos += n;
            }
            w => panic!("unexpected wire type {w}"),
        }
    }
    out
}

fn ints(fs: &[(u32, Val)], num: u32) -> Vec<u64> {
    fs.iter()
        .filter(|(n, _)| *n == num)
        .map(|(_, v)| match v {
            Val::Int(i) => *i,
            _ => panic!("not int"),
        })
        .collect()
}

fn msgs(fs: &[(u32, Val)], num: u32) -> Vec<Vec<(u32, Val)>> {
    fs.iter()
        .filter(|(n, _)| *n == num)
        .map(|(_, v)| match v {
            Val::Bytes(b) => fields(b),
            _ => panic!("not bytes"),
        })
        .collect()
}

fn packed(fs: &[(u32, Val)], num: u32) -> Vec<u64> {
    let mut out = Vec::new();
    for (n, v) in fs {
        if *n == num {
            let Val::Bytes(b) = v else { panic!("not packed") };
            let mut pos = 0;
            while pos < b.len() {
                out.push(varint(b, &mut pos));
            }
        }
    }
    out
}

fn one(fs: &[(u32, Val)], num: u32) -> u64 {
    ints(fs, num).first().copied().unwrap_or(0)
}

struct Decoded {
    strings: Vec<String>,
    top: Vec<(u32, Val)>,
}

/// A decoded sample: leaf-first function names with lines, values, labels.
type DecodedSample = (Vec<String>, Vec<u64>, Vec<(String, String)>);

impl Decoded {
    fn new(raw: &[u8]) -> Self {
        let top = fields(raw);
        let strings = top
            .iter()
            .filter(|(n, _)| *n == field::PROFILE_STRING_TABLE)
            .map(|(_, v)| match v {
                Val::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
                _ => panic!(),
            })
            .collect();
        Decoded { strings, top }
    }

    fn s(&self, i: u64) -> &str {
        &self.strings[i as usize]
    }

    /// Each sample as (leaf-first function names with lines, values, labels).
    fn samples(&self) -> Vec<DecodedSample> {
        let functions: HashMap<u64, String> = msgs(&self.top, field::PROFILE_FUNCTION)
            .iter()
            .map(|f| (one(f, field::FUNCTION_ID), self.s(one(f, field::FUNCTION_NAME)).to_string()))
            .collect();
        let locations: HashMap<u64, String> = msgs(&self.top, field::PROFILE_LOCATION)
            .iter()
            .map(|l| {
                let line = &msgs(l, field::LOCATION_LINE)[0];
                let name = &functions[&one(line, field::LINE_FUNCTION_ID)];
                (one(l, field::LOCATION_ID), format!("{}@{}", name, one(line, field::LINE_LINE)))
            })
            .collect();
        msgs(&self.top, field::PROFILE_SAMPLE)
            .iter()
            .map(|s| {
                let stack = packed(s, field::SAMPLE_LOCATION_ID).iter().map(|id| locations[id].clone()).collect();
                let labels = msgs(s, field::SAMPLE_LABEL)
                    .iter()
                    .map(|l| {
                        (self.s(one(l, field::LABEL_KEY)).to_string(), self.s(one(l, field::LABEL_STR)).to_string())
                    })
                    .collect();
                (stack, packed(s, field::SAMPLE_VALUE), labels)
            })
            .collect()
    }
}

fn no_names(_: &str) -> Option<String> {
    None
}

#[test]
fn samples_are_leaf_first_with_counts_time_and_labels() {
    let stacks = vec![
        StackCounts {
            zones: vec!["frame", "update"],
            stack: vec!["main.lua:3", "game.lua:10-20"],
            counts: [0, 2, 0, 0, 5],
        },
        StackCounts { zones: vec![], stack: vec!["main.lua:3", "[builtin#ipairs]"], counts: [0, 0, 7, 0, 0] },
    ];
    let meta = PprofMeta {
        interval_ns: 1_000_000,
        clock: "cpu".into(),
        time_nanos: 5,
        duration_nanos: 9,
        ..Default::default()
    };
    let d = Decoded::new(&encode(&stacks, &meta, &no_names));
    assert_eq!(d.strings[0], "");
    let samples = d.samples();
    assert_eq!(samples.len(), 3, "one sample per stack and VM state seen");
    assert_eq!(samples[0].0, vec!["game.lua:10-20@10", "main.lua:3@3"]);
    assert_eq!(samples[0].1, vec![2, 2_000_000]);
    assert_eq!(samples[0].2, vec![("zone".into(), "frame/update".into()), ("vmstate".into(), "I".into())]);
    assert_eq!(samples[1].1, vec![5, 5_000_000]);
    assert_eq!(samples[1].2[1], ("vmstate".into(), "J".into()));
    assert_eq!(samples[2].0, vec!["[builtin#ipairs]@0", "main.lua:3@3"]);
    assert_eq!(samples[2].2, vec![("vmstate".into(), "C".into())], "no zone label outside zones");
    let types: Vec<(String, String)> = msgs(&d.top, field::PROFILE_SAMPLE_TYPE)
        .iter()
        .map(|t| (d.s(one(t, field::VALUE_TYPE_TYPE)).into(), d.s(one(t, field::VALUE_TYPE_UNIT)).into()))
        .collect();
    assert_eq!(types, vec![("samples".into(), "count".into()), ("cpu".into(), "nanoseconds".into())]);
    assert_eq!(one(&d.top, field::PROFILE_PERIOD), 1_000_000);
    assert_eq!(one(&d.top, field::PROFILE_TIME_NANOS), 5);
    assert_eq!(one(&d.top, field::PROFILE_DURATION_NANOS), 9);
    assert_eq!(d.s(one(&d.top, field::PROFILE_DEFAULT_SAMPLE_TYPE)), "cpu");
}

#[test]
fn frames_shared_between_stacks_are_one_location_and_functions_are_named() {
    let stacks = vec![
        StackCounts { zones: vec![], stack: vec!["m.lua:1", "m.lua:5"], counts: [0, 1, 0, 0, 0] },
        StackCounts { zones: vec![], stack: vec!["m.lua:1", "m.lua:6"], counts: [0, 1, 0, 0, 0] },
    ];
    let name_of = |f: &str| if f == "m.lua:5" || f == "m.lua:6" { Some("step (m.lua:4)".to_string()) } else { None };
    let d = Decoded::new(&encode(&stacks, &PprofMeta::default(), &name_of));
    assert_eq!(msgs(&d.top, field::PROFILE_LOCATION).len(), 3);
    assert_eq!(msgs(&d.top, field::PROFILE_FUNCTION).len(), 2, "lines 5 and 6 are one function");
    let samples = d.samples();
    assert_eq!(samples[0].0, vec!["step (m.lua:4)@5", "m.lua:1@1"]);
    assert_eq!(samples[1].0, vec!["step (m.lua:4)@6", "m.lua:1@1"]);
    assert_eq!(samples[0].1, vec![1, 1], "unknown interval: time is the count");
}

#[test]
fn counts_saturate() {
    let stacks = vec![StackCounts { zones: vec![], stack: vec!["a.lua:1"], counts: [0, u64::MAX, 0, 0, 0] }];
    let meta = PprofMeta { interval_ns: 1000, ..Default::default() };
    let d = Decoded::new(&encode(&stacks, &meta, &no_names));
    assert_eq!(d.samples()[0].1, vec![u64::MAX, u64::MAX]);
}

#[test]
fn render_is_gzip_of_encode() {
    use std::io::Read;
    let stacks = vec![StackCounts { zones: vec!["z"], stack: vec!["a.lua:1"], counts: [1, 0, 0, 0, 0] }];
    let meta = PprofMeta::default();
    let gz = render(&stacks, &meta, &no_names);
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
    assert_eq!(raw, encode(&stacks, &meta, &no_names));
}

#[test]
fn an_allocation_profile_has_objects_and_bytes_with_bytes_the_default() {
    let stacks = vec![
        StackCounts { zones: vec!["z"], stack: vec!["a.lua:1"], counts: [0, 4096, 0, 0, 2048] },
        StackCounts { zones: vec![], stack: vec!["a.lua:1", "b.lua:2"], counts: [1024, 0, 0, 0, 0] },
    ];
    let mut meta = PprofMeta { interval_ns: 1024, clock: ALLOC_SPACE.into(), ..Default::default() };
    meta.objects.insert(stack_key(&["z"], &["a.lua:1"]), [0, 30, 0, 0, 7]);
    let d = Decoded::new(&encode(&stacks, &meta, &no_names));
    let types: Vec<(String, String)> = msgs(&d.top, field::PROFILE_SAMPLE_TYPE)
        .iter()
        .map(|t| (d.s(one(t, field::VALUE_TYPE_TYPE)).into(), d.s(one(t, field::VALUE_TYPE_UNIT)).into()))
        .collect();
    assert_eq!(types, vec![("alloc_objects".into(), "count".into()), ("alloc_space".into(), "bytes".into())]);
    assert_eq!(d.s(one(&d.top, field::PROFILE_DEFAULT_SAMPLE_TYPE)), "alloc_space");
    let values: Vec<Vec<u64>> = d.samples().into_iter().map(|s| s.1).collect();
    // A stack the object table does not hold counts no objects.
    assert_eq!(values, vec![vec![30, 4096], vec![7, 2048], vec![0, 1024]]);
}

#[test]
fn an_allocation_profile_with_live_blocks_has_the_four_heap_types() {
    let stacks = vec![
        StackCounts { zones: vec![], stack: vec!["a.lua:1"], counts: [4096, 0, 0, 0, 0] },
        StackCounts { zones: vec![], stack: vec!["b.lua:2"], counts: [0, 0, 2048, 0, 0] },
    ];
    let mut meta = PprofMeta { interval_ns: 1024, clock: ALLOC_SPACE.into(), ..Default::default() };
    meta.objects.insert(stack_key(&[], &["a.lua:1"]), [40, 0, 0, 0, 0]);
    let mut inuse = InUse::default();
    inuse.space.insert(stack_key(&[], &["a.lua:1"]), [1024, 0, 0, 0, 0]);
    inuse.objects.insert(stack_key(&[], &["a.lua:1"]), [10, 0, 0, 0, 0]);
    // Live bytes in a state with nothing allocated still make a sample.
    inuse.space.insert(stack_key(&[], &["b.lua:2"]), [0, 0, 2048, 1024, 0]);
    meta.inuse = Some(inuse);
    let d = Decoded::new(&encode(&stacks, &meta, &no_names));
    let types: Vec<String> =
        msgs(&d.top, field::PROFILE_SAMPLE_TYPE).iter().map(|t| d.s(one(t, field::VALUE_TYPE_TYPE)).into()).collect();
    assert_eq!(types, ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"]);
    assert_eq!(d.s(one(&d.top, field::PROFILE_DEFAULT_SAMPLE_TYPE)), "alloc_space");
    let values: Vec<Vec<u64>> = d.samples().into_iter().map(|s| s.1).collect();
    assert_eq!(values, vec![vec![40, 4096, 10, 1024], vec![0, 2048, 0, 2048], vec![0, 0, 0, 1024]]);
}

#[test]
fn a_live_profile_is_inuse_space_and_inuse_objects() {
    let stacks = vec![StackCounts { zones: vec![], stack: vec!["a.lua:1"], counts: [3072, 0, 0, 0, 0] }];
    let mut meta = PprofMeta { interval_ns: 1024, clock: INUSE_SPACE.into(), ..Default::default() };
    meta.objects.insert(stack_key(&[], &["a.lua:1"]), [12, 0, 0, 0, 0]);
    let d = Decoded::new(&encode(&stacks, &meta, &no_names));
    let types: Vec<String> =
        msgs(&d.top, field::PROFILE_SAMPLE_TYPE).iter().map(|t| d.s(one(t, field::VALUE_TYPE_TYPE)).into()).collect();
    assert_eq!(types, ["inuse_objects", "inuse_space"]);
    assert_eq!(d.s(one(&d.top, field::PROFILE_DEFAULT_SAMPLE_TYPE)), "inuse_space");
    let values: Vec<Vec<u64>> = d.samples().into_iter().map(|s| s.1).collect();
    assert_eq!(values, vec![vec![12, 3072]]);
}
