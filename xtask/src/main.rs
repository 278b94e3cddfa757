//! Maintenance tasks for the bloom workspace.
//!
//! - `cargo xtask fixtures` regenerates the golden fixtures of the current format version in
//!   `fixtures/v2/`; earlier versions' directories (`fixtures/v1/`) are frozen and never
//!   written.
//! - `cargo xtask fixtures --check` fails, naming each stale file and the command to run, when
//!   the committed fixtures differ from what this build generates, or when a frozen file
//!   changed, or when `fixtures/guava/` is not what its manifest says. CI runs it.
//! - `cargo xtask test [ARGS...]` is the README's test command: it installs the servers the
//!   tests start by themselves (Debian's packages, when missing and run as root; otherwise it
//!   says what to run), then runs `cargo test --workspace --locked --no-fail-fast [ARGS...]`.
//!   It builds `bloom-redis-module` first (the Redis tests load it), and runs the Redis
//!   suites a second time with the module loaded into every server they start. Then it
//!   builds the Python package with maturin into a virtual environment under `target/` and
//!   runs its pytest suite.
//! - `cargo xtask setup` installs what the build and the tests need (the test servers, and
//!   libclang for the module's bindgen) without running anything; CI runs it before clippy.
//! - `cargo xtask fuzz [--time SECONDS] [TARGET...]` builds the libFuzzer targets of `fuzz/`
//!   on the stable toolchain, seeds their corpora from `fixtures/`, and runs each for the given
//!   time (30 s by default); a crash, an allocation over 2 GiB or a hang fails it. CI runs it.
//! - `cargo xtask tidy` checks the shape of the source tree (file length, each file's `//!`
//!   doc naming its job, no top-level `use super::*;`, import circles, and errors that would
//!   show their cause twice); it also runs as a test.
//! - `cargo xtask ffi-header [--check]` generates `crates/bloom-ffi/include/bloom.h` with
//!   cbindgen, or checks that the committed header is current (CI runs the check).
//! - `cargo xtask guava-fixtures` regenerates `fixtures/guava/` with real Guava (Java and
//!   Debian's `libguava-java`, installed with apt where missing). CI never runs it.

mod error_sources;
mod ffi_header;
mod file_jobs;
mod fixtures;
mod frozen;
mod fuzz;
mod guava;
mod python;
mod readme;
mod step;
mod test;
mod tidy;
mod workspace;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["fixtures"] => fixtures::run(fixtures::Mode::Write),
        ["fixtures", "--check"] => fixtures::run(fixtures::Mode::Check),
        ["ffi-header"] => ffi_header::run(ffi_header::Mode::Write),
        ["ffi-header", "--check"] => ffi_header::run(ffi_header::Mode::Check),
        ["guava-fixtures"] => guava::generate(),
        ["setup"] => test::setup(),
        ["test", extra @ ..] => test::run(extra),
        ["fuzz", extra @ ..] => fuzz::run(extra),
        ["tidy"] => {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let problems = tidy::problems(&root);
            for problem in &problems {
                eprintln!("{problem}");
            }
            if problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        _ => {
            eprintln!(
                "usage: cargo xtask setup | cargo xtask test [CARGO TEST ARGS...] | cargo xtask fixtures [--check] | cargo xtask ffi-header [--check] | cargo xtask fuzz [--time SECONDS] [TARGET...] | cargo xtask tidy | cargo xtask guava-fixtures"
            );
            ExitCode::from(2)
        }
    }
}
