//! Maintenance tasks for the bloom workspace.
//!
//! - `cargo xtask fixtures` regenerates the golden fixtures of the current format version in
//!   `fixtures/v2/`; earlier versions' directories (`fixtures/v1/`) are frozen and never
//!   written.
//! - `cargo xtask fixtures --check` fails, naming each stale file and the command to run, when
//!   the committed fixtures differ from what this build generates, or when a frozen file
//!   changed. CI runs it.

mod fixtures;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["fixtures"] => fixtures::run(fixtures::Mode::Write),
        ["fixtures", "--check"] => fixtures::run(fixtures::Mode::Check),
        _ => {
            eprintln!("usage: cargo xtask fixtures [--check]");
            ExitCode::from(2)
        }
    }
}
