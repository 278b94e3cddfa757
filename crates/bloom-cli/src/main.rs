//! `bloom`: build, query, inspect, verify, import and measure Bloom filter snapshots.
//!
//! Exit codes: 0 success, 1 bad input, 2 usage error, 3 environment failure (writing,
//! locking, memory, Redis unreachable or too slow), 4 `check --exit-status` found an absent
//! key, 5 a Redis filter is unverified, 128 + signal when interrupted. Errors are one line on stderr: what went wrong, where, and what to do.

mod cli;
mod commands;
mod error;
mod files;
mod filters;
mod keys;
mod output;
mod progress;
mod signals;
mod stdio;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command};
use crate::commands::{
    add, build, check, export, generated, import, inspect, measure, parquet, plan, redis, remove,
    verify,
};
use crate::error::{CmdResult, Failure};
use crate::signals::Signals;

/// Writes a line to standard error. Not `eprintln!`, which panics when stderr is closed.
pub(crate) fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn main() -> ExitCode {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches).map(|cli| (cli, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            if e.use_stderr() {
                // A usage error may quote an argument: a URL with a password, given where a
                // flag's value was expected, is shown without it.
                warn(redact_urls(&render(&e)).trim_end());
                return ExitCode::from(2);
            }
            // --help and --version print to standard output: failing to is exit 3.
            if e.print().is_err() {
                return ExitCode::from(3);
            }
            return ExitCode::SUCCESS;
        }
    };
    let signals = Signals::install();
    match run(&cli.command, &matches, &signals) {
        Ok(code) => ExitCode::from(code),
        Err(Failure::Report { exit, message }) => {
            warn(&format!("error: {message}"));
            ExitCode::from(exit as u8)
        }
        Err(Failure::Interrupted(signal)) => {
            warn("interrupted: the snapshot was not written; the previous file is unchanged");
            ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
        }
        Err(Failure::OutputClosed) => ExitCode::SUCCESS,
    }
}

/// A usage error as text: in colour when standard error is a terminal and `NO_COLOR` is
/// unset or empty (<https://no-color.org>), plain otherwise.
fn render(e: &clap::Error) -> String {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    if !no_color && std::io::stderr().is_terminal() {
        e.render().ansi().to_string()
    } else {
        e.render().to_string()
    }
}

/// `text` with the user information of every URL in it (`scheme://user:password@`) replaced
/// by `***`.
fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The authority ends at the first '/', whitespace or quote; user information is what
        // comes before its last '@'.
        let end = after
            .find(|c: char| c == '/' || c.is_whitespace() || c == '\'' || c == '"')
            .unwrap_or(after.len());
        match after[..end].rfind('@') {
            Some(userinfo) => {
                out.push_str("***");
                rest = &after[userinfo..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

fn run(command: &Command, matches: &clap::ArgMatches, signals: &Signals) -> CmdResult<u8> {
    let done = |r: CmdResult| r.map(|()| 0);
    match command {
        Command::Plan(args) => done(plan::run(args)),
        Command::Build(args) => done(build::run(args, signals)),
        Command::Add(args) => done(add::run(args, signals)),
        Command::Remove(args) => remove::run(args, signals),
        Command::Check(args) => check::run(args),
        Command::Inspect(args) => done(inspect::run(args)),
        Command::Verify(args) => verify::run(args),
        Command::Import(args) => done(import::run(args, signals)),
        Command::Export(args) => done(export::run(args, signals)),
        Command::Measure(args) => done(measure::run(args)),
        Command::Redis(command) => redis::run(command),
        Command::Parquet(command) => parquet::run(command, matches),
        Command::Completions(args) => done(generated::completions(args)),
        Command::Man(args) => done(generated::man(args)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_lose_their_user_information() {
        assert_eq!(
            super::redact_urls("unexpected argument 'redis://:pw@127.0.0.1:6379/0' found"),
            "unexpected argument 'redis://***@127.0.0.1:6379/0' found"
        );
        assert_eq!(
            super::redact_urls("a rediss://user:p@ss@h:1 and redis://h:2/ b"),
            "a rediss://***@h:1 and redis://h:2/ b"
        );
        assert_eq!(super::redact_urls("no url"), "no url");
    }
}
