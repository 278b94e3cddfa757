//! `bloom remove`: keys out of a counting snapshot, under the writers' lock.

use bloom_core::{Filter, RemoveError};

use crate::cli::RemoveArgs;
use crate::commands::{key_batches, require_keys};
use crate::error::{CmdResult, Exit, Failure};
use crate::files::{self, AnyFilter, Reported as _};
use crate::output::{Out, escape_key};
use crate::signals::Signals;

/// Returns the exit code: 0, or 1 when a key was left alone (listed on standard output).
pub(crate) fn run(args: &RemoveArgs, signals: &Signals) -> CmdResult<u8> {
    require_keys(&args.keys, &args.input)?;
    crate::progress::reports_on_stdout();
    files::in_place("remove", &args.snapshot)?;
    if let Err(e) = std::fs::metadata(&args.snapshot) {
        return Err(Failure::environment(format!(
            "cannot read {}: {e}",
            args.snapshot.display()
        )));
    }
    // The lock covers the whole read-modify-write, as for `add`.
    let output = files::output(&args.snapshot, !args.lock.no_wait)?;
    let mut loaded = files::load(output.path(), args.limit.max_bytes)?;
    let AnyFilter::Counting(filter) = &mut loaded.filter else {
        let kind = if matches!(loaded.filter, AnyFilter::Scalable(_)) {
            "a scalable filter"
        } else {
            "a plain filter"
        };
        return Err(Failure::input(format!(
            "{} is {kind} (layout {}): its bits cannot be taken back; build a counting one with `bloom build --counting`",
            args.snapshot.display(),
            loaded.header.layout
        )));
    };
    let config = filter.config().clone();
    let mut out = Out::new();
    // The listing is a report; the file is the work. A reader that went away (`| head`)
    // stops the listing, not the removal: the file is still written.
    let mut listing = true;
    let mut list = |out: &mut Out, line: String| -> CmdResult {
        if listing {
            match out.text(&line) {
                Err(Failure::OutputClosed) => listing = false,
                other => other?,
            }
        }
        Ok(())
    };
    let (mut removed, mut left) = (0u64, 0u64);
    let mut foreign = false;
    // With foreign Unicode tables a key's fate depends on its raw text (ASCII keys are
    // located, the others cannot be), as in `check`; otherwise the encoded batch is used.
    let foreign_tables = config.has_foreign_tables();
    key_batches(&config, &args.keys, &args.input, |keys| {
        for (key, encoded) in keys.given().zip(keys.encoded()) {
            let removal = if foreign_tables {
                filter.remove(key)
            } else {
                filter.remove(&encoded)
            };
            match removal {
                Ok(()) => removed += 1,
                Err(RemoveError::Absent) => {
                    left += 1;
                    list(&mut out, format!("absent\t{}\n", escape_key(key)))?;
                }
                Err(RemoveError::ForeignTables) => {
                    left += 1;
                    foreign = true;
                    list(&mut out, format!("unknown\t{}\n", escape_key(key)))?;
                }
                Err(e) => {
                    return Err(Failure::input(format!("key {}: {e}", escape_key(key))));
                }
            }
        }
        Ok(())
    })?;
    match out.flush() {
        Err(Failure::OutputClosed) | Ok(()) => {}
        Err(e) => return Err(e),
    }
    if foreign {
        crate::warn(&format!(
            "warning: {} was built with other Unicode tables than this build's; keys outside ASCII (listed as unknown) cannot be located and were left alone",
            args.snapshot.display()
        ));
    }
    let generation = args
        .generation
        .map_or(loaded.header.dataset_generation, Into::into);
    // No store binding survives: the store still holds the removed keys as far as the
    // snapshot's history digest says, and a store must never trust a filter without them.
    let header = loaded.filter.header(generation);
    if loaded.header.store.is_some() {
        crate::warn("note: the snapshot was bound to a store; the copy without these keys is not");
    }
    files::write(&output, &loaded.filter, header, signals)?;
    crate::warn(&loaded.filter.summary(&format!(
        "removed {removed} key{} from {}; {left} reported absent and left alone",
        if removed == 1 { "" } else { "s" },
        output.name(),
    )));
    Ok(if left > 0 { Exit::Input as u8 } else { 0 })
}
