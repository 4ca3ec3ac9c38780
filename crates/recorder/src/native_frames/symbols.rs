//! Names of native frames, found after the session (never in the
//! handler): the function whose code holds the address, from the object's
//! symbol tables on disk (`.symtab`, which names static functions too,
//! then `.dynsym`), or from its separate debug file by build id
//! (`/usr/lib/debug/.build-id/`) when the object's own are stripped; C++
//! and Rust names demangled.

use std::sync::{Arc, Mutex};

use object::{Object as _, SymbolKind};

use super::modules;

/// One object's functions: start, end (0 for a symbol of no size) and
/// name, sorted by start; and the ranges its unwind table gives functions,
/// named or not, sorted.
struct Functions {
    path: String,
    bias: usize,
    text: std::ops::Range<usize>,
    functions: Vec<Named>,
    ranges: Vec<(usize, usize)>,
}

/// A function of a symbol table: start, end (0 for a symbol of no size),
/// name.
type Named = (usize, usize, String);

static READ: Mutex<Vec<Arc<Functions>>> = Mutex::new(Vec::new());

/// Every object the handler's tables have held (path, bias, code), newest
/// last: a library the program unloaded before its profile is written
/// (an FFI library collected at the end) is still named from its file.
static SEEN: Mutex<Vec<(String, usize, std::ops::Range<usize>)>> = Mutex::new(Vec::new());

/// Remembers an object of the handler's tables.
pub(super) fn remember(path: &str, bias: usize, text: std::ops::Range<usize>) {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.iter().any(|(p, b, t)| p == path && *b == bias && *t == text) {
        seen.push((path.to_string(), bias, text));
    }
}

/// The name of the function holding `addr`, else its object and the
/// offset of the function's start in the unwind table (`libfoo.so+0x1a20`:
/// one frame for every address of a stripped function), else of the
/// address; None for an address in no loaded object.
pub fn name(addr: usize) -> Option<String> {
    let f = functions_of(addr)?;
    let svma = addr - f.bias;
    let i = f.functions.partition_point(|(start, _, _)| *start <= svma);
    if let Some((_, end, name)) = i.checked_sub(1).map(|i| &f.functions[i]) {
        if *end == 0 || svma < *end {
            return Some(demangled(name));
        }
    }
    let program;
    let path = if f.path.is_empty() {
        // The main program: the loader gives it no name.
        program = std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        &program
    } else {
        &f.path
    };
    let file = path.rsplit('/').next().unwrap_or(path);
    let i = f.ranges.partition_point(|(start, _)| *start <= svma);
    let at = match i.checked_sub(1).map(|i| f.ranges[i]) {
        Some((start, end)) if svma < end => start,
        _ => svma,
    };
    Some(format!("{}+0x{:x}", if file.is_empty() { "program" } else { file }, at))
}

/// The name of the function that begins at `addr` (a C function's entry),
/// from the symbol tables; None when no symbol begins there.
pub fn function_at(addr: usize) -> Option<String> {
    let f = functions_of(addr)?;
    let svma = addr.checked_sub(f.bias)?;
    let i = f.functions.binary_search_by_key(&svma, |(start, _, _)| *start).ok()?;
    Some(demangled(&f.functions[i].2))
}

fn functions_of(addr: usize) -> Option<Arc<Functions>> {
    let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = read.iter().find(|f| f.text.contains(&addr)) {
        return Some(f.clone());
    }
    let (path, bias, text) = match modules::loaded_objects().into_iter().find(|o| o.text.contains(&addr)) {
        Some(o) => (o.path, o.bias, o.text),
        None => SEEN.lock().unwrap_or_else(|e| e.into_inner()).iter().rev().find(|o| o.2.contains(&addr))?.clone(),
    };
    let (functions, ranges) = read_functions(&path);
    let f = Arc::new(Functions { functions, ranges, path, bias, text });
    read.push(f.clone());
    Some(f)
}

