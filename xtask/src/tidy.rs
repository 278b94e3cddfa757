//! `cargo xtask tidy`: the shape of the source tree, checked (and run as a test).
//!
//! - **One job per file.** No source file under `crates/*/src` or `xtask/src` is longer than
//!   [`MAX_LINES`] lines. The limit is a smell detector, not a target: a file past it likely
//!   does more than one thing, and is split by job (never cut where the count runs out).
//! - **Each file names its job.** Every source file opens with a `//!` doc whose first
//!   sentence says what the file does, and none takes its parent's whole scope with a
//!   top-level `use super::*;` (see [`crate::file_jobs`]).
//! - **No import circles inside a crate.** The top-level modules of a crate (a file under
//!   `src/`, or a directory with its `mod.rs` and children, as one) depend on each other
//!   through `crate::module` paths; that graph has no cycle, so each module can be read
//!   knowing only the ones below it. A child reaching its parent with `super::` is inside
//!   one module and does not count.
//! - **An error shows its cause once.** No `thiserror` message prints a field thiserror also
//!   returns from `source()` (see [`crate::error_sources`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{error_sources, file_jobs};

/// The longest a source file may be.
pub(crate) const MAX_LINES: usize = 650;

/// Every breach of the rules, one line each.
pub(crate) fn problems(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let mut roots: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| e.path().join("src"))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    roots.push(root.join("xtask/src"));
    roots.sort();
    for src in roots {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let Ok(text) = std::fs::read_to_string(file) else {
                problems.push(format!("{}: unreadable", file.display()));
                continue;
            };
            let lines = text.lines().count();
            if lines > MAX_LINES {
                problems.push(format!(
                    "{}: {lines} lines, over {MAX_LINES}: split it by job, not by size: move \
                     each thing it does into a file of its own, and name that file's job in the \
                     first sentence of its `//!` doc (cutting off lines to get under the limit \
                     is not a split)",
                    shown(root, file)
                ));
            }
            problems.extend(error_sources::problems(&shown(root, file), &text));
            problems.extend(file_jobs::problems(&shown(root, file), &text));
            let Some(from) = top_module(&src, file) else {
                continue;
            };
            let to = edges.entry(from.clone()).or_default();
            for used in crate_paths(&text) {
                if used != from && src_has_module(&src, &used) {
                    to.insert(used);
                }
            }
        }
        for cycle in cycles(&edges) {
            problems.push(format!(
                "{}: import circle {}",
                shown(root, &src),
                cycle.join(" -> ")
            ));
        }
    }
    problems.extend(crate::readme::problems(root));
    problems
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate's top-level module a file belongs to (`None` for the crate root).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

fn src_has_module(src: &Path, name: &str) -> bool {
    src.join(format!("{name}.rs")).is_file() || src.join(name).join("mod.rs").is_file()
}

/// The modules named by `crate::NAME` paths in a file, outside comments.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
            rest = after;
        }
        // `use crate::{a, b::c}` names several.
        if let Some(at) = code.find("crate::{") {
            let list = &code[at + "crate::{".len()..];
            for part in list.split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        }
    }
    found
}

/// One cycle through each strongly connected part of more than one module.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    for start in edges.keys() {
        if reported.contains(start) {
            continue;
        }
        // A path from `start` back to itself, by breadth-first search.
        let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.as_str()]);
        let mut closed = None;
        while let Some(at) = queue.pop_front() {
            for next in edges.get(at).into_iter().flatten() {
                if next == start {
                    closed = Some(at);
                    break;
                }
                if !previous.contains_key(next.as_str()) {
                    previous.insert(next, at);
                    queue.push_back(next);
                }
            }
            if closed.is_some() {
                break;
            }
        }
        let Some(mut at) = closed else {
            continue;
        };
        let mut cycle = vec![start.clone()];
        let mut back = Vec::new();
        while at != start {
            back.push(at.to_owned());
            at = previous.get(at).copied().unwrap_or(start);
        }
        back.reverse();
        cycle.extend(back);
        cycle.push(start.clone());
        reported.extend(cycle.iter().cloned());
        found.push(cycle);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_has_one_job_per_file_and_no_import_circle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let problems = problems(&root);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn a_circle_is_found_and_a_chain_is_not() {
        let graph = |pairs: &[(&str, &str)]| {
            let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (a, b) in pairs {
                edges
                    .entry((*a).to_owned())
                    .or_default()
                    .insert((*b).to_owned());
                edges.entry((*b).to_owned()).or_default();
            }
            edges
        };
        assert!(cycles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
        let found = cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
        assert_eq!(found, [["a", "b", "c", "a"]]);
        assert_eq!(
            crate_paths("use crate::{x::Y, z};\nlet a = crate::w::f(); // crate::comment"),
            BTreeSet::from(["w".to_owned(), "x".to_owned(), "z".to_owned()])
        );
    }
}
