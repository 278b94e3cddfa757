//! `bloom check`: maybe or absent for each key, streamed out as answered.

use crate::cli::CheckArgs;
use crate::commands::{Batch, foreign_tables_warning};
use crate::error::{CmdResult, Exit, Failure};
use crate::files;
use crate::output::{Answers, escape_key};

/// Returns the exit code: 0, or 4 with `--exit-status` when a key is absent.
pub(crate) fn run(args: &CheckArgs) -> CmdResult<u8> {
    if args.keys.is_empty() && args.input.path.is_none() {
        return Err(Failure::usage(
            "no keys given: pass KEY... or --keys PATH (- for standard input)",
        ));
    }
    let loaded = files::load(&args.snapshot, args.limit.max_bytes)?;
    let filter = &loaded.filter;
    if let Some(warning) = foreign_tables_warning(&args.snapshot, filter) {
        crate::warn(&warning);
    }
    let mut answers = Answers::new(args.json);
    let mut write = |key: &[u8], maybe: bool| answers.answer(key, maybe);
    // A key as given and its encoded form; answers are written in input order.
    let mut pending = Batch::new();
    let mut originals = Batch::new();
    let answer_pending =
        |pending: &mut Batch,
         originals: &mut Batch,
         write: &mut dyn FnMut(&[u8], bool) -> CmdResult| {
            for (key, maybe) in originals
                .keys()
                .zip(filter.contains_each_encoded(pending.keys()))
            {
                write(key, maybe)?;
            }
            pending.clear();
            originals.clear();
            Ok::<(), Failure>(())
        };
    // With foreign Unicode tables the answer depends on the raw key: one at a time.
    let one_by_one = filter.config().has_foreign_tables();
    let mut answer = |key: &[u8], line: Option<u64>| -> CmdResult {
        let bad = |e: bloom_core::KeyError| match line {
            Some(n) => Failure::input(format!("key on line {n}: {e}")),
            None => Failure::input(format!("key {}: {e}", escape_key(key))),
        };
        if one_by_one {
            let maybe = filter.contains_bytes(key).map_err(bad)?;
            return write(key, maybe);
        }
        let encoded = match filter.config().encode_bytes(key) {
            Ok(encoded) => encoded,
            Err(e) => {
                // The keys before this one are answered first: the output stays complete.
                answer_pending(&mut pending, &mut originals, &mut write)?;
                return Err(bad(e));
            }
        };
        pending.push(encoded.as_bytes());
        originals.push(key);
        if pending.is_full() {
            answer_pending(&mut pending, &mut originals, &mut write)?;
        }
        Ok(())
    };
    let read = (|| -> CmdResult {
        for key in &args.keys {
            answer(key.as_bytes(), None)?;
        }
        if let Some(source) = args.input.source() {
            source.for_each(|key, line| answer(key, Some(line)))?;
        }
        Ok(())
    })();
    // Every key read before a failure (a bad line, an unreadable key file) is answered
    // first: the output stays complete up to the line the error names.
    let answered = answer_pending(&mut pending, &mut originals, &mut write);
    read?;
    answered?;
    let any_absent = answers.finish()?;
    Ok(if args.exit_status && any_absent {
        Exit::Absent as u8
    } else {
        0
    })
}