/// The functions an object's file names, with those of its debug file,
/// and the function ranges of its unwind table.
fn read_functions(path: &str) -> (Vec<Named>, Vec<(usize, usize)>) {
    let file = if path.is_empty() { "/proc/self/exe" } else { path };
    let Ok(data) = std::fs::read(file) else { return Default::default() };
    let Ok(obj) = object::File::parse(&*data) else { return Default::default() };
    let mut out = Vec::new();
    let mut has_symtab = false;
    for s in obj.symbols() {
        has_symtab = true;
        push_function(&mut out, &s);
    }
    if !has_symtab {
        if let Some(debug) = obj.build_id().ok().flatten().and_then(debug_file) {
            if let Ok(d) = object::File::parse(&*debug) {
                d.symbols().for_each(|s| push_function(&mut out, &s));
            }
        }
    }
    obj.dynamic_symbols().for_each(|s| push_function(&mut out, &s));
    out.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    out.dedup_by_key(|f| f.0);
    (out, unwind_ranges(&obj))
}

/// The function ranges the object's `.eh_frame` describes, sorted.
fn unwind_ranges(obj: &object::File) -> Vec<(usize, usize)> {
    use gimli::UnwindSection as _;
    use object::ObjectSection as _;
    let Some(section) = obj.section_by_name(".eh_frame") else { return Vec::new() };
    let Ok(data) = section.data() else { return Vec::new() };
    let eh = gimli::EhFrame::new(data, gimli::NativeEndian);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = obj.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    let mut out = Vec::new();
    let mut entries = eh.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset) {
                let start = fde.initial_address() as usize;
                out.push((start, start + fde.len() as usize));
            }
        }
    }
    out.sort_unstable();
    out
}

fn push_function<'d>(out: &mut Vec<Named>, s: &impl object::ObjectSymbol<'d>) {
    if s.kind() != SymbolKind::Text || s.address() == 0 || s.is_undefined() {
        return;
    }
    if let Ok(name) = s.name() {
        if !name.is_empty() {
            let start = s.address() as usize;
            let end = if s.size() > 0 { start + s.size() as usize } else { 0 };
            out.push((start, end, name.to_string()));
        }
    }
}

/// The separate debug file of an object with this build id, if installed.
fn debug_file(id: &[u8]) -> Option<Vec<u8>> {
    let (first, rest) = id.split_first()?;
    let hex: String = rest.iter().map(|b| format!("{:02x}", b)).collect();
    std::fs::read(format!("/usr/lib/debug/.build-id/{:02x}/{}.debug", first, hex)).ok()
}

/// A symbol's name as its language writes it.
fn demangled(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        if name.starts_with("_R") || name.contains("17h") {
            return format!("{:#}", d);
        }
    }
    if name.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(text) = s.demangle(&cpp_demangle::DemangleOptions::default()) {
                return text;
            }
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_named_function() -> usize {
        std::hint::black_box(a_named_function as *const () as usize)
    }

    #[test]
    fn a_function_of_this_program_is_named_from_its_symbol_table() {
        let at = a_named_function() + 4;
        let n = name(at).expect("a name");
        assert!(n.contains("a_named_function"), "{}", n);
    }

    #[test]
    fn a_libc_function_is_named() {
        let n = name(libc::getpid as *const () as usize + 1).expect("a name");
        assert!(n.contains("getpid"), "{}", n);
    }

    #[test]
    fn an_address_of_no_symbol_is_named_by_its_function_start_in_the_unwind_table() {
        let data = std::fs::read("/proc/self/exe").unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let ranges = unwind_ranges(&obj);
        assert!(ranges.len() > 100, "{} ranges", ranges.len());
        let at = a_named_function as *const () as usize;
        let f = functions_of(at).unwrap();
        let svma = at - f.bias;
        assert!(ranges.iter().any(|(s, e)| *s <= svma && svma < *e), "the function's range is there");
    }

    #[test]
    fn names_are_demangled() {
        assert_eq!(demangled("_ZN4love8graphics8Graphics6pointsEv"), "love::graphics::Graphics::points()");
        assert_eq!(demangled("plain_c"), "plain_c");
    }
}
