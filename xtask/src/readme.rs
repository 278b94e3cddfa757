//! The README's first Rust example is `crates/bloom-store/examples/quickstart.rs` word for
//! word (between its `// README begin` and `// README end` lines): the example is compiled
//! and run by the tests, so the code a newcomer copies from the first screen works.

use std::path::Path;

/// The example the README's first Rust block is taken from.
const EXAMPLE: &str = "crates/bloom-store/examples/quickstart.rs";

/// Where the README and the example disagree, one line each.
pub(crate) fn problems(root: &Path) -> Vec<String> {
    let (Ok(readme), Ok(example)) = (
        std::fs::read_to_string(root.join("README.md")),
        std::fs::read_to_string(root.join(EXAMPLE)),
    ) else {
        return vec![format!("README.md or {EXAMPLE}: unreadable")];
    };
    match (first_rust_block(&readme), marked(&example)) {
        (Some(shown), Some(compiled)) if shown == compiled => Vec::new(),
        (Some(_), Some(_)) => vec![format!(
            "README.md: its first ```rust block differs from {EXAMPLE} between `// README begin` and `// README end`: change both together"
        )],
        _ => vec![format!(
            "README.md or {EXAMPLE}: no first ```rust block, or no `// README begin` / `// README end` lines"
        )],
    }
}

/// The lines of the first ```rust block, as they stand.
fn first_rust_block(text: &str) -> Option<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| l.trim() != "```rust").skip(1);
    let block: Vec<String> = lines
        .by_ref()
        .take_while(|l| l.trim() != "```")
        .map(str::to_owned)
        .collect();
    (!block.is_empty()).then_some(block)
}

/// The marked lines of the example, with the indentation of the first taken off.
fn marked(text: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim() != "// README begin")
        .skip(1)
        .take_while(|l| l.trim() != "// README end")
        .collect();
    let indent = lines.first()?.len() - lines.first()?.trim_start().len();
    Some(
        lines
            .iter()
            .map(|l| l.get(indent..).unwrap_or(l.trim_start()).to_owned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_and_the_marked_lines_are_compared_without_the_indent() {
        let readme = "# x\n\n```rust\nlet a = 1;\nif a > 0 {\n    f();\n}\n```\n";
        let example = "fn main() {\n    // README begin\n    let a = 1;\n    if a > 0 {\n        f();\n    }\n    // README end\n}\n";
        assert_eq!(first_rust_block(readme), marked(example));
        let changed = example.replace("a > 0", "a > 1");
        assert_ne!(first_rust_block(readme), marked(&changed));
        assert_eq!(marked("no markers"), None);
    }
}
