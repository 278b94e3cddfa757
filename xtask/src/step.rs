//! [`run`]: one step of a task (a cargo run, a pip install, pytest), said before it runs,
//! its failure said as an error.

use std::process::Command;

/// Runs one step, saying what it runs (`what`); whether it succeeded, and why not.
pub(crate) fn run(command: &mut Command, what: &str) -> Result<(), String> {
    eprintln!("running: {what}");
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{what} failed ({status})")),
        Err(e) => Err(format!("cannot run {what}: {e}")),
    }
}
