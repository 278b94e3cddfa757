//! The tidy rules that every source file names its job: a `//!` doc at its top whose first
//! sentence says what the file does, and no top-level `use super::*;`, the mark of a file
//! cut from its parent by size rather than by job.

/// How a first sentence starts when it says where a file came from instead of what it does.
const PROVENANCE_OPENINGS: [&str; 2] = ["part of ", "the rest of "];

/// Words that, anywhere in a first sentence, say where a file came from.
const PROVENANCE_WORDS: [&str; 5] = [
    "split from",
    "split off",
    "moved from",
    "moved here",
    "tidy limit",
];

/// The breaches of both rules in one file (`file` as shown in messages), one line each.
pub(crate) fn problems(file: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    found.extend(module_doc(file, text));
    found.extend(parent_globs(file, text));
    found
}

/// The file opens with a `//!` doc whose first sentence names its job.
fn module_doc(file: &str, text: &str) -> Option<String> {
    let doc: Vec<&str> = text
        .lines()
        .skip_while(|line| line.trim().is_empty())
        .map_while(|line| line.trim_start().strip_prefix("//!"))
        .collect();
    let first = doc
        .iter()
        .map(|line| line.trim())
        .take_while(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if first.is_empty() {
        return Some(format!(
            "{file}: no `//!` doc at the top: open the file with a `//!` doc whose first \
             sentence names its job (what the file does), so that a reader knows what is here \
             and what belongs elsewhere"
        ));
    }
    let sentence = first.split(". ").next().unwrap_or_default().to_lowercase();
    let provenance = PROVENANCE_OPENINGS
        .iter()
        .find(|p| sentence.starts_with(*p))
        .or_else(|| PROVENANCE_WORDS.iter().find(|p| sentence.contains(*p)))?;
    Some(format!(
        "{file}: the `//!` doc says where the file came from ({:?}), not its job: make its \
         first sentence say what the file does",
        provenance.trim()
    ))
}

/// Every top-level `use super::*;`: a file that takes its parent's whole scope was cut from
/// it by size. Inside `#[cfg(test)] mod tests` the glob is idiomatic (and indented).
fn parent_globs(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.trim_end() == "use super::*;")
        .map(|(at, _)| {
            format!(
                "{file}:{}: top-level `use super::*;`: import by name what the file uses \
                 (`use super::{{...}}` for the parent's own items, the real paths for the \
                 rest), and if the file is a piece cut off by size, split it by job instead \
                 (the glob stays fine inside `#[cfg(test)] mod tests`)",
                at + 1
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_a_module_doc_is_found() {
        let sample = "// A plain comment.\nuse std::fmt;\n\nfn f() {}\n";
        let found = problems("crates/x/src/a.rs", sample);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("crates/x/src/a.rs: no `//!` doc"));
        assert!(found[0].contains("names its job"));
        // An empty `//!` line is no doc either.
        assert_eq!(problems("a.rs", "//!\nfn f() {}\n").len(), 1);
    }

    #[test]
    fn a_module_doc_that_names_where_the_file_came_from_is_found() {
        for sample in [
            "//! Part of `layout.rs`.\n",
            "//! The formulas, split from layout.rs (it was past the tidy limit).\n",
            "//! Code moved here from `filter/mod.rs`.\n",
        ] {
            let found = problems("a.rs", sample);
            assert_eq!(found.len(), 1, "{sample}: {found:?}");
            assert!(found[0].contains("not its job"), "{found:?}");
        }
    }

    #[test]
    fn a_module_doc_that_names_the_job_passes() {
        let sample = "//! The false-positive formulas behind `Layout`: the standard rate and\n\
                      //! the bisection that plans bits per key.\n\
                      //!\n\
                      //! The library part of the command (moved from nowhere).\n\
                      \n\
                      use std::fmt;\n";
        assert_eq!(problems("a.rs", sample), Vec::<String>::new());
        // Blank lines before the doc are allowed.
        assert!(problems("a.rs", "\n//! Reading keys.\n").is_empty());
    }

    #[test]
    fn a_top_level_glob_from_the_parent_is_found() {
        let sample = "//! Reading keys.\n\nuse super::*;\n\nfn f() {}\n";
        let found = problems("crates/x/src/m/a.rs", sample);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("crates/x/src/m/a.rs:3: top-level `use super::*;`"));
        assert!(found[0].contains("import by name"));
    }

    #[test]
    fn named_imports_and_a_glob_inside_tests_pass() {
        let sample = "//! Reading keys.\n\n\
                      use super::{Batch, ints};\n\
                      use crate::wire::Commands;\n\n\
                      #[cfg(test)]\n\
                      mod tests {\n    use super::*;\n}\n";
        assert_eq!(problems("a.rs", sample), Vec::<String>::new());
    }
}
