//! `bloom completions` and `bloom man`: generated from the clap definition, so they always
//! name exactly the commands and flags this build has.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::error::{CmdResult, Failure};
use crate::output::Out;

pub(crate) fn completions(args: &CompletionsArgs) -> CmdResult {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "bloom", &mut script);
    let mut out = Out::new();
    out.bytes(&script)?;
    out.flush()
}

pub(crate) fn man(args: &ManArgs) -> CmdResult {
    let mut command = Cli::command();
    let mut name = "bloom".to_owned();
    for part in &args.command {
        let Some(sub) = command.find_subcommand(part).cloned() else {
            let spelled = name.replace('-', " ");
            return Err(Failure::usage(format!(
                "no command `{spelled} {part}`: see `{spelled} --help`"
            )));
        };
        name = format!("{name}-{}", sub.get_name());
        command = sub;
    }
    // The page's name; clap takes a static one (one small string, once per process).
    let command = command
        .name(&*Box::leak(name.into_boxed_str()))
        .version(env!("CARGO_PKG_VERSION"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .map_err(|e| Failure::environment(format!("cannot render the manual: {e}")))?;
    let mut out = Out::new();
    out.bytes(&page)?;
    out.flush()
}
