//! Maintenance tasks for the bloom workspace.
//!
//! - `cargo xtask fixtures` regenerates the golden fixtures in `fixtures/v1/`.
//! - `cargo xtask fixtures --check` fails, naming each stale file and the command to run, when
//!   the committed fixtures differ from what this build generates. CI runs it.

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
