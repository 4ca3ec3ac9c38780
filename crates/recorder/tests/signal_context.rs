//! Every function that runs in a signal handler is listed, with the
//! handler it runs in, in `tecs_profile_recorder::sys::signal_context`: this test
//! reads the crate's source, follows each handler's calls by name, and
//! fails on a function that a handler reaches but the list does not name,
//! on a listed function no handler reaches, and on a signal handler the
//! crate installs that is not one of the list's handlers.

mod rust_source;

use std::collections::{BTreeMap, BTreeSet};

use rust_source::Crate;
use tecs_profile_recorder::sys::signal_context::{HANDLERS, SIGNAL_CONTEXT};

/// Every function reachable from the handlers, with the chain of calls
/// that reaches it (for the failure message).
fn reachable(c: &Crate) -> BTreeMap<String, Vec<String>> {
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut todo: Vec<(usize, Vec<String>)> = Vec::new();
    for h in HANDLERS {
        let k = c.by_id(h.entry).unwrap_or_else(|| panic!("the handler {} is not a function of the crate", h.entry));
        todo.push((k, vec![h.entry.to_string()]));
    }
    while let Some((k, chain)) = todo.pop() {
        let id = c.functions[k].id();
        if seen.contains_key(&id) {
            continue;
        }
        seen.insert(id, chain.clone());
        for callee in c.callees(&c.functions[k]) {
            let mut next = chain.clone();
            next.push(c.functions[callee].id());
            todo.push((callee, next));
        }
    }
    seen
}

#[test]
fn every_function_a_signal_handler_reaches_is_listed() {
    let c = Crate::read();
    let reached = reachable(&c);
    let listed: BTreeSet<&str> = SIGNAL_CONTEXT.iter().map(|e| e.function).collect();
    let missing: Vec<String> = reached
        .iter()
        .filter(|(id, _)| !listed.contains(id.as_str()))
        .map(|(id, chain)| format!("{}\n    reached by {}", id, chain.join(" -> ")))
        .collect();
    assert!(
        missing.is_empty(),
        "functions that run in a signal handler but are not in sys::signal_context::SIGNAL_CONTEXT:\n{}",
        missing.join("\n")
    );
    let stale: Vec<&str> = listed.iter().copied().filter(|id| !reached.contains_key(*id)).collect();
    assert!(stale.is_empty(), "listed in SIGNAL_CONTEXT, but no handler reaches them: {:?}", stale);
}

#[test]
fn every_entry_says_why_it_is_safe_and_every_handler_what_arms_it() {
    for h in HANDLERS {
        assert!(!h.signals.is_empty() && h.armed_by.len() > 10, "{}: its signals and what arms it", h.entry);
    }
    let mut ids = BTreeSet::new();
    for e in SIGNAL_CONTEXT {
        assert!(ids.insert(e.function), "{} is listed twice", e.function);
        assert!(e.why_safe.len() > 10, "{}: say why it may run in a handler", e.function);
    }
}

#[test]
fn every_signal_handler_the_crate_installs_is_one_of_the_handlers() {
    let c = Crate::read();
    let mut installed = BTreeSet::new();
    for f in &c.functions {
        let file = c.file(&f.file);
        let body = &file.code[f.body.0..f.body.1];
        if !body.contains("sa_sigaction") {
            continue;
        }
        // `handler as ...`: a function's address taken for the disposition.
        for g in c.functions.iter().filter(|g| g.file == f.file && g.owner.is_none()) {
            let cast = format!("{} as ", g.name);
            if body.match_indices(&cast).any(|(at, _)| {
                at == 0 || !body.as_bytes()[at - 1].is_ascii_alphanumeric() && body.as_bytes()[at - 1] != b'_'
            }) {
                installed.insert(g.id());
            }
        }
    }
    let listed: BTreeSet<String> = HANDLERS.iter().map(|h| h.entry.to_string()).collect();
    assert!(installed.len() >= 4, "handlers found: {:?}", installed);
    assert_eq!(installed, listed, "signal handlers installed (left) and listed in HANDLERS (right)");
}
