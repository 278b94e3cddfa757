//! `bloom add`: keys into an existing snapshot, under the writers' lock.

use bloom_core::Filter as _;

use crate::cli::AddArgs;
use crate::commands::{insert_args, insert_from, require_keys};
use crate::error::{CmdResult, Failure};
use crate::files::{self, AnyFilter, Reported as _};
use crate::signals::Signals;

pub(crate) fn run(args: &AddArgs, signals: &Signals) -> CmdResult {
    require_keys(&args.keys, &args.input)?;
    let source = args.input.source();
    files::in_place("add", &args.snapshot)?;
    // Checked before a lock file is made for a path that is not there.
    if let Err(e) = std::fs::metadata(&args.snapshot) {
        return Err(Failure::environment(format!(
            "cannot read {}: {e}",
            args.snapshot.display()
        )));
    }
    // The lock covers the whole read-modify-write: two `add`s at once both keep their keys.
    // The file is read and written through the lock's target (links followed once).
    let output = files::output(&args.snapshot, !args.lock.no_wait)?;
    let mut loaded = files::load(output.path(), args.limit.max_bytes)?;
    // A chain that could not grow before (its --max-bytes was lower, say) grows now if it
    // can, with or without new keys: its newest stage is then within its plan again.
    let items_before = loaded.filter.items_inserted();
    if let AnyFilter::Scalable(chain) = &mut loaded.filter {
        let _ = chain.grow_if_full();
    }
    insert_args(&mut loaded.filter, &args.keys)?;
    let mut keys = args.keys.len() as u64;
    if let Some(source) = &source {
        keys += insert_from(&mut loaded.filter, source)?;
    }
    // More bits only add false positives: a binding to a store's history stays true, unless
    // the generation it is bound at changes.
    let header = loaded
        .filter
        .header_replacing(&loaded.header, args.generation);
    loaded
        .filter
        .check_capacity(&output.name(), args.full.strict, args.limit.max_bytes)?;
    files::write(&output, &loaded.filter, header, signals)?;
    // Keys already "maybe" (given twice, or false positives) change nothing.
    let new = loaded.filter.items_inserted().saturating_sub(items_before);
    crate::warn(&loaded.filter.summary(&format!(
        "added {keys} key{} ({new} new) to {}",
        if keys == 1 { "" } else { "s" },
        output.name()
    )));
    Ok(())
}
