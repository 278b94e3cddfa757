//! `bloom completions` and `bloom man`: generated from the clap definition, so they always
//! name exactly the commands and flags this build has.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::error::CmdResult;
use crate::output::Out;

pub(crate) fn completions(args: &CompletionsArgs) -> CmdResult {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "bloom", &mut script);
    let mut out = Out::new();
    out.bytes(&script)?;
    out.flush()
}

pub(crate) fn man() -> CmdResult {
    let mut page = Vec::new();
    // Rendering into memory cannot fail; an error would be a bug of the renderer.
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(|e| {
            crate::error::Failure::environment(format!("cannot render the manual: {e}"))
        })?;
    let mut out = Out::new();
    out.bytes(&page)?;
    out.flush()
}
